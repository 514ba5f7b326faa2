// Tidal's dashboard: one panel per run, fed by Server-Sent Events. No framework, no CDN:
// the graph and the charts are SVG drawn here, so the page works offline from the package.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const runs = [];                 // one model per run served
const WINDOW = 900;              // seconds of series shown in the charts

function el(tag, attrs = {}, ...children) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v);
  }
  for (const c of children) if (c) node.append(c);
  return node;
}
const fmt = (x, digits = 0) => x === null || x === undefined || Number.isNaN(x) ? "—"
  : Number(x).toLocaleString("en-US", { maximumFractionDigits: digits });

// -- the model ---------------------------------------------------------------------------------

function newRun(info) {
  return { id: info.id, name: info.run, path: info.path, graph: null, status: null, series: [], events: [], faults: [],
           selected: null, decision: null, filterVertex: "", filterRule: "", dirty: true, receivedAt: 0 };
}

function apply(run, data, full) {
  if (full) { run.graph = data.graph; run.series = []; run.events = []; run.faults = []; }
  if (data.status) run.status = data.status;
  if (data.series) run.series.push(...data.series);
  if (data.events) run.events.push(...data.events);
  if (data.faults) run.faults.push(...data.faults);
  run.receivedAt = performance.now();
  if (!run.selected && run.graph && run.graph.vertices) {
    const udf = run.graph.vertices.find(v => v.kind === "udf") || run.graph.vertices[0];
    run.selected = udf ? udf.name : null;
  }
  run.dirty = true;
  schedule();
}

let scheduled = false;
function schedule() {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(() => { scheduled = false; for (const r of runs) if (r.dirty) render(r); });
}

// -- rendering ---------------------------------------------------------------------------------

function render(run) {
  const panel = document.getElementById(`run-${run.id}`);
  // A person choosing in a filter keeps the control: redraw once it loses focus.
  const focused = document.activeElement;
  if (focused && focused.tagName === "SELECT" && panel.contains(focused)) {
    focused.addEventListener("blur", () => { run.dirty = true; schedule(); }, { once: true });
    return;
  }
  run.dirty = false;
  const scroll = panel.querySelector(".scroll");
  const top = scroll ? scroll.scrollTop : 0;
  panel.replaceChildren(...panelContent(run));
  const again = panel.querySelector(".scroll");
  if (again) again.scrollTop = top;
  panel.dataset.rendered = String(performance.now());
}

function stateBadge(status) {
  if (!status || status.error) return el("span", { class: "badge dead", text: "no status" });
  const age = Date.now() / 1000 - status.at;
  if (status.state === "stopped") return el("span", { class: "badge stopped", text: "finished" });
  // A pause (tidal pause, the control API) shows as Pausing / Paused, as Numaflow's phases.
  if (age < 5 && status.phase && status.phase !== "Running")
    return el("span", { class: "badge paused", "data-phase": status.phase, text: status.phase.toLowerCase() });
  if (age < 5) return el("span", { class: "badge running", "data-phase": "Running", text: "running" });
  return el("span", { class: "badge dead", text: `not running (no update for ${fmt(age)} s)` });
}

function panelContent(run) {
  const out = [];
  const title = run.graph && run.graph.pipeline ? run.graph.pipeline : run.name;
  out.push(el("h2", {}, document.createTextNode(`${title} `), stateBadge(run.status)));
  out.push(el("div", { class: "where", text: run.path }));
  for (const e of [run.graph && run.graph.error, run.status && run.status.error]) {
    if (e) out.push(el("div", { class: "error", text: e }));
  }
  if (!run.graph || run.graph.error) return out;
  out.push(el("section", {}, el("h3", { text: "pipeline" }), graphSvg(run)));
  if (run.selected) out.push(el("section", {}, el("h3", { text: `vertex ${run.selected}` }),
    el("p", { class: "vertical", text: verticalText(statusOf(run, run.selected)) }), charts(run)));
  out.push(el("section", { class: "decision-detail" }, el("h3", { text: "decision" }), detail(run)));
  out.push(el("section", {}, el("h3", { text: "why did it scale? — the event log" }), eventLog(run)));
  if (run.faults.length)
    out.push(el("section", {}, el("h3", { text: "faults — what happened to the run" }), faultLog(run)));
  return out;
}

// The vertical recommendation (VPA's recommender) of a replica: memory and cores, with bounds.
function verticalText(s) {
  const rec = s && s.vertical;
  if (!rec) return s && s.chain && s.chain.split(">")[0] !== s.name
    ? `vertical: see ${s.chain.split(">")[0]}, whose query runs it` : "vertical: no task measured yet";
  const mib = b => `${fmt(b / 1048576)} MiB`, m = rec.memory_bytes, c = rec.cpu_cores;
  const from = `from ${fmt(rec.samples)} micro-batches over ${fmt(rec.history_seconds / 60, 1)} min`;
  if (rec.history_seconds < 600)  // VPA's bounds stay wide open on a young history: the target alone
    return `vertical, per replica: memory ${mib(m.target)}, cores ${fmt(c.target, 2)}, ${from} (bounds after 10 min)`;
  return `vertical, per replica: memory ${mib(m.target)} (${mib(m.lower)}–${mib(m.upper)}), `
    + `cores ${fmt(c.target, 2)} (${fmt(c.lower, 2)}–${fmt(c.upper, 2)}), ${from}`;
}

function statusOf(run, name) {
  const vs = run.status && run.status.vertices ? run.status.vertices : [];
  return vs.find(v => v.name === name) || null;
}

function depths(graph) {
  const depth = {};
  for (const v of graph.vertices) depth[v.name] = 0;
  for (let i = 0; i < graph.vertices.length; i++)
    for (const e of graph.edges) depth[e.to] = Math.max(depth[e.to], depth[e.from] + 1);
  return depth;
}

function graphSvg(run) {
  const g = run.graph, depth = depths(g), cols = {};
  for (const v of g.vertices) (cols[depth[v.name]] ||= []).push(v);
  const W = 190, H = 86, GX = 80, GY = 22;
  const ncol = Object.keys(cols).length, nrow = Math.max(...Object.values(cols).map(c => c.length));
  const width = ncol * W + (ncol - 1) * GX + 20, height = nrow * H + (nrow - 1) * GY + 20;
  const pos = {};
  for (const [c, vs] of Object.entries(cols)) vs.forEach((v, i) => {
    const offset = (height - 20 - (vs.length * H + (vs.length - 1) * GY)) / 2;
    pos[v.name] = { x: 10 + Number(c) * (W + GX), y: 10 + offset + i * (H + GY) };
  });
  const svg = el("svg:svg", { class: "graph", viewBox: `0 0 ${width} ${height}`, role: "img" });
  const limits = g.limits, usable = limits.bufferMaxLength * limits.bufferUsageLimit;
  for (const e of g.edges) {
    const a = pos[e.from], b = pos[e.to], s = statusOf(run, e.to);
    const fill = s && s.usage !== null && s.usage !== undefined ? s.usage : null;   // stored / maxLength
    const pressure = s && s.pending !== null && s.pending !== undefined ? s.pending / usable : 0;
    const cls = e.chained ? "chained" : pressure >= limits.backPressureThreshold ? "bad" : pressure >= 0.5 ? "warn" : "ok";
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
    // A chained edge has no buffer: both ends run in one query, drawn as one link.
    svg.append(el("svg:path", { class: `edge ${cls}`, d: `M${x1},${y1} C${x1 + GX / 2},${y1} ${x2 - GX / 2},${y2} ${x2},${y2}`,
                                "data-edge": `${e.from}->${e.to}`, "data-pressure": cls, "data-chained": e.chained ? "1" : "0" },
      el("svg:title", { text: `${e.from} → ${e.to}: ${e.chained ? "chained" : "not chained"} (${e.reason || ""})` })));
    svg.append(el("svg:text", { class: "edge-label", x: (x1 + x2) / 2 - 26, y: (y1 + y2) / 2 - 6,
      text: e.chained ? "chained" : fill === null ? "" : `${fmt(100 * fill)}% / ${fmt(100 * limits.bufferUsageLimit)}%` }));
  }
  for (const v of g.vertices) {
    const p = pos[v.name], s = statusOf(run, v.name) || {};
    const replicas = s.desired !== null && s.desired !== undefined && s.desired !== s.replicas
      ? `${s.replicas} → ${s.desired}` : `${s.replicas ?? "—"}`;
    const classes = ["node", run.selected === v.name ? "selected" : "", s.stuck_for ? "stuck" : ""].join(" ");
    const node = el("svg:g", { class: classes, "data-vertex": v.name, "data-replicas": s.replicas ?? "",
      "data-desired": s.desired ?? "", transform: `translate(${p.x},${p.y})`,
      onclick: () => { run.selected = v.name; run.decision = null; run.dirty = true; schedule(); } },
      el("svg:rect", { width: W, height: H }),
      el("svg:text", { class: "name", x: 10, y: 18, text: v.name }),
      el("svg:text", { class: "kind", x: W - 10, y: 18, "text-anchor": "end", text: v.kind }),
      el("svg:text", { class: `line replicas ${s.replicas === 0 ? "zero" : ""}`, x: 10, y: 38, text: `replicas ${replicas}` }),
      el("svg:text", { class: "line", x: 10, y: 55, text: `rate ${fmt(s.rate, 1)}/s · pending ${fmt(s.pending)}` }),
      el("svg:text", { class: "line", x: 10, y: 72,
        text: s.stuck_for ? `STUCK ${fmt(s.stuck_for)} s` : `processed ${fmt(s.processed)}${s.dead ? ` · ${fmt(s.dead)} dead` : ""}${s.dropped ? ` · ${fmt(s.dropped)} dropped${s.drops ? ` (${Object.entries(s.drops).map(([why, n]) => `${fmt(n)} ${why}`).join(", ")})` : ""}` : ""}${s.watermark ? ` · wm ${String(s.watermark).slice(11, 19)}` : ""}` }));
    svg.append(node);
  }
  return svg;
}

function vertexSeries(run, name) {
  const rows = run.series.filter(r => r.name === name);
  if (!rows.length) return [];
  const end = rows[rows.length - 1].at, out = [];
  let prev = null;
  for (const r of rows) {
    if (r.at < end - WINDOW) { prev = r; continue; }
    const arrived = (r.processed || 0) + (r.pending || 0);
    let arrival = null;
    if (prev && r.at > prev.at) arrival = Math.max(0, (arrived - ((prev.processed || 0) + (prev.pending || 0))) / (r.at - prev.at));
    out.push({ at: r.at, arrival, rate: r.rate, pending: r.pending, replicas: r.replicas, desired: r.desired });
    prev = r;
  }
  return out;
}

function chart(title, keys, points, t0, t1, opts = {}) {
  const W = Math.max(320, opts.width || 600), H = 130, L = 46, R = 8, T = 8, B = 18;
  let ymax = 1;
  for (const p of points) for (const k of keys) if (p[k.field] !== null && p[k.field] !== undefined) ymax = Math.max(ymax, p[k.field]);
  ymax *= 1.1;
  const x = t => L + (W - L - R) * (t1 > t0 ? (t - t0) / (t1 - t0) : 0);
  const y = v => T + (H - T - B) * (1 - v / ymax);
  const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H });
  svg.append(el("svg:line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  svg.append(el("svg:line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  svg.append(el("svg:text", { class: "tick", x: L - 4, y: T + 8, "text-anchor": "end", text: fmt(ymax / 1.1) }));
  svg.append(el("svg:text", { class: "tick", x: L - 4, y: H - B, "text-anchor": "end", text: "0" }));
  svg.append(el("svg:text", { class: "tick", x: W - R, y: H - 4, "text-anchor": "end", text: `${fmt(t1 - t0)} s` }));
  // Faults under the lines: a band from the fault to its end where one is known, else a line.
  for (const f of opts.faults || []) {
    if (f.at > t1 || (f.until ?? f.at) < t0) continue;
    const a = x(Math.max(f.at, t0)), b = f.until === null ? a : x(Math.min(f.until, t1));
    const band = el("svg:g", { class: `fault-band ${f.until === null ? "instant" : "span"}`, "data-kind": f.kind,
                               "data-who": f.who },
      f.until === null ? el("svg:line", { x1: a, y1: T, x2: a, y2: H - B })
                       : el("svg:rect", { x: a, y: T, width: Math.max(2, b - a), height: H - B - T }),
      el("svg:text", { x: a + 3, y: T + 10, text: f.kind }),
      el("svg:title", { text: faultTitle(f) }));
    svg.append(band);
  }
  for (const k of keys) {
    let d = "", last = null;
    for (const p of points) {
      const v = p[k.field];
      if (v === null || v === undefined) { last = null; continue; }
      if (k.step && last !== null) d += `L${x(p.at)},${y(last)}`;
      d += `${d && last !== null ? "L" : "M"}${x(p.at)},${y(v)}`;
      last = v;
    }
    svg.append(el("svg:path", { d, fill: "none", stroke: k.color, "stroke-width": k.width || 1.8, "stroke-dasharray": k.dash }));
  }
  if (opts.markers) opts.markers(svg, x, y);
  const key = el("div", { class: "title" }, el("b", { text: title }),
    ...keys.map(k => el("span", { class: "key" }, el("i", { style: `background:${k.color}` }), document.createTextNode(k.label))));
  return el("div", { class: "chart" }, key, svg);
}

function charts(run) {
  const points = vertexSeries(run, run.selected);
  if (!points.length) return el("div", { class: "muted", text: "no samples yet" });
  const t0 = points[0].at, t1 = points[points.length - 1].at;
  const decisions = run.events.filter(e => e.vertex === run.selected && e.at >= t0);
  // Holds first, changes on top of them: a change is what a person clicks.
  const ordered = [...decisions.filter(d => d.desired === d.current), ...decisions.filter(d => d.desired !== d.current)];
  const width = (document.getElementById(`run-${run.id}`).clientWidth || 640) - 36;
  const faults = faultSpans(run);
  const markers = (svg, x, y) => ordered.forEach((d, i) => {
    const kind = d.desired > d.current ? "up" : d.desired < d.current ? "down" : "hold";
    svg.append(el("svg:circle", { class: `decision-marker ${kind}`, cx: x(Math.min(d.at, t1)), cy: y(d.desired),
      r: kind === "hold" ? 3.5 : 5.5,
      "data-rule": d.rule, "data-index": i,
      onclick: () => { run.decision = d; run.dirty = true; schedule(); } },
      el("svg:title", { text: `${d.rule}: ${d.current} → ${d.desired}` })));
  });
  return el("div", { class: "charts" },
    chart("messages/s", [{ field: "arrival", label: "arriving", color: "#14a3b8", width: 1.2 },
                         { field: "rate", label: "processing (lookback avg)", color: "#2f6fde" }], points, t0, t1, { width, faults }),
    chart("pending now", [{ field: "pending", label: "pending", color: "#e08a1a" }], points, t0, t1, { width, faults }),
    chart("replicas", [{ field: "replicas", label: "replicas", color: "#1d2430", step: true },
                       { field: "desired", label: "desired", color: "#98a2b3", step: true, dash: "4 3" }],
          points, t0, t1, { markers, width, faults }),
    el("div", { class: "muted", text: "dots are decisions: click one to see its rule, inputs and reason; "
      + "shaded bands (a line: no known end) are faults, hover one for its cause" }));
}

function detail(run) {
  const d = run.decision;
  if (!d) return el("div", { class: "muted", text: "click a decision (a dot on the replicas chart, or a row of the log)" });
  return el("div", { class: "detail", "data-rule": d.rule },
    el("div", {}, el("span", { class: "rule", text: d.rule }), document.createTextNode(`  ${d.vertex}: ${d.current} → ${d.desired}`)),
    el("div", { class: "reason", text: d.reason }),
    el("pre", { class: "inputs", text: JSON.stringify(d.inputs || {}, null, 1) }));
}

function eventLog(run) {
  const vertices = run.graph.vertices.map(v => v.name);
  const rules = [...new Set(run.events.map(e => e.rule))].sort();
  const select = (value, options, label, set) => el("select", { "aria-label": label,
    onchange: ev => { set(ev.target.value); run.dirty = true; ev.target.blur(); schedule(); } },
    el("option", { value: "", text: `every ${label}` }),
    ...options.map(o => el("option", { value: o, text: o, selected: o === value })));
  const filters = el("div", { class: "filters" },
    select(run.filterVertex, vertices, "vertex", v => { run.filterVertex = v; }),
    select(run.filterRule, rules, "rule", v => { run.filterRule = v; }));
  const shown = run.events.filter(e => (!run.filterVertex || e.vertex === run.filterVertex)
                                    && (!run.filterRule || e.rule === run.filterRule));
  const start = run.events.length ? run.events[0].at : 0;
  const rows = shown.slice(-300).reverse().map(e => el("tr", { class: "event-row", "data-vertex": e.vertex, "data-rule": e.rule,
      onclick: () => { run.decision = e; run.dirty = true; schedule(); } },
    el("td", { text: fmt(e.at - start, 1) }), el("td", { text: e.vertex }),
    el("td", { text: e.desired !== e.current ? `${e.current} → ${e.desired}` : `${e.current}` }),
    el("td", { text: e.rule }), el("td", { text: e.reason })));
  const table = el("table", { class: "events" },
    el("thead", {}, el("tr", {}, ...["t (s)", "vertex", "replicas", "rule", "reason"].map(h => el("th", { text: h })))),
    el("tbody", {}, ...rows));
  return el("div", {}, filters, el("div", { class: "muted", text: `${shown.length} of ${run.events.length} decisions` }),
            el("div", { class: "scroll" }, table));
}

// What happened *to* the run (faults.jsonl, executors lost): each fault with when it ended, where
// that is known — a timed fault's ``lifted``, a buffer server silent until it is ``back`` — else
// null (drawn as a line: a receiver lost, a process killed).
const ENDS = { "buffer server silent": "buffer server back" };
function faultSpans(run) {
  const out = [];
  run.faults.forEach((f, i) => {
    if (Object.values(ENDS).includes(f.kind)) return;  // the end of another fault, not one itself
    let until = typeof f.lifted === "number" ? f.lifted : null;
    if (until === null && ENDS[f.kind]) {
      const end = run.faults.slice(i + 1).find(g => g.kind === ENDS[f.kind] && g.server === f.server);
      if (end) until = end.at;
    }
    out.push({ at: f.at, until, kind: f.kind, who: f.who, reason: f.reason, row: f });
  });
  return out;
}
const faultTitle = f => `${f.kind} (${f.who}): ${f.reason}`
  + (f.until !== null && f.until !== undefined ? ` — for ${fmt(f.until - f.at, 1)} s` : "");

function faultLog(run) {
  const times = [...run.events.map(e => e.at), ...run.faults.map(f => f.at)];
  const start = Math.min(...times), ends = new Map(faultSpans(run).map(s => [s.row, s.until]));
  const rows = [...run.faults].reverse().map(f => el("tr", { class: "fault-row", "data-kind": f.kind, "data-who": f.who,
      title: faultTitle({ ...f, until: ends.get(f) ?? null }) },
    el("td", { text: fmt(f.at - start, 1) }), el("td", { text: f.who }), el("td", { text: f.kind }),
    el("td", { text: typeof ends.get(f) === "number" ? `${fmt(ends.get(f) - f.at, 1)} s` : "" }),
    el("td", { class: "cause", text: f.reason })));
  const table = el("table", { class: "events faults" },
    el("thead", {}, el("tr", {}, ...["t (s)", "who", "fault", "lasted", "cause"].map(h => el("th", { text: h })))),
    el("tbody", {}, ...rows));
  return el("div", {}, el("div", { class: "muted", text: `${run.faults.length} faults` }),
            el("div", { class: "scroll faults-scroll" }, table));
}

// -- wiring --------------------------------------------------------------------------------------

function connect(run) {
  const source = new EventSource(`/api/runs/${run.id}/stream`);
  source.addEventListener("snapshot", ev => apply(run, JSON.parse(ev.data), true));
  source.addEventListener("update", ev => apply(run, JSON.parse(ev.data), false));
  source.onopen = () => setConnection("live", "live");
  source.onerror = () => setConnection("reconnecting…", "dead");
}

function setConnection(text, cls) {
  const badge = document.getElementById("connection");
  badge.textContent = text;
  badge.className = `badge ${cls}`;
}

async function main() {
  const container = document.getElementById("runs");
  let list;
  try {
    const response = await fetch("/api/runs");
    list = await response.json();
  } catch (err) {
    container.append(el("div", { class: "error", text: `cannot reach the dashboard server: ${err}` }));
    return;
  }
  container.style.setProperty("--columns", String(Math.min(list.length, 3)));
  for (const info of list) {
    const run = newRun(info);
    runs.push(run);
    container.append(el("article", { class: "run", id: `run-${run.id}`, "data-run": info.run }));
    connect(run);
  }
  window.tidal = { runs };  // for the browser tests and the curious
}

main();

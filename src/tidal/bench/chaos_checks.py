"""The assertions of ``tidal bench chaos`` (issue #57), as pure functions over what a run recorded.

A chaos run leaves its evidence in the run directory: the decisions (``events.jsonl``), the
status series (``series.jsonl``: every vertex's replicas and pending, once a tick), the sinks'
delivery delays per committed batch (the control record), the ids the file sink committed, and
the faults the bench injected (with when each was injected and, for a timed fault, when it was
lifted). Each check here reads those and returns what it found — numbers, and the violations in
words — so the bench's report and the integration tests assert the same things:

- :func:`exactly_once`: every id delivered once;
- :func:`replica_drops_in_scale_ups`: during a scale-up a vertex's replicas never drop, unless a
  fault window covers the drop (then it is listed as explained, with the fault);
- :func:`resumption`: after a driver restart, the controller's first decision per vertex, how long
  after the restored state it came, and whether it was made on numbers;
- :func:`outage_holds`: during a metric outage no vertex scaled down or to zero, and the hold
  was said (``metrics-unavailable``) within two ticks;
- :func:`recovery`: from a fault to the first delivery after it, and to the backlog back under its
  level at the fault;
- :func:`slo_shares`: the share of messages delivered within a delay target, outside and inside
  the fault windows (the cold start before the run first met the target, :func:`settled_at`,
  reported apart).

Knative's e2e tests check ready pods every 2 s during a scale-up; Tidal's series has a sample
every controller tick, finer than that.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tidal.scaling.latency import DelaySample

__all__ = [
    "Fault",
    "exactly_once",
    "outage_holds",
    "recovery",
    "replica_drops_in_scale_ups",
    "resumption",
    "settled_at",
    "slo_shares",
]

_BLIND_RULES = {"metrics-unavailable", "warming-up", "kpa-no-data"}


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected fault: ``kind`` (``driver``, ``executor``, ``nats``, ``outage``), when it was
    injected, when it was lifted (a timed fault; ``at`` for an instant one), and its cause."""

    kind: str
    at: float
    cause: str
    lifted: float | None = None

    @property
    def until(self) -> float:
        return self.lifted if self.lifted is not None else self.at


@dataclass
class Found:
    """What a check found: its numbers, and what broke its assertion (empty: it held)."""

    numbers: dict[str, Any] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    @property
    def held(self) -> bool:
        return not self.violations


def exactly_once(ids: Sequence[str], expected: Iterable[str]) -> Found:
    """Every expected id once: the missing and the doubled counted and named (the first few)."""
    want = set(expected)
    seen: dict[str, int] = {}
    for i in ids:
        seen[i] = seen.get(i, 0) + 1
    missing = sorted(want - set(seen))
    doubled = sorted(i for i, n in seen.items() if n > 1)
    extra = sorted(set(seen) - want)
    out = Found({"delivered": len(set(seen) & want), "missing": len(missing), "doubled": len(doubled)})
    if missing:
        out.violations.append(f"{len(missing)} ids never delivered (first: {missing[:3]})")
    if doubled:
        out.violations.append(f"{len(doubled)} ids delivered more than once (first: {doubled[:3]})")
    if extra:
        out.violations.append(f"{len(extra)} ids nobody sent (first: {extra[:3]})")
    return out


def _covered(at: float, faults: Sequence[Fault], grace: float) -> Fault | None:
    """The fault whose window (injection to lift, plus ``grace`` for its effect) holds ``at``."""
    for f in faults:
        if f.at <= at <= f.until + grace:
            return f
    return None


def replica_drops_in_scale_ups(
    series: Sequence[Mapping[str, Any]], vertex: str, faults: Sequence[Fault], grace: float = 60.0
) -> Found:
    """A scale-up lasts from a sample whose replicas rose while the vertex had a backlog until
    its pending is back under what it was when the rise began; in it, any later sample with
    fewer replicas than the one before is a drop. A drop inside a fault's window (injection to
    lift, plus ``grace`` for the capacity it took to come back) is explained, not a violation;
    ``replicas_explained`` sums the replicas those drops took (for a fault that says how many it
    took: the receivers a host took with it)."""
    rows = sorted((r for r in series if r.get("name") == vertex), key=lambda r: float(r["at"]))
    out = Found({"scale_ups": 0, "drops_explained": 0, "replicas_explained": 0})
    rising_from: float | None = None  # the pending when the scale-up began
    for prev, row in itertools.pairwise(rows):
        pending = row.get("pending")
        before, now = int(prev["replicas"]), int(row["replicas"])
        if rising_from is None:
            if now > before and pending:
                rising_from = float(pending)
                out.numbers["scale_ups"] += 1
            continue
        if pending is not None and float(pending) <= rising_from and now <= before:
            rising_from = None  # the backlog is back under its level: the scale-up is over
            continue
        if now < before:
            at = float(row["at"])
            fault = _covered(at, faults, grace)
            if fault is not None:
                out.numbers["drops_explained"] += 1
                out.numbers["replicas_explained"] += before - now
                continue
            out.violations.append(
                f"{vertex}: replicas {before} → {now} at {at:.1f} during a scale-up, no fault"
            )
    return out


def resumption(events: Sequence[Mapping[str, Any]], restarts: Sequence[Fault], tick: float) -> Found:
    """After each driver restart: every vertex's first decision after its ``state-restored`` (or
    ``state-ignored``) note, how long after the note it came (the controller ticks once every
    query ran a batch), and whether it was made blind (no rate: a cold controller's first
    decisions). A restart that restored nothing, or a blind first decision, is a violation; a
    first decision to 0 for a vertex with pending is one too. A vertex whose last decision
    before the restart was blind too had learnt nothing to restore: its blind first decision
    is counted (``blind_before``), not a violation (a driver killed 14 s into a CI run, before
    `policy: tidal` had measured its generator's capacity, resumed exactly that)."""
    out = Found({"restarts": len(restarts), "first_decision_after_s": [], "blind_before": []})
    for fault in restarts:
        later = [e for e in events if float(e["at"]) >= fault.at]
        notes = [e for e in later if e["rule"] in ("state-restored", "state-ignored")]
        if not notes:
            out.violations.append(f"restart at {fault.at:.1f}: the controller said nothing of its state")
            continue
        for note in notes:
            if note["rule"] == "state-ignored":
                out.violations.append(f"restart at {fault.at:.1f}: {note['vertex']}: {note['reason']}")
        restored_at = min(float(n["at"]) for n in notes)
        for vertex in sorted({n["vertex"] for n in notes}):
            first = next(
                (
                    e
                    for e in later
                    if e["vertex"] == vertex and e["rule"] not in ("state-restored", "state-ignored")
                ),
                None,
            )
            if first is None:
                continue
            out.numbers["first_decision_after_s"].append(round(float(first["at"]) - restored_at, 2))
            if first["rule"] in _BLIND_RULES:
                last = next(  # the vertex's last decision before the restart (events are in order)
                    (
                        e
                        for e in reversed(events)
                        if e["vertex"] == vertex
                        and float(e["at"]) < fault.at
                        and e["rule"] not in ("state-restored", "state-ignored")
                    ),
                    None,
                )
                if last is not None and last["rule"] in _BLIND_RULES:
                    out.numbers["blind_before"].append(vertex)  # it knew nothing to restore
                else:
                    out.violations.append(
                        f"{vertex}: first decision after the restart was blind ({first['reason']})"
                    )
            pending = (first.get("inputs") or {}).get("totalPending") or 0
            if int(first["desired"]) == 0 and float(pending) > 0:
                out.violations.append(f"{vertex}: scaled to zero with {pending} pending after the restart")
    out.numbers["tick"] = tick
    return out


def outage_holds(events: Sequence[Mapping[str, Any]], outages: Sequence[Fault], tick: float) -> Found:
    """During each outage (its window, plus two ticks for the last decision made before it to
    pass): no decision down or to zero, and a ``metrics-unavailable`` hold said for each vertex
    decided in it within two ticks of its start."""
    out = Found({"outages": len(outages), "said_within_s": []})
    for fault in outages:
        inside = [e for e in events if fault.at + 2 * tick <= float(e["at"]) <= fault.until]
        for e in inside:
            if int(e["desired"]) < int(e["current"]):
                out.violations.append(
                    f"{e['vertex']}: {e['current']} → {e['desired']} during the outage [{e['rule']}]"
                )
        said = [
            e
            for e in events
            if e["rule"] == "metrics-unavailable" and fault.at <= float(e["at"]) <= fault.until
        ]
        if said:
            first = min(float(e["at"]) for e in said) - fault.at
            out.numbers["said_within_s"].append(round(first, 2))
            if first > 2 * tick + tick:  # the tick in flight at the cut, then two
                out.violations.append(f"the outage at {fault.at:.1f} was said {first:.1f} s after it began")
        else:
            out.violations.append(
                f"the outage at {fault.at:.1f} was never said (no metrics-unavailable hold)"
            )
    return out


def recovery(
    faults: Sequence[Fault],
    commits: Sequence[float],
    series: Sequence[Mapping[str, Any]],
    vertex: str,
) -> list[dict[str, Any]]:
    """Per fault: seconds from its injection (a timed fault: its lift) to the first commit after
    it, and to ``vertex``'s pending back under its level at the injection; the recovery is the
    later of the two (``None`` where it never happened in the run)."""
    rows = sorted((r for r in series if r.get("name") == vertex), key=lambda r: float(r["at"]))
    ordered = sorted(commits)
    out = []
    for f in faults:
        start = f.until
        i = bisect.bisect_right(ordered, start)
        first = ordered[i] - start if i < len(ordered) else None
        level = next((float(r["pending"] or 0) for r in reversed(rows) if float(r["at"]) <= f.at), 0.0)
        back = next(
            (
                float(r["at"]) - start
                for r in rows
                if float(r["at"]) > start and r.get("pending") is not None and float(r["pending"]) <= level
            ),
            None,
        )
        whole = None if first is None or back is None else max(first, back)
        out.append({"fault": f.kind, "cause": f.cause, "first_delivery_s": first, "backlog_back_s": back,
                    "recovery_s": whole})  # fmt: skip
    return out


def _within(sample: DelaySample, target: float) -> float:
    """How many of the batch's messages had a delay within ``target`` (from its order statistics)."""
    points = sample.points
    if not points:
        return 0.0
    if len(points) == 1:
        return float(sample.count) if points[0] <= target else 0.0
    share = bisect.bisect_right(points, target) / len(points)
    return sample.count * share


def settled_at(samples: Sequence[DelaySample], target: float) -> float | None:
    """When the run first delivered a batch whose p99 delay was within ``target``: before it, the
    pipeline was still catching up with its own cold start (the generator counts from the run's
    start, the executors came later), which is neither steady state nor a fault's doing."""
    return next((s.at for s in sorted(samples, key=lambda s: s.at) if s.p99 <= target), None)


def slo_shares(
    samples: Sequence[DelaySample],
    target: float,
    windows: Sequence[tuple[float, float]],
    settled: float | None = None,
) -> dict[str, float | int | None]:
    """The share of messages delivered within ``target`` seconds: for batches committed before
    ``settled`` (the cold start, reported apart), then outside every window and inside one
    (``None`` where no message was)."""
    counts = {"start": [0.0, 0], "outside": [0.0, 0], "inside": [0.0, 0]}
    for s in samples:
        if settled is None or s.at < settled:
            side = "start"
        else:
            side = "inside" if any(a <= s.at <= b for a, b in windows) else "outside"
        counts[side][0] += _within(s, target)
        counts[side][1] += s.count
    out: dict[str, float | int | None] = {"target_s": target}
    for side, (within, n) in counts.items():
        out[side] = round(within / n, 4) if n else None
        out[f"messages_{side}"] = int(n)
    return out

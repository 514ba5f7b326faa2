"""What a running pipeline shows of each vertex: the live view, ``status.json``, ``tidal status``
and the metrics all read :class:`VertexStatus`."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from tidal.controller import Controller, StoreProbe
from tidal.isb.base import BufferStore
from tidal.isb.control import ControlStore
from tidal.scaling.latency import pooled
from tidal.spark.run.restarts import unreachable
from tidal.spark.run.vertical import VerticalWatch
from tidal.spec import PipelineSpec
from tidal.spec.chains import ChainPlan

__all__ = [
    "DELAY_WINDOW",
    "StatusThroughOutages",
    "VertexStatus",
    "delay_of",
    "vertex_statuses",
    "write_status_file",
]

log = logging.getLogger("tidal.pipeline")

DELAY_WINDOW = 10.0  # seconds of delivered batches the live delay is taken over


@dataclass(frozen=True)
class VertexStatus:
    """One vertex as the live view, ``status.json`` and ``tidal status`` show it."""

    name: str
    kind: str
    running: bool
    replicas: int
    desired: int | None
    pending: float | None
    rate: float | None
    usage: float | None  # input buffer's usage (stored / max length)
    processed: int
    rule: str
    reason: str
    dead: int = 0  # messages sent to the dead letter (after their retries)
    dropped: int = 0  # all its drops (tags, a full buffer, sink retries, its source client): drops
    drops: dict[str, int] | None = None  # the dropped by reason (ControlStore.drops), when any
    stuck_for: float | None = None  # seconds with pending and no progress, past the threshold
    requests: dict[str, Any] | None = None  # an HTTP source's request path at its last report
    # A sink's delivery delay (source to sink, seconds) over the last DELAY_WINDOW seconds:
    # {"p50", "p99", "max", "count"}; None for other vertices, {} for a sink with nothing delivered.
    delay: dict[str, float] | None = None
    # The chain the vertex runs in (``a>b>c``, head first: one query, tidal.spec.chains); None
    # when it is a query of its own.
    chain: str | None = None
    # Memory (bytes) and cores a replica needs, VPA's way (tidal.scaling.vertical): target, lower
    # and upper bounds; a chain's at its head; None before its tasks reported any.
    vertical: dict[str, Any] | None = None
    # The vertex's event-time watermark (ISO 8601). A reduce vertex's is Spark's (the minimum over
    # its inputs of the latest event time each sent, idle steps included (watermark.idleSource),
    # minus allowedLateness + maxDelay; windows ending before it are closed); another vertex's is
    # the source time of the oldest message waiting in its input buffer (what it has not yet
    # processed), None when nothing waits or it has no buffer.
    watermark: str | None = None


class _Run(Protocol):
    """What :func:`vertex_statuses` reads of a :class:`~tidal.spark.run.pipeline.PipelineRun`."""

    spec: PipelineSpec
    plan: ChainPlan
    control: ControlStore | None
    buffers: BufferStore | None
    controller: Controller | None
    requests: dict[str, Any]
    vertical: VerticalWatch
    queries: dict[str, Any]

    def running(self, vertex: str) -> bool: ...


class _Reported(Protocol):
    """What :func:`write_status_file` reads of a run, beyond its vertices' statuses."""

    spec: PipelineSpec
    run_dir: Path
    started_at: float
    dry_run: bool
    control: ControlStore | None
    side_inputs: Any

    def executors(self) -> tuple[int, int] | None: ...


def write_status_file(run: _Reported, state: str, statuses: list[VertexStatus]) -> None:
    """``status.json`` in the run directory, for ``tidal status`` from another terminal;
    replaced whole, so a reader never sees half of one."""
    record: dict[str, Any] = {
        "pipeline": run.spec.name,
        "state": state,
        "started_at": run.started_at,
        "at": time.time(),
        "dry_run": run.dry_run,
        "phase": run.control.phase() if run.control is not None else "Running",
        "vertices": [asdict(s) for s in statuses],
    }
    executors = run.executors()
    if executors is not None:
        record["executors"], record["executor_cores"] = executors
    if run.side_inputs is not None:
        record["side_inputs"] = run.side_inputs.status()
    tmp = run.run_dir / "status.json.tmp"
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(run.run_dir / "status.json")


def oldest_pending(buffer: Any) -> str | None:
    """The source time of the first message ``buffer`` holds past its commit, as ISO 8601."""
    import math
    from datetime import UTC, datetime

    first = buffer.committed() + 1
    batch = buffer.read_batch(first, first)
    if batch.num_rows == 0:
        return None
    t = batch.column("t")[0].as_py()
    if t is None or math.isnan(t):
        return None
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def watermark_of(query: Any) -> str | None:
    """A stateful query's event-time watermark from its last progress (None before one)."""
    progress = getattr(query, "lastProgress", None) if query is not None else None
    value = ((progress or {}).get("eventTime") or {}).get("watermark")
    return str(value) if value else None


def _source_pending(run: _Run, vertex: str) -> float | None:
    """A source's pending as the controller reads it (asked in the driver where the source
    can say, :meth:`~tidal.controller.probe.StoreProbe.source_pending`), so the status shows
    the number the decisions name."""
    assert run.controller is not None
    probe = run.controller.probe
    assert isinstance(probe, StoreProbe)  # a run's controller probes its stores (controller_setup)
    return probe.source_pending(vertex)


def vertex_statuses(run: _Run) -> list[VertexStatus]:
    """Every vertex of ``run`` now: replicas and the last decision, pending, rate, buffer
    usage, processed, a sink's delivery delay; an HTTP source's pending is what its activator
    holds."""
    assert run.control is not None and run.buffers is not None and run.controller is not None
    now = time.time()
    decisions = run.controller.decisions()
    metrics = run.controller.metrics()
    stuck = run.controller.stuck(now)
    run.vertical.update(run.control)
    out = []
    for v in run.spec.vertices:
        chain = run.plan.chain_of(v.name)
        d = decisions.get(chain.head)
        usage = pending = None
        requests = None
        watermark = None
        if v.name != chain.head:
            pass  # a chain's follower has no buffer: its head's query hands it each batch
        elif v.source is None:
            buffer = run.buffers.open(v.name)
            stats = buffer.stats()
            usage, pending = stats.usage, float(stats.pending)
            watermark = oldest_pending(buffer) if stats.pending else None
        elif v.name in run.requests:
            pending = run.requests[v.name].held()
            requests = run.requests[v.name].report()
        else:
            pending = _source_pending(run, v.name)
        rate = metrics[v.name][0] if v.name in metrics else None
        rule, reason = (str(d.rule), d.reason) if d is not None else ("", "")
        if v.name != chain.head:
            rule, reason = "chained", f"runs in {chain.head}'s query and scales with it"
        out.append(
            VertexStatus(
                name=v.name,
                kind=v.kind,
                running=run.running(v.name),
                replicas=run.control.replicas(chain.head, default=run.spec.vertex(chain.head).replicas),
                desired=d.desired if d is not None else None,
                pending=pending,
                rate=rate,
                usage=usage,
                processed=path.accepted()
                if (path := run.requests.get(v.name))
                else run.control.processed(v.name),
                dead=run.control.dead_letters(v.name),
                dropped=run.control.dropped(v.name),
                drops=run.control.drops(v.name) or None,
                stuck_for=stuck.get(v.name),
                rule=rule,
                reason=reason,
                requests=requests,
                delay=delay_of(run.control, v.name, now) if v.sink is not None else None,
                chain=">".join(chain.members) if chain.followers else None,
                vertical=(r.to_dict() if (r := run.vertical.recommendation(v.name)) is not None else None),
                watermark=watermark_of(run.queries.get(v.name))
                if v.udf is not None and v.udf.reduce
                else watermark,
            )
        )
    return out


def delay_of(control: ControlStore, vertex: str, now: float) -> dict[str, float]:
    """The sink ``vertex``'s delivery delay over the last :data:`DELAY_WINDOW` seconds."""
    window = pooled(control.delays(vertex, since=now - DELAY_WINDOW), now)
    if not window.count:
        return {}
    return {"p50": window.p50, "p99": window.p99, "max": window.max, "count": float(window.count)}


class StatusThroughOutages:
    """The vertices' status, read at every poll of the run's wait loop, kept through a buffer
    outage. Reading it opens the buffers; while their servers do not answer (a cut link, every
    server down) the read fails, and the run must not stop for that: the controller holds and says
    so (``metrics-unavailable``), the queries are restarted when the buffers answer again
    (:mod:`tidal.spark.run.restarts`), and the live view shows the last status it read, with one
    warning when the outage begins and one when it ends. Any other failure is raised."""

    def __init__(self) -> None:
        self.last: list[VertexStatus] = []
        self.since: float | None = None  # when the current outage began

    def read(self, run: _Run) -> list[VertexStatus]:
        try:
            statuses = vertex_statuses(run)
        except Exception as exc:
            if not (unreachable(str(exc)) or type(exc).__module__.startswith("nats")):
                raise
            if self.since is None:
                self.since = time.time()
                log.warning(
                    "the buffers do not answer (%s: %s); showing the last status", type(exc).__name__, exc
                )
            return self.last
        if self.since is not None:
            log.warning("the buffers answer again after %.1f s", time.time() - self.since)
            self.since = None
        self.last = statuses
        return statuses

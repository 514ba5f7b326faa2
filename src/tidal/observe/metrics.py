"""Prometheus metrics of a running pipeline, served on 127.0.0.1.

| metric | type | labels |
|---|---|---|
| ``tidal_vertex_replicas`` | gauge | pipeline, vertex |
| ``tidal_vertex_desired_replicas`` | gauge | pipeline, vertex |
| ``tidal_buffer_pending`` | gauge | pipeline, vertex (the vertex's input; a source's own pending) |
| ``tidal_vertex_processing_rate`` | gauge | pipeline, vertex (messages/s over the lookback) |
| ``tidal_buffer_usage_ratio`` | gauge | pipeline, vertex (stored / bufferMaxLength) |
| ``tidal_vertex_processed_total`` | counter | pipeline, vertex |
| ``tidal_scaling_decisions_total`` | counter | pipeline, vertex, rule (decisions in the event log) |
| ``tidal_executors`` | gauge | pipeline (executors registered; on a cluster manager only) |
| ``tidal_executor_cores`` | gauge | pipeline (their cores) |
| ``tidal_delivery_delay_seconds`` | histogram | pipeline, vertex (a sink's messages, source to sink) |

A private registry: the exporter shows the pipeline's metrics, not the Python process's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client.core import HistogramMetricFamily

from tidal.scaling.latency import BUCKETS, DelaySample, bucket_counts

__all__ = ["MetricsExporter"]


class MetricsExporter:
    def __init__(self, pipeline: str, events_path: str | Path) -> None:
        self.pipeline = pipeline
        self.registry = CollectorRegistry()
        labels = ["pipeline", "vertex"]
        self.replicas = Gauge("tidal_vertex_replicas", "Replicas now", labels, registry=self.registry)
        self.desired = Gauge(
            "tidal_vertex_desired_replicas",
            "Replicas the last decision wanted",
            labels,
            registry=self.registry,
        )
        self.pending = Gauge("tidal_buffer_pending", "Messages waiting", labels, registry=self.registry)
        self.rate = Gauge(
            "tidal_vertex_processing_rate", "Messages/s over the lookback", labels, registry=self.registry
        )
        self.usage = Gauge(
            "tidal_buffer_usage_ratio", "Input buffer: stored / max length", labels, registry=self.registry
        )
        self.processed = Counter(
            "tidal_vertex_processed", "Messages processed", labels, registry=self.registry
        )
        self.dead = Counter(
            "tidal_vertex_dead_letters", "Messages sent to the dead letter", labels, registry=self.registry
        )
        self.drops = Counter(
            "tidal_vertex_drops",
            "Messages dropped, by reason: tags (tagged DROP or no edge's conditions), buffer-full "
            "(onFull: discardLatest), sink-retries-exhausted (onFailure: drop); "
            "Numaflow's forwarder_drop_total",
            [*labels, "reason"],
            registry=self.registry,
        )
        self.dropped = Counter(
            "tidal_vertex_dropped",
            "Messages dropped: tagged DROP, or matched no output edge's conditions (Numaflow's drop)",
            labels,
            registry=self.registry,
        )
        self.stuck = Gauge(
            "tidal_vertex_stuck_seconds",
            "Seconds with messages pending and none processed, once past stuckAfterSeconds (else 0)",
            labels,
            registry=self.registry,
        )
        self.decisions = Counter(
            "tidal_scaling_decisions",
            "Scaling decisions recorded, by rule",
            [*labels, "rule"],
            registry=self.registry,
        )
        self.executors = Gauge(
            "tidal_executors", "Executors registered", ["pipeline"], registry=self.registry
        )
        self.executor_cores = Gauge(
            "tidal_executor_cores", "Cores of the executors registered", ["pipeline"], registry=self.registry
        )
        # An HTTP source's request path (Knative's figures, revision-wide, every second).
        self.http_concurrency = Gauge(
            "tidal_http_concurrency", "Average requests in flight over the last second", labels,
            registry=self.registry,
        )  # fmt: skip
        self.http_rps = Gauge("tidal_http_requests_per_second", "Requests/s", labels, registry=self.registry)
        self.http_held = Gauge(
            "tidal_http_held", "Requests the activator holds for a receiver", labels, registry=self.registry
        )
        self.http_receivers = Gauge(
            "tidal_http_receivers_ready", "Receivers that answered the probe", labels, registry=self.registry
        )
        self.http_in_path = Gauge(
            "tidal_http_activator_in_path", "1 while the activator stands in the path", labels,
            registry=self.registry,
        )  # fmt: skip
        self.http_refused = Counter(
            "tidal_http_refused", "Requests answered 503 (queues full, held too long)", labels,
            registry=self.registry,
        )  # fmt: skip
        self._refused: dict[str, float] = {}
        self.delays = _DelayHistogram(pipeline)
        self.registry.register(self.delays)
        self._events = Path(events_path)
        self._events_at = 0
        self._processed: dict[str, float] = {}
        self._dead: dict[str, float] = {}
        self._dropped: dict[str, float] = {}
        self._drops: dict[tuple[str, str], float] = {}
        self.server: Any = None
        self.port = 0

    def serve(self, port: int = 0) -> int:
        """Listen on 127.0.0.1:``port`` (0 = a free port); return the port."""
        self.server, _thread = start_http_server(port, addr="127.0.0.1", registry=self.registry)
        self.port = int(self.server.server_address[1])
        return self.port

    def update(self, statuses: Iterable[Any]) -> None:
        for s in statuses:
            labels = (self.pipeline, s.name)
            self.replicas.labels(*labels).set(s.replicas)
            if s.desired is not None:
                self.desired.labels(*labels).set(s.desired)
            if s.pending is not None:
                self.pending.labels(*labels).set(s.pending)
            if s.rate is not None:
                self.rate.labels(*labels).set(s.rate)
            if s.usage is not None:
                self.usage.labels(*labels).set(s.usage)
            grown = s.processed - self._processed.get(s.name, 0)
            if grown > 0:
                self.processed.labels(*labels).inc(grown)
                self._processed[s.name] = s.processed
            dead = getattr(s, "dead", 0) - self._dead.get(s.name, 0)
            if dead > 0:
                self.dead.labels(*labels).inc(dead)
                self._dead[s.name] = s.dead
            dropped = getattr(s, "dropped", 0) - self._dropped.get(s.name, 0)
            if dropped > 0:
                self.dropped.labels(*labels).inc(dropped)
                self._dropped[s.name] = s.dropped
            for reason, n in (getattr(s, "drops", None) or {}).items():
                more = n - self._drops.get((s.name, reason), 0)
                if more > 0:
                    self.drops.labels(*labels, reason).inc(more)
                    self._drops[s.name, reason] = n
            self.stuck.labels(*labels).set(getattr(s, "stuck_for", None) or 0.0)
            requests = getattr(s, "requests", None)
            if requests and "at" in requests:
                self._update_requests(labels, requests)
        self._read_events()

    def _update_requests(self, labels: tuple[str, str], r: dict[str, Any]) -> None:
        self.http_concurrency.labels(*labels).set(r["concurrency"])
        self.http_rps.labels(*labels).set(r["rps"])
        self.http_held.labels(*labels).set(r["held"])
        self.http_receivers.labels(*labels).set(r["ready"])
        self.http_in_path.labels(*labels).set(1 if r["in_path"] else 0)
        refused = r["refused"] - self._refused.get(labels[1], 0)
        if refused > 0:
            self.http_refused.labels(*labels).inc(refused)
            self._refused[labels[1]] = r["refused"]

    def update_delays(
        self, delivered: Callable[[str, float], list[DelaySample]], sinks: Iterable[str]
    ) -> None:
        """Add the batches each sink delivered since the last call: ``delivered(vertex, since)``
        gives its delay samples committed at or after ``since``."""
        for vertex in sinks:
            self.delays.observe(vertex, delivered(vertex, self.delays.since(vertex)))

    def update_executors(self, executors: int, cores: int) -> None:
        self.executors.labels(self.pipeline).set(executors)
        self.executor_cores.labels(self.pipeline).set(cores)

    def _read_events(self) -> None:
        if not self._events.exists():
            return
        with self._events.open() as f:
            f.seek(self._events_at)
            while line := f.readline():
                if not line.endswith("\n"):
                    break  # half-written: read it next time
                self._events_at = f.tell()
                event = json.loads(line)
                self.decisions.labels(self.pipeline, event["vertex"], event["rule"]).inc()

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


class _DelayHistogram:
    """``tidal_delivery_delay_seconds``: every delivered message's delay, source to sink, per
    sink vertex. Fed with the batches' delay samples (each point stands for its share of the
    batch's messages), so counts may be fractional between bucket bounds."""

    def __init__(self, pipeline: str) -> None:
        self.pipeline = pipeline
        self._since: dict[str, float] = {}  # per sink: its batches committed before this are counted
        self._state: dict[str, tuple[list[float], float, float]] = {}

    def since(self, vertex: str) -> float:
        return self._since.get(vertex, 0.0)

    def observe(self, vertex: str, samples: list[DelaySample]) -> None:
        if not samples:
            return
        cumulative, total, count = bucket_counts(samples)
        before = self._state.get(vertex, ([0.0] * len(cumulative), 0.0, 0.0))
        self._state[vertex] = (
            [a + b for a, b in zip(before[0], cumulative, strict=True)],
            before[1] + total,
            before[2] + count,
        )
        # A vertex records its batches one after the other, so none can come in before this.
        self._since[vertex] = max(s.at for s in samples) + 1e-6

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(
            "tidal_delivery_delay_seconds",
            "Delay of delivered messages from their source to the sink",
            labels=["pipeline", "vertex"],
        )
        for vertex, (cumulative, total, _count) in sorted(self._state.items()):
            bounds = [repr(b) for b in BUCKETS] + ["+Inf"]
            family.add_metric([self.pipeline, vertex], list(zip(bounds, cumulative, strict=True)), total)
        yield family

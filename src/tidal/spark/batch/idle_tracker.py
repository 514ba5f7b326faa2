"""The reduce reader's idle watermarks: notes arrivals, steps the rule, appends control rows.

What the control rows are and why is :mod:`tidal.spark.batch.idle`'s docstring; the rule itself is
:mod:`tidal.scaling.idle` (pure). This is the driver-side part that reads buffers and a clock
value given to it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidal.scaling import idle
from tidal.spark.batch import stores
from tidal.spark.batch.idle import CONTROL_KEY, IdleWatch, Upstream, control_id, is_control

if TYPE_CHECKING:
    from tidal.isb.base import Buffer
    from tidal.spark.batch.config import QueryConfig

__all__ = ["IdleTracker"]


class IdleTracker:
    """The idle rule for each input of one reduce vertex, stepped at each of its triggers."""

    def __init__(self, config: QueryConfig, watch: IdleWatch, now: float) -> None:
        self.config = config
        self.watch = watch
        self.path = Path(config.run_dir) / "idle" / f"{config.vertex}.json"
        saved = self._load()
        kept = saved.get("inputs", {})
        self.states = {
            u.origin: idle.InputIdle(quiet_since=now, last_t=kept.get(u.origin)) for u in watch.inputs
        }
        self.latest_data: float | None = saved.get("data")
        self.seen: int | None = None  # the buffer's last sequence this tracker looked at
        self.seeded = len(watch.inputs) < 2  # a join's inputs are seeded once per start

    def _load(self) -> dict[str, Any]:
        try:
            loaded = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        state = {"inputs": {o: s.last_t for o, s in self.states.items()}, "data": self.latest_data}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(self.path)

    def _arrivals(self, buffer: Buffer) -> dict[str, float | None]:
        """The inputs that sent data since the last look, with the latest event time of each."""
        last = buffer.last_seq()
        if self.seen is None:
            self.seen = buffer.committed()
        if last <= self.seen:
            return {}
        batch = buffer.read_batch(self.seen + 1, last)
        self.seen = last
        latest: dict[str, float | None] = {}
        for message_id, t in zip(batch.column("id").to_pylist(), batch.column("t").to_pylist(), strict=True):
            if is_control(message_id):
                continue
            origin = message_id.split(":", 1)[0]
            value = None if t is None or math.isnan(t) else float(t)
            prior = latest.get(origin)
            latest[origin] = value if prior is None else prior if value is None else max(prior, value)
        return latest

    def _drained(self, upstream: Upstream) -> bool:
        control = stores.control(self.config)
        for name in upstream.sources:
            report = control.source_report(name)
            if report is not None and report.pending:
                return False
        return all(stores.buffer(self.config, name).stats().pending == 0 for name in upstream.buffers)

    def _control(self, buffer: Buffer, origin: str, t: float, now: float) -> None:
        """One control row of ``origin`` at event time ``t``, under an append key of its own."""
        message_id = control_id(origin, t)
        buffer.append_batch(f"{message_id}/{round(now * 1000)}", [message_id], [b""], [t], [[CONTROL_KEY]])

    def seed(self, buffer: Buffer, now: float) -> int:
        """A join's seed, at each start: a control row per input at event time 0, so Spark has a
        watermark for every input from the start (a stream with no rows has none and would not
        hold the minimum back: a faster input would make the slower one's messages late)."""
        self.seeded = True
        for upstream in self.watch.inputs:
            self._control(buffer, upstream.origin, 0.0, now)
        return len(self.watch.inputs)

    def tick(self, buffer: Buffer, now: float) -> int:
        """Seeds a join at its start, notes arrivals, steps each input, appends the control rows
        due; returns how many it appended."""
        written = 0 if self.seeded else self.seed(buffer, now)
        if self.watch.params is None:
            return written
        changed = False
        for origin, t in self._arrivals(buffer).items():
            if origin in self.states:
                self.states[origin] = idle.observe(self.states[origin], now, t)
                changed = True
            if t is not None:
                self.latest_data = t if self.latest_data is None else max(self.latest_data, t)
        until = idle.horizon(self.latest_data, self.watch.span)
        for upstream in self.watch.inputs:
            state = self.states[upstream.origin]
            drained = self._drained(upstream) if state.last_t is not None else True
            self.states[upstream.origin], t = idle.step(
                state, self.watch.params, now, drained=drained, until=until
            )
            if t is not None:
                self._control(buffer, upstream.origin, t, now)
                written += 1
                changed = True
        if changed:
            self._save()
        return written

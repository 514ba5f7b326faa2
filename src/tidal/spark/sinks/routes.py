"""A sink's failure routing: Numaflow's ``retryStrategy``, ``fallback`` and ``onSuccess`` sinks.

:class:`RoutedSink` wraps a vertex's sink when its spec has any of them (``SinkSpec.routed``).
In each task it writes the messages to the primary sink; what the primary refuses is written
again, only those messages, after Numaflow's backoff (:func:`tidal.spec.retry.backoff_delay`);
after ``steps`` retries, ``onFailure`` decides: ``fallback`` writes them to the fallback sink,
``drop`` counts them as dropped (reason: retries exhausted in the sink), ``retry`` fails the task
and the micro-batch replays. A pynumaflow sink answers per message (success, failure, fallback,
on success, :class:`Answers`); any other sink accepts a write whole or raises, which refuses
every message of it. What a pynumaflow sink answers "fallback" goes to the fallback sink at once;
what it answers "on success" goes to the onSuccess sink (the response's message, if it gave
one). A MonoVertex's ``bypass`` sends the messages whose tags match its ``fallback`` or
``onSuccess`` conditions straight there, and its ``sink`` ones (and the rest) to the primary.
The fallback and onSuccess sinks retry with the same backoff and then fail the batch (a message
is never dropped there), as Numaflow's do.

**Exactly once across the three.** Each sink commits in the driver, idempotently per batch id.
A replayed batch can route differently (a primary that refused a message the first time may take
it now), so the commit first records the batch's parts for all three in the run directory
(synced), then commits each; a replay of a batch with a record commits the recorded parts, not
the new ones (whose temporary files it discards). A message is then in exactly one of the
primary and the fallback, once, at exactly-once sinks, whenever the crash came. The record
costs one synced write of the batch's parts per micro-batch, only for a sink that routes.
"""

from __future__ import annotations

import logging
import os
import pickle
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidal.errors import SinkError
from tidal.isb.durability import replace_durably, sync_dir
from tidal.spec.endpoints import BypassSpec
from tidal.spec.retry import BackoffSpec, OnFailure, RetryStrategySpec, backoff_delay

__all__ = ["Answers", "RoutedPart", "RoutedSink"]

log = logging.getLogger("tidal.sink")


@dataclass
class Answers:
    """What a sink said of one write: its part for the commit (covering what it accepted), and
    the positions (in the write) it refused, sent to the fallback, or accepted "on success" with
    the payload for the onSuccess sink (None: the message's own)."""

    part: Any = None
    failed: list[int] = field(default_factory=list)
    fallback: list[int] = field(default_factory=list)
    on_success: list[tuple[int, bytes | None]] = field(default_factory=list)
    error: str = ""


@dataclass
class RoutedPart:
    """A task's parts for the three sinks, and what it counted."""

    primary: list[Any] = field(default_factory=list)
    fallback: list[Any] = field(default_factory=list)
    on_success: list[Any] = field(default_factory=list)
    dropped: int = 0  # after the retries, with onFailure: drop
    retried: int = 0  # message writes repeated
    fell_back: int = 0


def _take(values: Any, positions: list[int]) -> Any:
    if values is None:
        return None
    if hasattr(values, "take"):
        import pyarrow as pa

        return values.take(pa.array(positions, pa.int64()))
    return [values[i] for i in positions]


def _answers(sink: Any, ids: Any, payloads: Any, times: Any) -> Answers:
    """``sink``'s answers to one write: per message for a sink that gives them, else all or none."""
    if hasattr(sink, "answer"):
        answers: Answers = sink.answer(ids, payloads, times=times)
        return answers
    try:
        takes_times = getattr(sink, "takes_times", False)
        part = sink.write(ids, payloads, times=times) if takes_times else sink.write(ids, payloads)
    except Exception as exc:  # the write refused every message of it; retried by the strategy
        return Answers(failed=list(range(len(ids))), error=f"{type(exc).__name__}: {exc}")
    return Answers(part=part)


class RoutedSink:
    """:class:`~tidal.spark.sinks.connector.Sink` over a primary, fallback and onSuccess sink."""

    takes_times = True

    def __init__(
        self,
        primary: Any,
        fallback: Any,
        on_success: Any,
        strategy: RetryStrategySpec,
        state_dir: Path,
        at: str,
        sleep: Callable[[float], None] = time.sleep,
        bypass: BypassSpec | None = None,
    ) -> None:
        self.primary, self.fallback, self.on_success = primary, fallback, on_success
        self.strategy = strategy
        self.record = state_dir / "routes.pickle"
        self.at = at
        self.bypass = bypass
        self.takes_tags = bypass is not None  # the writer hands it each message's tags
        self._sleep = sleep
        self._random = random.Random()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_sleep"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._sleep = time.sleep

    # In a task ------------------------------------------------------------------------------

    def write(
        self, ids: Any, payloads: Any, errors: Sequence[str] = (), times: Any = None, tags: Any = None
    ) -> RoutedPart:
        out = RoutedPart()
        positions = list(range(len(ids)))
        fallback: list[int] = []
        on_success: list[tuple[int, bytes | None]] = []
        if self.bypass is not None and tags is not None:
            positions, fallback, on_success = self._bypassed(tags)
        retry, backoff = 0, self.strategy.backoff
        while positions:
            said = _answers(
                self.primary, _take(ids, positions), _take(payloads, positions), _take(times, positions)
            )
            if said.part is not None:
                out.primary.append(said.part)
            fallback += [positions[i] for i in said.fallback]
            on_success += [(positions[i], payload) for i, payload in said.on_success]
            positions = [positions[i] for i in said.failed]
            if not positions:
                break
            retry += 1
            if retry > backoff.steps:
                self._exhausted(positions, said.error, fallback, out)
                break
            out.retried += len(positions)
            log.warning(
                "%s: %d message(s) refused (%s); retry %d of %d",
                self.at,
                len(positions),
                said.error or "failed",
                retry,
                backoff.steps,
            )
            self._sleep(backoff_delay(backoff, retry, self._random.random()))
        if fallback:
            if self.fallback is None:
                raise SinkError(
                    f"{self.at}: the sink sent {len(fallback)} message(s) to a fallback sink, and none "
                    "is configured: add sink.fallback"
                )
            out.fell_back = len(fallback)
            out.fallback = self._all_of(self.fallback, "fallback", ids, payloads, times, sorted(fallback))
        if on_success:
            if self.on_success is None:
                raise SinkError(
                    f"{self.at}: the sink answered {len(on_success)} message(s) 'on success', and no "
                    "onSuccess sink is configured: add sink.onSuccess"
                )
            chosen = [i for i, _ in on_success]
            bodies = _take(payloads, chosen)
            values = bodies.to_pylist() if hasattr(bodies, "to_pylist") else list(bodies)
            replaced = [
                own if given is None else given for own, (_, given) in zip(values, on_success, strict=True)
            ]
            out.on_success = self._all_of(
                self.on_success, "onSuccess", _take(ids, chosen), replaced, _take(times, chosen), None
            )
        return out

    def _bypassed(self, tags: Sequence[Any]) -> tuple[list[int], list[int], list[tuple[int, bytes | None]]]:
        """Numaflow's bypass: the positions for the primary, the fallback and the onSuccess sink.
        A message matching the sink's conditions goes to the primary; else the fallback's, else
        the onSuccess's; a message matching none goes to the primary as usual."""
        assert self.bypass is not None
        primary: list[int] = []
        fallback: list[int] = []
        on_success: list[tuple[int, bytes | None]] = []
        route = self.bypass
        for i, message_tags in enumerate(tags):
            found = tuple(message_tags or ())
            if route.sink is not None and route.sink.tags.matches(found):
                primary.append(i)
            elif route.fallback is not None and route.fallback.tags.matches(found):
                fallback.append(i)
            elif route.on_success is not None and route.on_success.tags.matches(found):
                on_success.append((i, None))
            else:
                primary.append(i)
        return primary, fallback, on_success

    def _exhausted(self, positions: list[int], error: str, fallback: list[int], out: RoutedPart) -> None:
        what = self.strategy.on_failure
        if what == OnFailure.FALLBACK:
            fallback += positions
        elif what == OnFailure.DROP:
            out.dropped += len(positions)
            log.warning(
                "%s: %d message(s) dropped: retries exhausted in the sink (%s)",
                self.at,
                len(positions),
                error,
            )
        else:
            raise SinkError(
                f"{self.at}: {len(positions)} message(s) still refused after {self.strategy.backoff.steps} "
                f"retries ({error}); the micro-batch will be replayed (retryStrategy.onFailure: retry)"
            )

    def _all_of(
        self, sink: Any, name: str, ids: Any, payloads: Any, times: Any, positions: list[int] | None
    ) -> list[Any]:
        """Everything to the fallback or onSuccess sink, with the same backoff; refused after it,
        or answered "fallback" there, fails the batch (Numaflow's rule: never dropped there)."""
        if positions is not None:
            ids, payloads, times = _take(ids, positions), _take(payloads, positions), _take(times, positions)
        parts: list[Any] = []
        remaining = list(range(len(ids)))
        backoff: BackoffSpec = self.strategy.backoff
        retry = 0
        while remaining:
            said = _answers(sink, *(_take(v, remaining) for v in (ids, payloads, times)))
            if said.part is not None:
                parts.append(said.part)
            if said.fallback or said.on_success:
                raise SinkError(f"{self.at}.{name}: a {name} sink may only answer success or failure")
            remaining = [remaining[i] for i in said.failed]
            retry += 1
            if remaining and retry > backoff.steps:
                raise SinkError(
                    f"{self.at}.{name}: {len(remaining)} message(s) refused after {backoff.steps} retries "
                    f"({said.error}); the micro-batch will be replayed"
                )
            if remaining:
                self._sleep(backoff_delay(backoff, retry, self._random.random()))
        return parts

    # In the driver ----------------------------------------------------------------------------

    def commit(self, batch_id: int, parts: Sequence[Any]) -> None:
        routed = [p for p in parts if isinstance(p, RoutedPart)]
        new = (
            [x for p in routed for x in p.primary],
            [x for p in routed for x in p.fallback],
            [x for p in routed for x in p.on_success],
        )
        recorded = self._recorded(batch_id)
        if recorded is None:
            self._record(batch_id, new)
            chosen = new
        else:  # a replay: the first attempt's routing holds; this one's files are not needed
            chosen = recorded
            for sink, unused in zip((self.primary, self.fallback, self.on_success), new, strict=True):
                discard = getattr(sink, "discard", None)
                if discard is not None and unused:
                    discard(unused)
        for sink, chosen_parts in zip((self.primary, self.fallback, self.on_success), chosen, strict=True):
            if sink is not None:
                sink.commit(batch_id, chosen_parts)

    def _recorded(self, batch_id: int) -> tuple[list[Any], list[Any], list[Any]] | None:
        try:
            with self.record.open("rb") as f:
                batch, chosen = pickle.load(f)
        except (FileNotFoundError, EOFError, pickle.UnpicklingError):
            return None
        return chosen if batch == batch_id else None

    def _record(self, batch_id: int, chosen: tuple[list[Any], list[Any], list[Any]]) -> None:
        if not self.record.parent.is_dir():
            self.record.parent.mkdir(parents=True, exist_ok=True)
            sync_dir(self.record.parent.parent)
        partial = self.record.with_suffix(".tmp")
        with partial.open("wb") as f:
            pickle.dump((batch_id, chosen), f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        replace_durably(partial, self.record, "sync")

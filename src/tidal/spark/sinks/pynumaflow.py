"""A pynumaflow sink handler (a ``Sinker`` or ``handler(datums) -> Responses``) as a Tidal sink.

It gets the task's messages as pynumaflow sink ``Datum`` objects, ``id`` the message's id, and
each message's source time as its event time. A response that is not a success fails the task,
with the handler's error: the micro-batch replays, so a pynumaflow sink is **at least once** (as
Numaflow's is), and the ids let it de-duplicate. With a ``retryStrategy``, ``fallback`` or
``onSuccess`` on the sink (:mod:`tidal.spark.sinks.routes`), :meth:`PynumaflowSink.answer` says
per message instead: failures are retried, ``Response.as_fallback`` goes to the fallback sink,
``Response.as_on_success`` to the onSuccess sink (the handler, :mod:`tidal.spark.query.pynumaflow`).
"""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from typing import Any

from tidal.spark.batch.clients import bases, built, run_async
from tidal.spark.sinks.connector import Sink, SinkPlace
from tidal.spark.sinks.routes import Answers
from tidal.spec.model import SinkSpec
from tidal.spec.validate import resolve

__all__ = ["PynumaflowSink", "build"]


class PynumaflowSink:
    """A pynumaflow sink handler as a Tidal sink (:func:`tidal.spark.sinks.connector.build_sink`)."""

    takes_times = True  # the writer hands it the messages' source times

    def __init__(self, obj: Any, path: str) -> None:
        obj = built(obj, path)
        names = {name.rsplit(".", 1)[-1] for name in bases(obj) if name.startswith("pynumaflow.")}
        self._handler = obj.handler if "Sinker" in names else obj
        self._path = path
        if not callable(self._handler):
            raise TypeError(f"{path}: {type(obj).__name__} is not a pynumaflow sink handler")

    def answer(self, ids: Any, payloads: Any, times: Any = None) -> Answers:
        """The handler's responses, per position: failed, to the fallback, or on success (with the
        response's message's value, if it gave one). A missing or unknown id fails the task."""
        id_list, responses = self._call(ids, payloads, times)
        by_id = {r.id: r for r in responses}
        missing = [i for i in id_list if i not in by_id]
        if missing:
            raise RuntimeError(
                f"{self._path}: no response for {len(missing)} message(s), the first {missing[0]!r}"
            )
        said = Answers()
        for n, message_id in enumerate(id_list):
            r = by_id[message_id]
            if r.fallback:
                said.fallback.append(n)
            elif r.on_success:
                said.on_success.append((n, r.on_success_msg.value if r.on_success_msg is not None else None))
            elif not r.success:
                said.failed.append(n)
                said.error = said.error or str(r.err or "failed")
        return said

    def write(self, ids: Any, payloads: Any, errors: Any = (), times: Any = None) -> None:
        id_list, responses = self._call(ids, payloads, times)
        if not id_list:
            return
        failed = [r for r in responses if not r.success]
        answered = {r.id for r in responses}
        missing = [i for i in id_list if i not in answered]
        if failed or missing:
            first = failed[0] if failed else None
            reason = (
                f"{len(failed)} message(s) failed, the first {first.id!r}: "
                f"{first.err or 'sent to a fallback sink, and the sink has none (add sink.fallback)'}"
                if first is not None
                else f"no response for {len(missing)} message(s), the first {missing[0]!r}"
            )
            raise RuntimeError(f"{self._path}: {reason}; the micro-batch will be retried")

    def _call(self, ids: Any, payloads: Any, times: Any) -> tuple[list[str], list[Any]]:
        """The handler's responses to the messages as pynumaflow ``Datum`` objects."""
        from pynumaflow.sinker import Datum

        id_list = ids.to_pylist() if hasattr(ids, "to_pylist") else list(ids)
        values = payloads.to_pylist() if hasattr(payloads, "to_pylist") else list(payloads)
        if not id_list:
            return [], []
        now = datetime.now(UTC).timestamp()
        stamps = (
            times.to_pylist() if times is not None and hasattr(times, "to_pylist") else [now] * len(values)
        )
        watermark = datetime.fromtimestamp(min(stamps, default=now), UTC)
        batch = [
            Datum(
                keys=[],
                sink_msg_id=i,
                value=v,
                event_time=datetime.fromtimestamp(t, UTC),
                watermark=watermark,
            )
            for i, v, t in zip(id_list, values, stamps, strict=True)
        ]
        call = self._handler(iter(batch))
        responses = run_async(call) if inspect.isawaitable(call) else call
        return id_list, list(responses)

    def commit(self, batch_id: int, parts: Any) -> None:
        return None


def build(spec: SinkSpec, place: SinkPlace) -> Sink:
    assert spec.pynumaflow is not None
    at = f"{place.at}.pynumaflow"
    return PynumaflowSink(resolve(spec.pynumaflow, at), at)

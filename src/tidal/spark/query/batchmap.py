"""pynumaflow's ``BatchMapper`` as a Tidal step: the handler gets a task's whole batch at once.

``udf: {pynumaflow: module:Flatmap}`` where ``Flatmap`` subclasses pynumaflow's ``BatchMapper``
(or names a function ``async def handler(datums) -> BatchResponses``: one argument, where a map
function takes two; :func:`tidal.spec.sdk_kinds.map_kind` tells them apart). Numaflow streams a
read batch to the handler over gRPC and waits for one ``BatchResponse`` per message; Tidal calls
it in the Spark task that holds the micro-batch's messages, with the same ``Datum``\\ s (their
``id`` is Tidal's message id) as an async iterator, so a handler that batches its own calls
(a model, a database) sees as many messages as the task read.

Its responses are mapped back to their messages by id: each ``BatchResponse``'s messages are
that message's outputs, with their keys and tags, as a map's are (one output keeps the input's
id, more get ``<id>.<k>``; ``Message.to_drop()`` is dropped and counted). A response for an id
that is not in the batch, a second response for one, or none for a message is an error naming the
id, as Numaflow fails the batch then.

Failures: a call that raises (or answers wrongly, or runs past ``timeoutSeconds``, which limits
the whole batch's call) is retried ``retries`` times as a whole; then each message is sent alone,
in a batch of one with its own retries, to find which ones fail: those go to the dead letter (or
stop the vertex naming them), the others go on (:class:`tidal.spark.query.udf.Transform`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from tidal.spark.batch.clients import built
from tidal.spark.batch.clients import call as _call
from tidal.spark.query.outcome import Output, output

__all__ = ["batch_handler", "with_ids"]


def batch_handler(obj: Any, path: str) -> Callable[[list[Any]], list[list[Output]]]:
    """``obj`` (a ``BatchMapper`` class or instance, or a batch function) as
    ``call(datums) -> the outputs of each datum, in the datums' order``. A class is built with no
    arguments, as numaflow-python's example builds its own (``BatchMapAsyncServer(Flatmap())``)."""
    obj = built(obj, path)
    fn = getattr(obj, "handler", obj)
    if not callable(fn):
        raise TypeError(f"{path}: {type(obj).__name__} is not a pynumaflow BatchMapper")

    def call(datums: list[Any]) -> list[list[Output]]:
        async def stream() -> AsyncIterator[Any]:
            for d in datums:
                yield d

        return by_id(_call(fn(stream())), [d.id for d in datums])

    return call


def by_id(responses: Any, ids: list[str]) -> list[list[Output]]:
    """The outputs of each of ``ids`` from the handler's ``BatchResponses``: every id answered
    once, no other."""
    if isinstance(responses, str | bytes) or not hasattr(responses, "__iter__"):
        raise TypeError(f"a BatchMapper must return BatchResponses, got {type(responses).__name__}")
    wanted = set(ids)
    found: dict[str, list[Output]] = {}
    for response in responses:
        rid = getattr(response, "id", None)
        if rid not in wanted:
            raise ValueError(f"a BatchResponse for id {rid!r}, which is not in the batch")
        if rid in found:
            raise ValueError(f"two BatchResponses for id {rid!r}")
        found[rid] = [output(m) for m in response.messages]
    missing = [i for i in ids if i not in found]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ValueError(f"no BatchResponse for id {missing[0]!r}{more}")
    return [found[i] for i in ids]


def with_ids(datums: list[Any], ids: list[str]) -> list[Any]:
    """pynumaflow's batch-map ``Datum``\\ s: ``datums`` (map ``Datum``\\ s) with Tidal's ids."""
    from pynumaflow.batchmapper import Datum

    return [
        Datum(
            id=i, keys=list(d.keys), value=d.value, event_time=d.event_time, watermark=d.watermark, headers={}
        )
        for i, d in zip(ids, datums, strict=True)
    ]

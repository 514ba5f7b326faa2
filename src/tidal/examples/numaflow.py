"""Numaflow's example UDFs as pynumaflow handlers: what its docs' and examples' images run.

Numaflow's example pipelines name container images (``quay.io/numaio/numaflow-go/map-cat``, …)
whose code lives in numaflow-go's ``examples/``. These are the same functions written against
Numaflow's Python SDK, so a manifest that names the image runs on Tidal unchanged
(:mod:`tidal.spec.manifest` maps each image to its handler here), and a user can read what each one does.
Each is a plain ``handler(keys, datum) -> Messages``, as pynumaflow's examples write them.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterable, Iterator
from datetime import datetime

from pynumaflow.mapper import Datum, Message, Messages
from pynumaflow.reducer import Datum as ReduceDatum
from pynumaflow.reducer import Message as ReduceMessage
from pynumaflow.reducer import Messages as ReduceMessages
from pynumaflow.reducer import Metadata, Reducer
from pynumaflow.shared.asynciter import NonBlockingIterator
from pynumaflow.sinker import Datum as SinkDatum
from pynumaflow.sinker import Message as SinkMessage
from pynumaflow.sinker import Response, Responses
from pynumaflow.sourcer import (
    AckRequest,
    NackRequest,
    Offset,
    PartitionsResponse,
    PendingResponse,
    ReadRequest,
    Sourcer,
    get_default_partitions,
)
from pynumaflow.sourcer import Message as SourceMessage

_LOGGER = logging.getLogger(__name__)

__all__ = [
    "ReduceCounter",
    "SimpleSource",
    "cat",
    "even_odd",
    "filter_id",
    "flatmap",
    "log_sink",
    "number",
    "prefix_keys",
    "reduce_counter",
    "reduce_sum",
    "retry",
]


def cat(keys: list[str], datum: Datum) -> Messages:
    """``map-cat``: the message as it came."""
    return Messages(Message(datum.value, keys=keys))


def even_odd(keys: list[str], datum: Datum) -> Messages:
    """``map-even-odd``: an integer payload tagged ``even-tag`` or ``odd-tag`` (keyed ``even`` or
    ``odd``); anything that is not an integer is dropped."""
    try:
        num = int(datum.value.decode())
    except (UnicodeDecodeError, ValueError):
        return Messages(Message.to_drop())
    if num % 2 == 0:
        return Messages(Message(datum.value, keys=["even"], tags=["even-tag"]))
    return Messages(Message(datum.value, keys=["odd"], tags=["odd-tag"]))


def bypass_cat(keys: list[str], datum: Datum) -> Messages:
    """For Numaflow's e2e ``map-bypass-cat`` (``TestMapBypass``): the message as it is, tagged as
    numaflow-rs's example tags it, by a word in its value (``fallback``; ``onSuccess`` or, as the
    e2e test sends it, ``on-success``; ``primary`` → ``sink``); a value with none of them, by its
    number (the generator's, or an integer payload) modulo 3, for a MonoVertex's ``bypass`` to route."""
    text = datum.value.decode(errors="replace")
    worded = [tag for tag, words in _BYPASS_WORDS if any(w in text for w in words)]
    if worded:
        return Messages(Message(datum.value, keys=keys, tags=worded[:1]))
    parts = datum.value.split()
    try:
        num = int(parts[1] if len(parts) > 1 else datum.value)
    except ValueError:
        num = 0
    return Messages(Message(datum.value, keys=keys, tags=[("sink", "fallback", "onSuccess")[num % 3]]))


_BYPASS_WORDS = (
    ("fallback", ("fallback",)),
    ("onSuccess", ("onSuccess", "on-success")),
    ("sink", ("primary",)),
)


def flatmap(keys: list[str], datum: Datum) -> Messages:
    """``map-flatmap``: one message per comma-separated part."""
    return Messages(*(Message(part.encode()) for part in datum.value.decode().split(",")))


def filter_id(keys: list[str], datum: Datum) -> Messages:
    """``map-filter-id``: JSON messages whose ``id`` is below 100, as the example's expression
    ``int(json(payload).id) < 100`` keeps them; anything else is dropped."""
    try:
        keep = int(json.loads(datum.value)["id"]) < 100
    except (ValueError, KeyError, TypeError):
        keep = False
    return Messages(Message(datum.value, keys=keys) if keep else Message.to_drop())


_counts: dict[bytes, int] = {}
SUCCESS_ITERATION = 3


def retry(keys: list[str], datum: Datum) -> Messages:
    """``map-retry``: a message is tagged ``retry`` until it has been seen three times, then
    passed on (numaflow-go's example keeps the counts in memory, per process, as this does)."""
    seen = _counts.get(datum.value, 0) + 1
    if seen >= SUCCESS_ITERATION:
        _counts.pop(datum.value, None)
        return Messages(Message(datum.value))
    _counts[datum.value] = seen
    return Messages(Message(datum.value, tags=["retry"]))


def prefix_keys(keys: list[str], datum: Datum) -> Messages:
    """The message with the keys it came with in front (``even:42``), keys kept: shows what
    the upstream handler keyed it by."""
    return Messages(Message(",".join(keys).encode() + b":" + datum.value, keys=keys))


def number(keys: list[str], datum: Datum) -> Messages:
    """Tidal's generator's message (``gen 000000000042 …``) as its number (``42``): what
    Numaflow's HTTP examples post, for pipelines fed by the generator."""
    parts = datum.value.split()
    return Messages(Message(str(int(parts[1])).encode() if len(parts) > 1 else datum.value))


def by_bucket(keys: list[str], datum: Datum) -> Messages:
    """The generator's message keyed by its number modulo 16 (``b7``): enough keys for a keyed
    reduce to spread over several state partitions (``tidal bench reduce-elastic``)."""
    parts = datum.value.split()
    n = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return Messages(Message(datum.value, keys=[f"b{n % 16}"]))


def by_number(keys: list[str], datum: Datum) -> Messages:
    """The generator's message keyed by its own number (``k1234``): a key per message, so a keyed
    reduce's state holds as many keys as messages (``tidal bench reduce-pause``)."""
    parts = datum.value.split()
    n = parts[1].decode() if len(parts) > 1 else "0"
    return Messages(Message(datum.value, keys=[f"k{n}"]))


def fallback_sink(datums: Iterator[SinkDatum]) -> Responses:
    """Numaflow's e2e ``fb-sink-log`` (``TestFallbackSink``): answers every message "fallback",
    so the sink's ``fallback`` receives each one."""
    return Responses(*(Response.as_fallback(msg.id) for msg in datums))


def on_success_sink(datums: Iterator[SinkDatum]) -> Responses:
    """Numaflow's e2e ``on-success-log`` (``TestOnSuccessSink``): accepts every message "on
    success" with the message ``on-success-message``, which the sink's ``onSuccess`` receives."""
    return Responses(*(Response.as_on_success(msg.id, SinkMessage(b"on-success-message")) for msg in datums))


def failing_sink(datums: Iterator[SinkDatum]) -> Responses:
    """Numaflow's e2e ``sink-failure`` (``TestExponentialBackoffRetryStrategyForPipeline``):
    refuses every message, so the sink's retry strategy runs out and its ``onFailure`` decides."""
    return Responses(*(Response.as_failure(msg.id, "the sink refuses everything") for msg in datums))


def log_sink(datums: Iterator[SinkDatum]) -> Responses:
    """numaflow-python's ``examples/sink/log`` (the function form): logs each message, all succeed."""
    responses = Responses()
    for msg in datums:
        _LOGGER.info("User Defined Sink %s", msg.value.decode("utf-8", "replace"))
        responses.append(Response.as_success(msg.id))
    return responses


class SimpleSource(Sourcer):  # type: ignore[misc]  # pynumaflow ships no type information
    """numaflow-python's ``examples/source/simple_source`` (``AsyncSource``), as the SDK writes it:
    numbers from 1, each offset kept until it is acknowledged; it reports nothing pending."""

    def __init__(self) -> None:
        self.read_idx: int = 0
        self.to_ack_set: set[int] = set()
        self.nacked: set[int] = set()

    async def read_handler(self, datum: ReadRequest, output: NonBlockingIterator) -> None:
        if self.to_ack_set:
            return
        for _ in range(datum.num_records):
            if self.nacked:
                idx = self.nacked.pop()
            else:
                idx = self.read_idx
                self.read_idx += 1
            headers = {"x-txn-id": str(uuid.uuid4())}
            await output.put(
                SourceMessage(
                    payload=str(self.read_idx).encode(),
                    offset=Offset.offset_with_default_partition_id(str(idx).encode()),
                    event_time=datetime.now(),
                    headers=headers,
                )
            )
            self.to_ack_set.add(idx)

    async def ack_handler(self, ack_request: AckRequest) -> None:
        for req in ack_request.offsets:
            self.to_ack_set.remove(int(req.offset))

    async def nack_handler(self, ack_request: NackRequest) -> None:
        for req in ack_request.offsets:
            offset = int(req.offset)
            self.to_ack_set.remove(offset)
            self.nacked.add(offset)

    async def pending_handler(self) -> PendingResponse:
        return PendingResponse(count=0)

    async def active_partitions_handler(self) -> PartitionsResponse:
        return PartitionsResponse(partitions=get_default_partitions())


async def reduce_counter(keys: list[str], datums: AsyncIterable[ReduceDatum], md: Metadata) -> ReduceMessages:
    """numaflow-python's ``examples/reduce/counter`` (the function form): how many messages the
    key had in the window, with the window's bounds."""
    interval_window = md.interval_window
    counter = 0
    async for _ in datums:
        counter += 1
    msg = (
        f"counter:{counter} interval_window_start:{interval_window.start} "
        f"interval_window_end:{interval_window.end}"
    )
    return ReduceMessages(ReduceMessage(str.encode(msg), keys=keys))


class ReduceCounter(Reducer):  # type: ignore[misc]  # pynumaflow ships no type information
    """numaflow-python's ``examples/reduce/counter`` (the class form, built with ``init_args``)."""

    def __init__(self, counter: int) -> None:
        self.counter = counter

    async def handler(
        self, keys: list[str], datums: AsyncIterable[ReduceDatum], md: Metadata
    ) -> ReduceMessages:
        self.counter = 0
        async for _ in datums:
            self.counter += 1
        return ReduceMessages(ReduceMessage(str(self.counter).encode(), keys=keys))


class SlowReduceCounter(ReduceCounter):
    """:class:`ReduceCounter` with ``cost`` seconds of work per message (a lookup, a model): a
    keyed aggregation whose stateful stage is the bottleneck, which more state partitions speed
    up (the partition policy's tests and ``tidal bench reduce``)."""

    def __init__(self, counter: int, cost: float = 0.005) -> None:
        super().__init__(counter)
        self.cost = cost

    async def handler(
        self, keys: list[str], datums: AsyncIterable[ReduceDatum], md: Metadata
    ) -> ReduceMessages:
        counted = await super().handler(keys, datums, md)
        time.sleep(self.cost * self.counter)  # blocking on purpose: the task's slot is busy
        return counted


async def reduce_sum(keys: list[str], datums: AsyncIterable[ReduceDatum], md: Metadata) -> ReduceMessages:
    """``reduce-sum`` (numaflow-go's ``examples/reducer/sum``): the sum of the integer values of
    the key's messages in the window; a value that is not an integer is skipped."""
    total = 0
    async for d in datums:
        try:
            total += int(d.value.decode())
        except (UnicodeDecodeError, ValueError):
            continue
    return ReduceMessages(ReduceMessage(str(total).encode(), keys=keys))

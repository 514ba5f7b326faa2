"""The accumulator window's pure parts: the replay of a handler up to the message it waits for,
the key's state as the state store keeps it, and numaflow-python's stream sorter run unchanged
through both, batch after batch, as the Spark query runs it (tidal.spark.query.accumulator)."""

from __future__ import annotations

import importlib.util
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pynumaflow.accumulator import Datum, Message

from tidal.spark.query.accumulator import KeyState, Stored, handed_watermark, naive, replay

SORTER = Path(__file__).parents[2] / "data" / "numaflow" / "python" / "accumulator" / "streamsorter"


def _sorter() -> type:
    spec = importlib.util.spec_from_file_location("streamsorter_example", SORTER / "example.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.StreamSorter  # type: ignore[no-any-return]


def _datum(t: float, watermark: float, i: int = 0) -> Datum:
    value = str(t).encode()
    return Datum(keys=["k"], value=value, event_time=naive(t), watermark=naive(watermark), id_=f"m{i}")


class Echo:
    """Emits each message as it comes, and ``end`` when its messages end."""

    async def handler(self, datums: Any, output: Any) -> None:
        async for datum in datums:
            await output.put(Message.from_datum(datum))
        await output.put(Message(b"end"))

    def __call__(self, datums: Any, output: Any) -> Any:
        return self.handler(datums, output)


def test_a_replay_stops_where_the_handler_asks_beyond_the_last_message_and_a_close_lets_it_finish():
    datums = [_datum(10 + i, 0, i) for i in range(3)]
    assert [m.value for m in replay(Echo, datums, closed=False)] == [b"10", b"11", b"12"]
    assert [m.value for m in replay(Echo, datums, closed=True)] == [b"10", b"11", b"12", b"end"]
    assert [m.value for m in replay(Echo, [], closed=True)] == [b"end"]


def test_a_handlers_error_is_raised_not_swallowed():
    async def broken(datums: Any, output: Any) -> None:
        async for _ in datums:
            raise ValueError("bad datum")

    with pytest.raises(ValueError, match="bad datum"):
        replay(lambda: broken, [_datum(1, 0)], closed=False)


def test_message_from_datum_keeps_id_keys_and_naive_utc_times_as_pynumaflows_server_gives_them():
    (message,) = replay(Echo, [_datum(1_700_000_000.5, 1_700_000_000)], closed=False)
    assert message.id == "m0" and message.keys == ["k"]
    assert message.event_time == datetime(2023, 11, 14, 22, 13, 20, 500000)
    assert message.event_time.tzinfo is None


def test_a_keys_state_survives_its_encoding_and_keeps_each_batch_in_event_time_order():
    state = KeyState.decode(None)
    state.add([("b", b"\x00\xff", 12.0, ["k"], 0), ("a", b"x", 11.0, ["k"], 0)])
    state.add([("c", b"y", 10.5, [], 11_000)])  # a later batch stays after the earlier one
    state.emitted = 2
    again = KeyState.decode(state.encode())
    assert [d[0] for d in again.datums] == ["a", "b", "c"]
    assert again.datums[1] == ("b", b"\x00\xff", 12.0, ["k"], 0)
    assert (again.emitted, again.start, again.latest) == (2, 11.0, 12.0)


def _run_batches(batches: list[list[float]]) -> tuple[list[list[float]], list[float]]:
    """The stream sorter fed as the query feeds it: each batch's messages carry the watermark of
    the batch (the latest event time before it), and each batch emits only the messages past
    those emitted before; then the timeout closes the key. Returns each batch's emissions and
    the close's."""
    sorter = _sorter()
    state = KeyState.decode(None)
    watermark = 0
    emitted: list[list[float]] = []
    for batch in batches:
        rows: list[Stored] = [(f"m{t}", str(t).encode(), t, ["k"], watermark) for t in batch]
        state.add(rows)
        messages = replay(sorter, _datums(state), closed=False)
        emitted.append([float(m.value) for m in messages[state.emitted :]])
        state.emitted = len(messages)
        watermark = round(state.latest * 1000)
    messages = replay(sorter, _datums(state), closed=True)
    return emitted, [float(m.value) for m in messages[state.emitted :]]


def _datums(state: KeyState) -> list[Datum]:
    return [
        Datum(keys=k, value=p, event_time=naive(t), watermark=naive(w / 1000), id_=i)
        for i, p, t, k, w in state.datums
    ]


def test_numaflows_stream_sorter_emits_sorted_as_the_watermark_moves_and_flushes_at_the_timeout():
    batches = [[60.0, 59.0, 61.0], [62.0, 61.5, 63.0], [64.0, 63.5]]
    emitted, closing = _run_batches(batches)
    # Batch 2's messages carry watermark 61: the sorter flushes what is at or before it.
    assert emitted == [[], [59.0, 60.0, 61.0], [61.5, 62.0, 63.0]]
    assert closing == [63.5, 64.0]
    everything = [t for part in [*emitted, closing] for t in part]
    assert everything == sorted(t for batch in batches for t in batch)  # each once, in order


@pytest.mark.parametrize(
    ("spark_ms", "times", "previous_ms", "handed"),
    [
        pytest.param(50_000, [55.0, 60.0], 0, 50_000, id="spark's, when every message is past it"),
        pytest.param(50_000, [48.0, 60.0], 0, 47_999, id="below a message at or before spark's"),
        pytest.param(50_000, [48.0005], 0, 48_000, id="strictly below, to the ms"),
        pytest.param(50_000, [48.0], 49_000, 49_000, id="never back"),
        pytest.param(-9_223_372_036_854_775_808, [1.0], 0, 0, id="no watermark yet"),
        pytest.param(50_000, [], 0, 50_000, id="a timeout: no messages"),
    ],
)
def test_the_watermark_handed_over_is_below_every_message_that_can_still_come(
    spark_ms, times, previous_ms, handed
):
    assert handed_watermark(spark_ms, times, previous_ms) == handed


def test_the_stream_sorter_stays_sorted_when_a_batch_brings_messages_behind_sparks_watermark():
    """Spark drops late messages against the previous batch's watermark: a batch can bring one
    at or before the current watermark. Handed over with it, the sorter would flush past it."""
    sorter = _sorter()
    state = KeyState.decode(None)
    emitted: list[float] = []
    for spark_ms, batch in [(0, [10.0, 20.0]), (20_000, [30.0]), (30_000, [25.0, 40.0]), (40_000, [45.0])]:
        mark = handed_watermark(spark_ms, batch, state.datums[-1][4] if state.datums else 0)
        state.add([(f"m{t}", str(t).encode(), t, ["k"], mark) for t in batch])
        messages = replay(sorter, _datums(state), closed=False)
        emitted += [float(m.value) for m in messages[state.emitted :]]
        state.emitted = len(messages)
    assert emitted == [10.0, 20.0, 25.0, 30.0, 40.0]  # 25 came with Spark's watermark at 30: in order


class _GroupState:
    """Spark's ``GroupState`` as ``applyInPandasWithState`` hands it over, with its refusal of a
    timeout behind the watermark (``INVALID_TIMEOUT_TIMESTAMP``)."""

    def __init__(self, watermark_ms: int, saved: Any = None) -> None:
        self.watermark_ms, self.saved, self.removed, self.timeout = watermark_ms, saved, False, None
        self.hasTimedOut = False

    @property
    def exists(self) -> bool:
        return self.saved is not None

    @property
    def get(self) -> Any:
        return self.saved

    def getCurrentWatermarkMs(self) -> int:
        return self.watermark_ms

    def update(self, value: Any) -> None:
        self.saved = value

    def remove(self) -> None:
        self.saved, self.removed = None, True

    def setTimeoutTimestamp(self, ms: int) -> None:
        if ms < self.watermark_ms:
            raise ValueError(
                f"[INVALID_TIMEOUT_TIMESTAMP] {ms} is earlier than the watermark {self.watermark_ms}"
            )
        self.timeout = ms


def test_a_key_whose_timeout_the_watermark_already_passed_closes_with_its_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A restarted query resumes its watermark ahead of a key's state; Spark then calls with the
    key's new messages before firing its timeout. The key closes there, everything flushed once."""
    import pandas as pd

    from tidal.spark.query.accumulator import _Accumulate
    from tidal.spark.query.queries import query_config
    from tidal.spec import Pipeline
    from tidal.spec.chains import plan_chains

    monkeypatch.syspath_prepend(str(SORTER))  # numaflow-python's example, as a pipeline names it
    spec = (
        Pipeline("sorter", chaining=False)
        .source("in", generator={"rate": 1})
        .reduce(
            "sort",
            "example:StreamSorter",
            window={"accumulator": {"timeout": "10s"}},
            keyed=True,
        )
        .sink("out", "blackhole")
        .build()
    )
    accumulate = _Accumulate(query_config(spec, plan_chains(spec), "sort", db="x.db", run_dir=".", url=None))
    frame = pd.DataFrame(
        {"id": ["a", "b"], "payload": [b"30", b"20"], "t": [30.0, 20.0], "keys": [["k"], ["k"]]}
    )

    on_time = _GroupState(watermark_ms=0)
    list(accumulate(('["k"]',), iter([frame]), on_time))
    assert on_time.timeout == 40_000 and not on_time.removed  # latest 30 s + 10 s

    late = _GroupState(watermark_ms=995_000, saved=on_time.saved)  # resumed far past 40 s
    more = pd.DataFrame({"id": ["c"], "payload": [b"25"], "t": [25.0], "keys": [["k"]]})
    flushed = pd.concat(list(accumulate(('["k"]',), iter([more]), late)))
    assert late.removed and late.timeout is None  # closed, no timeout behind the watermark
    assert [float(p) for p in flushed["payload"]] == [20.0, 25.0, 30.0]  # each once, sorted

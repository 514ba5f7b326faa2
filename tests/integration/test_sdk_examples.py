"""numaflow-python's batch map and reduce stream examples, unchanged, on Spark: their
``pipeline.yaml`` converted as ``tidal convert --handlers`` converts it, each handler the
example's own module (``tests/data/numaflow-python``), only the HTTP or generator source swapped
for timed lines and the log sink for a file, to count what arrives."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from tidal.spark.run.pipeline import PipelineRun
from tidal.spec import manifest, parse_pipeline
from tidal.testing import delivered

from .waits import eventually

EXAMPLES = Path(__file__).parents[1] / "data" / "numaflow-python"
T0 = 1_699_999_980  # a multiple of 60: the examples' 60 s windows start here
_SHIPPED: set[str] = set()  # the example modules given to this process's SparkContext


@pytest.fixture
def examples(spark, monkeypatch):  # type: ignore[no-untyped-def]
    """The examples import in the driver (the spec's checks) and in Spark's workers (the tasks)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    for module in ("batchmap_flatmap.py", "reducestream_counter.py", "reducestream_sum.py"):
        if module not in _SHIPPED:  # addPyFile takes each file once per SparkContext
            spark.sparkContext.addPyFile(str(EXAMPLES / module))
            _SHIPPED.add(module)
    return spark


def _converted(example: str, handlers: dict[str, str], lines: Path, out: Path) -> dict:
    data = manifest.convert(yaml.safe_load((EXAMPLES / example).read_text()), handlers).data
    data["vertices"][0]["source"] = {
        "user": {
            "class": "tidal.examples.sources:LinesSource",
            "options": {"path": str(lines), "timestamps": True},
        }
    }
    data["vertices"][-1]["sink"] = {"file": {"path": str(out)}}
    return data


def test_the_batch_flatmap_example_splits_every_message_exactly_once(examples, tmp_path):
    lines, out = tmp_path / "in.txt", tmp_path / "out.jsonl"
    lines.write_text("".join(f"{T0 + i} {3 * i + 1},{3 * i + 2},{3 * i + 3}\n" for i in range(100)))
    data = _converted(
        "batchmap-flatmap-pipeline.yaml",
        {"numaflow-python/batch-map-flatmap": "batchmap_flatmap:Flatmap"},
        lines,
        out,
    )
    assert data["vertices"][1]["udf"] == {"pynumaflow": "batchmap_flatmap:Flatmap"}
    spec = parse_pipeline(data)

    def split_once() -> None:
        records = delivered(out)
        assert sorted(int(r["payload"]) for r in records) == list(range(1, 301))
        ids = [r["id"] for r in records]
        assert len(set(ids)) == 300
        # each piece carries its line's id and its place in the line: <id>.0, <id>.1, <id>.2
        by_line: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for r in records:
            line, _, k = r["id"].rpartition(".")
            by_line[line].append((int(k), int(r["payload"])))
        for parts in by_line.values():
            first = min(parts)[1]
            assert sorted(parts) == [(0, first), (1, first + 1), (2, first + 2)], parts

    with PipelineRun(spec, tmp_path / "run", spark=examples, trigger_seconds=0.25) as run:
        eventually(split_once, 120, "every line split once", run=run, poll=0.5)
    split_once()  # and nothing doubled since


@pytest.mark.parametrize(
    ("example", "handler", "expected"),
    [
        # 25 messages per key: "counter:11" each time the count passes 10, then the rest
        (
            "reducestream-counter-pipeline.yaml",
            "reducestream_counter:ReduceCounter",
            {
                "odd": [b"counter:11", b"counter:11", b"counter:3"],
                "even": [b"counter:11", b"counter:11", b"counter:3"],
            },
        ),
        # the running sum each time it reaches 100, then the rest: odd 1..49, even 2..50
        ("reducestream-sum-pipeline.yaml", "reducestream_sum:ReduceSum", None),
    ],
    ids=["counter", "sum"],
)
def test_the_reduce_stream_examples_give_every_result_when_the_window_closes(
    examples, tmp_path, example, handler, expected
):
    lines, out = tmp_path / "in.txt", tmp_path / "out.jsonl"
    # 1..50 in the window [T0, T0 + 60), then 51 far ahead: the watermark passes the window's end
    lines.write_text("".join(f"{T0 + n} {n}\n" for n in range(1, 51)) + f"{T0 + 200} 51\n")
    data = _converted(example, {"compute-sum": handler}, lines, out)
    assert data["vertices"][2]["udf"]["groupBy"]["window"]["fixed"]["streaming"] is True
    data["vertices"][2]["udf"]["reduceArgs"] = [0]  # ReduceStreamAsyncServer(..., init_args=(0,))
    spec = parse_pipeline(data)

    def results() -> dict[str, list[bytes]]:
        found: dict[str, list[tuple[str, bytes]]] = defaultdict(list)
        for r in delivered(out):
            key = r["id"].removeprefix("compute-sum:").partition("@")[0]
            assert r["id"].startswith(f"compute-sum:{key}@{T0 * 1000}-{(T0 + 60) * 1000}"), r["id"]
            found[key].append((r["id"], r["payload"].encode()))
        return {
            k: [p for _, p in sorted(v, key=lambda item: int(item[0].rpartition(".")[2]))]
            for k, v in found.items()
        }

    def every_result() -> None:
        got = results()
        if expected is not None:
            assert got == expected
        else:
            assert {k: sum(int(p) for p in v) for k, v in got.items()} == {"odd": 625, "even": 650}
            assert all(len(v) > 1 for v in got.values())  # the early results came too, in order
            assert all(int(p) >= 100 for v in got.values() for p in v[:-1])

    with PipelineRun(spec, tmp_path / "run", spark=examples, trigger_seconds=0.25) as run:
        eventually(every_result, 150, "the window's results", run=run, poll=0.5)
    every_result()  # and nothing doubled since

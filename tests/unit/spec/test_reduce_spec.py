"""A reduce vertex's spec: Numaflow's groupBy (durations as Numaflow writes them), and each mistake
named with its field and fix."""

from __future__ import annotations

import pytest

from tidal import errors
from tidal.scaling.durations import seconds
from tidal.spec import parse_pipeline

ACCUMULATOR = "groupBy.window.accumulator"


def _spec(group_by: dict | None, **vertex) -> dict:
    udf = {"reduce": "tidal.examples.numaflow:reduce_sum"}
    if group_by is not None:
        udf["groupBy"] = group_by
    return {
        "name": "p",
        "vertices": [
            {"name": "in", "source": {"generator": {}}},
            {"name": "sum", "udf": udf, **vertex},
            {"name": "out", "sink": {"log": {}}},
        ],
        "edges": [{"from": "in", "to": "sum"}, {"from": "sum", "to": "out"}],
    }


def test_durations_read_as_numaflow_writes_them():
    assert [seconds(v) for v in ("60s", "500ms", "2m", "1h", 7, "1.5s")] == [60, 0.5, 120, 3600, 7, 1.5]
    spec = parse_pipeline(
        _spec({"window": {"sliding": {"length": "1m", "slide": "10s"}}, "allowedLateness": "5s"})
    )
    group = spec.vertex("sum").udf.group_by
    assert (group.window.kind, group.window.sliding.length, group.allowed_lateness, group.keyed) == (
        "sliding",
        60.0,
        5.0,
        False,
    )


@pytest.mark.parametrize(
    ("group_by", "field", "text"),
    [
        ({"window": {"fixed": {"length": "0s"}}}, "groupBy.window.fixed.length", "greater than 0"),
        ({"window": {"fixed": {"length": "ten"}}}, "groupBy.window.fixed.length", "is not a duration"),
        ({"window": {"fixed": {"length": 5}, "session": {"timeout": 5}}}, "groupBy.window", "exactly one"),
        (
            {"window": {"sliding": {"length": 5, "slide": 10}}},
            "groupBy.window.sliding",
            "slide 10s is longer",
        ),
        ({"window": {"session": {"timeout": 5}}, "allowedLateness": -1}, "groupBy.allowedLateness", "0"),
        ({"window": {"accumulator": {}}}, "groupBy.window.accumulator.timeout", "is required"),
        ({"window": {"accumulator": {"timeout": "0s"}}}, f"{ACCUMULATOR}.timeout", "greater than 0"),
        ({"window": {"accumulator": {"timeout": "soon"}}}, f"{ACCUMULATOR}.timeout", "60s, 500ms"),
        (
            {"window": {"accumulator": {"timeout": "10s", "length": "5s"}}},
            "groupBy.window.accumulator.length",
            "",
        ),
        (
            {"window": {"session": {"timeout": 5}, "accumulator": {"timeout": 5}}},
            "groupBy.window",
            "exactly one of fixed, sliding, session, accumulator",
        ),
        (None, "vertices[1].udf", "a reduce needs groupBy"),
    ],
)
def test_each_mistake_names_its_field(group_by, field, text):
    with pytest.raises(errors.SpecError) as err:
        parse_pipeline(_spec(group_by))
    assert field in str(err.value) and text in str(err.value)


def test_partitions_belong_to_a_reduce_vertex_and_a_reduce_is_a_query_of_its_own():
    spec = parse_pipeline(_spec({"window": {"fixed": {"length": 10}}, "keyed": True}, partitions=4))
    assert spec.vertex("sum").partitions == 4
    from tidal.spec.chains import plan_chains

    assert all("not chained" in line for line in plan_chains(spec).describe())
    bad = _spec({"window": {"fixed": {"length": 10}}})
    bad["vertices"][2] = {"name": "out", "sink": {"log": {}}, "partitions": 2}
    with pytest.raises(errors.SpecError, match="partitions is a reduce vertex's"):
        parse_pipeline(bad)


def test_an_accumulator_window_takes_numaflows_timeout():
    spec = parse_pipeline(_spec({"window": {"accumulator": {"timeout": "10s"}}, "keyed": True}))
    window = spec.vertex("sum").udf.group_by.window
    assert (window.kind, window.accumulator.timeout) == ("accumulator", 10.0)

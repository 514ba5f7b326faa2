"""Chaining at plan time: which edges run as one query, why the others do not, and what the
controller sees (tidal.spec.chains)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidal import errors
from tidal.spark.batch import rundir
from tidal.spark.batch.config import QueryConfig
from tidal.spark.query.queries import query_config
from tidal.spec import Pipeline, parse_pipeline
from tidal.spec.chains import folded, plan_chains


def _line(chaining: bool = True) -> Pipeline:
    return (
        Pipeline("line", chaining=chaining)
        .source("gen", generator={"rate": 10})
        .map("work", "tidal.examples.udfs:upper", scale={"min": 0, "max": 6})
        .sink("out", "blackhole")
    )


def test_a_line_is_one_chain_headed_by_its_source_with_the_scale_its_members_ask_for():
    spec = _line().build()
    plan = plan_chains(spec)
    assert [c.members for c in plan.chains] == [("gen", "work", "out")]
    assert all(e.chained and e.reason == "one-to-one edge" for e in plan.edges)
    assert plan.signature == "gen>work>out"
    assert plan.chains[0].unused == ()
    assert plan.head_of("out") == "gen"
    # work's scale block is the chain's: the source's rules, with the bounds of the step that works.
    head = folded(spec, plan).vertex("gen")
    assert (head.scale.min, head.scale.max) == (0, 6) and head.kind == "monovertex"


def _clashing(chain: bool | None = None) -> Pipeline:
    edge = {} if chain is None else {"chain": chain}
    return (
        Pipeline("clash")
        .source("gen", generator={"rate": 10}, scale={"min": 1, "max": 3})
        .map("work", "tidal.examples.udfs:upper", scale={"min": 0, "max": 6})
        .sink("out", "blackhole", replicas=2)
        .edge("gen", "work", **edge)
        .edge("work", "out")
    )


def test_members_that_ask_for_different_settings_keep_their_own_and_the_edge_says_which():
    plan = plan_chains(_clashing().build())
    assert [c.members for c in plan.chains] == [("gen",), ("work", "out")]
    edge = plan.edges[0]
    assert not edge.chained
    assert edge.reason == "settings differ: work.scale (not gen's); chain: true chains them"
    # out asks only for replicas, which work leaves at the default: it joins work's chain.
    assert plan.chains[1].settings == {"scale": _clashing().build().vertex("work").scale, "replicas": 2}


def test_chain_true_chains_them_anyway_with_the_first_members_settings_and_names_the_unused():
    spec = _clashing(chain=True).build()
    plan = plan_chains(spec)
    assert [c.members for c in plan.chains] == [("gen", "work", "out")]
    assert plan.edges[0].reason == "chain: true on the edge"
    assert plan.chains[0].unused == ("work.scale",)
    head = folded(spec, plan).vertex("gen")
    assert (head.scale.min, head.scale.max, head.replicas) == (1, 3, 2)


def test_chaining_false_keeps_every_buffer_and_says_so():
    plan = plan_chains(_line(chaining=False).build())
    assert [c.members for c in plan.chains] == [("gen",), ("work",), ("out",)]
    assert {e.reason for e in plan.edges} == {"chain: false on the edge"}
    assert plan.signature == ""


def test_fan_out_fan_in_http_and_sql_are_not_chained_each_with_its_reason():
    spec = parse_pipeline(
        {
            "name": "shapes",
            "vertices": [
                {"name": "in", "source": {"http": {}}},
                {"name": "split", "udf": {"map": "tidal.examples.udfs:upper"}},
                {"name": "a", "udf": {"map": "tidal.examples.udfs:upper"}},
                {"name": "b", "udf": {"sql": "SELECT * FROM input"}},
                {"name": "join", "udf": {"map": "tidal.examples.udfs:upper"}},
                {"name": "out", "sink": {"blackhole": {}}},
            ],
            "edges": [
                {"from": "in", "to": "split"},
                {"from": "split", "to": "a"},
                {"from": "split", "to": "b", "records": {"format": "json", "schema": "x STRING"}},
                {"from": "a", "to": "join"},
                {"from": "b", "to": "join"},
                {"from": "join", "to": "out"},
            ],
        }
    )
    reasons = {(e.from_, e.to): e.reason for e in plan_chains(spec).edges}
    assert reasons[("in", "split")].startswith("in is an HTTP source")
    assert reasons[("split", "a")].startswith("fan-out: split writes 2 edges")
    assert reasons[("a", "join")].startswith("fan-in: join reads 2 edges")
    assert reasons[("join", "out")] == "one-to-one edge"
    assert [c.members for c in plan_chains(spec).chains if c.followers] == [("join", "out")]


def test_a_sql_step_is_never_chained():
    spec = (
        Pipeline("sql")
        .source("gen", generator={"rate": 10})
        .sql("q", "SELECT * FROM input")
        .sink("out", "blackhole")
        .edge("gen", "q", schema="x STRING")
        .edge("q", "out")
        .build()
    )
    assert not any(e.chained for e in plan_chains(spec).edges)
    assert plan_chains(spec).edges[0].reason == "q is a sql step: a query of its own over buffered rows"


def test_chain_true_on_an_edge_that_cannot_be_chained_names_the_edge_and_the_reason():
    with pytest.raises(errors.SpecError) as caught:
        parse_pipeline(
            {
                "name": "fan",
                "vertices": [
                    {"name": "gen", "source": {"generator": {"rate": 1}}},
                    {"name": "a", "sink": {"blackhole": {}}},
                    {"name": "b", "sink": {"blackhole": {}}},
                ],
                "edges": [{"from": "gen", "to": "a", "chain": True}, {"from": "gen", "to": "b"}],
            }
        )
    assert caught.value.path == "edges[0].chain"
    assert "fan-out" in caught.value.problem and "remove chain: true" in caught.value.fix


def test_chain_false_where_it_could_not_chain_anyway_is_accepted():
    spec = parse_pipeline(
        {
            "name": "fan",
            "vertices": [
                {"name": "gen", "source": {"generator": {"rate": 1}}},
                {"name": "a", "sink": {"blackhole": {}}},
                {"name": "b", "sink": {"blackhole": {}}},
            ],
            "edges": [{"from": "gen", "to": "a", "chain": False}, {"from": "gen", "to": "b"}],
        }
    )
    assert not any(e.chained for e in plan_chains(spec).edges)


def test_the_controller_sees_each_chain_as_its_head_with_the_tails_sink_and_edges():
    spec = parse_pipeline(
        {
            "name": "two",
            "vertices": [
                {"name": "gen", "source": {"generator": {"rate": 1}}, "scale": {"max": 3}},
                {"name": "m", "udf": {"map": "tidal.examples.udfs:upper"}},
                {"name": "n", "udf": {"map": "tidal.examples.udfs:upper"}},
                {"name": "out", "sink": {"file": {"path": "o.jsonl"}}},
            ],
            "edges": [
                {"from": "gen", "to": "m"},
                {"from": "m", "to": "n", "chain": False},
                {"from": "n", "to": "out"},
            ],
        }
    )
    seen = folded(spec, plan_chains(spec))
    assert [v.name for v in seen.vertices] == ["gen", "n"]
    assert [(e.from_, e.to) for e in seen.edges] == [("gen", "n")]
    assert seen.vertex("gen").scale.max == 3 and seen.vertex("gen").kind == "source"
    assert seen.vertex("n").sink is not None and seen.vertex("n").kind == "udf"


def test_a_chains_query_runs_every_member_and_writes_the_tails_outputs():
    spec = _line().build()
    config = query_config(spec, plan_chains(spec), "gen", db="/tmp/x.db", run_dir="/tmp", url=None)
    decoded = QueryConfig.decode(config.encode())
    assert decoded.members == ("gen", "work", "out") and decoded.tail == "out"
    assert [(n, u is not None) for n, u in decoded.steps()] == [
        ("gen", False),
        ("work", True),
        ("out", False),
    ]
    assert decoded.outputs == () and decoded.sink is not None and decoded.input is None
    with pytest.raises(ValueError, match="runs in the query of its chain's head, gen"):
        query_config(spec, plan_chains(spec), "work", db="/tmp/x.db", run_dir="/tmp", url=None)


def test_a_run_directory_refuses_other_chains_and_a_run_from_before_chaining_counts_as_none(tmp_path):
    rundir.claim(tmp_path, _line().build())
    assert rundir.claim(tmp_path, _line().build())  # the same chains: it resumes
    with pytest.raises(
        errors.RunDirectoryError, match="ran with gen → work → out; the spec now has no chains"
    ):
        rundir.claim(tmp_path, _line(chaining=False).build())
    old = tmp_path / "old"
    old.mkdir()
    recorded = rundir.identity(_line(chaining=False).build())
    del recorded["chains"]
    (old / rundir.IDENTITY_FILE).write_text(json.dumps(recorded))
    assert rundir.claim(old, _line(chaining=False).build())
    with pytest.raises(errors.RunDirectoryError, match="set chain: on the edges as this run had them"):
        rundir.claim(old, _line().build())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.booleans()), max_size=12))
def test_every_vertex_is_in_exactly_one_chain_and_every_chain_is_a_path_of_chained_edges(pairs):
    """Any acyclic graph: chains partition the vertices, each link is a chained edge, each
    chained edge is one-to-one."""
    names = [f"v{i}" for i in range(7)]
    edges = {(min(a, b), max(a, b)): keep for a, b, keep in pairs if a != b}
    outs = {a for a, _ in edges}
    ins = {b for _, b in edges}
    vertices = []
    for i, name in enumerate(names):
        if i not in ins:
            vertices.append({"name": name, "source": {"generator": {"rate": 1}}})
        elif i not in outs:
            vertices.append({"name": name, "sink": {"blackhole": {}}})
        else:
            vertices.append({"name": name, "udf": {"map": "tidal.examples.udfs:upper"}})
    vertices = [v for i, v in enumerate(vertices) if i in ins | outs]
    if not vertices:
        return
    spec = parse_pipeline(
        {
            "name": "any",
            "vertices": vertices,
            "edges": [
                {"from": f"v{a}", "to": f"v{b}", "chain": None if keep else False}
                for (a, b), keep in edges.items()
            ],
        }
    )
    plan = plan_chains(spec)
    members = [m for c in plan.chains for m in c.members]
    assert sorted(members) == sorted(v.name for v in spec.vertices)
    chained = {(e.from_, e.to) for e in plan.edges if e.chained}
    links = {(a, b) for c in plan.chains for a, b in zip(c.members, c.members[1:], strict=False)}
    assert links == chained
    for a, b in chained:
        assert spec.outputs(a) == [b] and spec.inputs(b) == [a]

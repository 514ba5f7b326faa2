"""``kind: MonoVertex``: parsed into one vertex with a source and a sink; errors name its keys."""

from __future__ import annotations

import pytest

from tidal.errors import SpecError
from tidal.spec import parse_pipeline

MONO = {
    "kind": "MonoVertex",
    "name": "orders",
    "source": {"generator": {"rate": 10}},
    "transformer": {"map": "tidal.examples.udfs:upper"},
    "sink": {"blackhole": {}},
    "scale": {"max": 3},
    "limits": {"readBatchSize": 100},
}


def test_a_monovertex_is_one_vertex_named_after_it_with_source_transformer_and_sink():
    spec = parse_pipeline(MONO)
    (v,) = spec.vertices
    assert (v.name, v.kind, v.mono, spec.edges) == ("orders", "monovertex", True, [])
    assert v.udf is not None and v.udf.kind.value == "map" and v.scale.max == 3
    assert spec.limits.read_batch_size == 100
    assert parse_pipeline({**{k: v for k, v in MONO.items() if k != "transformer"}}).vertices[0].udf is None
    under_udf = {**{k: v for k, v in MONO.items() if k != "transformer"}, "udf": MONO["transformer"]}
    assert parse_pipeline(under_udf).vertices[0].udf is not None


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ({"transformer": {"map": "nowhere:fn"}}, "transformer.map", "cannot import"),
        ({"source": {"http": {}}}, "source.http", "cannot be part of a MonoVertex"),
        ({"scale": {"min": 5, "max": 2}}, "scale.max", "below min"),
        ({"sink": None}, "sink", "is required"),
        ({"sourc": {}}, "sourc", "did you mean 'source'"),
        ({"edges": []}, "edges", "has no edges"),
        ({"kind": "Monovertex"}, "kind", "unknown kind"),
        ({"udf": {"map": "tidal.examples.udfs:upper"}}, "transformer", "given twice"),
        ({"transformer": {"sql": "SELECT _id FROM input"}}, "transformer", "cannot be a MonoVertex"),
    ],
)
def test_errors_name_the_monovertex_keys_as_written(change, path, words):
    data = {k: v for k, v in {**MONO, **change}.items() if v is not None}
    with pytest.raises(SpecError) as caught:
        parse_pipeline(data)
    problems = [caught.value, *caught.value.others]
    assert any(p.path == path and words in str(p) for p in problems), [str(p) for p in problems]


def test_a_source_and_a_sink_in_one_vertex_of_a_pipeline_is_refused_as_a_monovertex_that_runs_alone():
    pipeline = {
        "name": "p",
        "vertices": [
            {"name": "a", "source": {"generator": {}}, "sink": {"blackhole": {}}},
            {"name": "b", "sink": {"blackhole": {}}},
        ],
        "edges": [{"from": "a", "to": "b"}],
    }
    with pytest.raises(SpecError, match="MonoVertex, which runs alone"):
        parse_pipeline(pipeline)

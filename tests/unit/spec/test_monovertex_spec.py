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
        ({"source": {"http": {"port": "eighty"}}}, "source.http.port", "valid integer"),
        ({"source": {"http": {}}, "sink": {"parquet": {}}}, "sink.parquet.path", "is required"),
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


def test_an_http_monovertex_runs_its_receivers_into_one_buffer_before_its_chained_function_and_sink():
    """Numaflow's MonoVertex serves HTTP in its pods; Tidal's receivers need a buffer behind them."""
    from tidal.spec import chains

    spec = parse_pipeline({**MONO, "source": {"http": {}}, "kpa": {"target": 5}})
    assert [v.name for v in spec.vertices] == ["orders-http", "orders", "orders-sink"]
    http, function, sink = spec.vertices
    assert http.source is not None and http.source.http is not None and http.kpa is not None
    assert function.udf is not None and function.scale.max == 3 and sink.sink is not None
    assert [(e.from_, e.to, e.chain) for e in spec.edges] == [
        ("orders-http", "orders", None),
        ("orders", "orders-sink", True),
    ]
    assert [k for k, _ in chains.chain_errors(spec)] == []
    bare = {k: v for k, v in MONO.items() if k != "transformer"}
    alone = parse_pipeline({**bare, "source": {"http": {}}})
    assert [(v.name, v.kind) for v in alone.vertices] == [("orders-http", "source"), ("orders", "sink")]
    assert alone.vertex("orders").scale.max == 3


def test_numaflows_http_monovertex_e2e_manifests_convert_and_parse():
    """numaproj/numaflow test/monovertex-e2e/testdata: streaming-mono-vertex and map-bypass."""
    from pathlib import Path

    import yaml

    from tidal.spec import manifest

    e2e = Path(__file__).parents[2] / "data" / "numaflow" / "e2e"
    redis = {"numaflow-rs/redis-sink": "tidal.examples.numaflow:log_sink"}
    streaming = yaml.safe_load((e2e / "streaming-mono-vertex.yaml").read_text())
    spec = parse_pipeline(manifest.convert(streaming, redis).data)
    assert [v.name for v in spec.vertices] == ["streaming-mono-vertex-http", "streaming-mono-vertex"]
    bypass = yaml.safe_load((e2e / "map-bypass.yaml").read_text())
    spec = parse_pipeline(manifest.convert(bypass, redis).data)
    sink = spec.vertex("map-bypass-sink").sink
    assert sink is not None and sink.bypass is not None and sink.fallback is not None
    assert spec.vertex("map-bypass").udf is not None

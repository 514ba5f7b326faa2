"""Numaflow's example manifests (copied from numaproj/numaflow's examples/) as Tidal specs: what
converts and runs, what is refused with the field and the fix, and what is listed as not honoured."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tidal import errors
from tidal.cli.convert import convert_command
from tidal.spec import load_pipeline, manifest, parse_pipeline

EXAMPLES = Path(__file__).parents[2] / "data" / "numaflow"

RUNS = {
    "1-simple-pipeline": ["in", "cat", "out"],
    "1-simple-pipeline-keys": ["in", "cat", "out"],
    "2-even-odd-pipeline": ["in", "even-or-odd", "even-sink", "odd-sink", "number-sink"],
    "3-pipeline-filter": ["in", "filter", "out"],
    "5-auto-scaling": ["in", "cat", "out"],
    "9-multi-partition-pipeline": ["in", "cat", "out"],
    "10-cycle-to-prev": ["in", "cat", "retry", "out"],
    "10-cycle-to-self": ["in", "retry", "out"],
    "11-join-on-map": ["http-in", "kafka-in", "cat", "out"],
    "11-join-on-sink": ["in", "even-or-odd", "even-cat", "odd-cat", "out"],
    "20-simple-mono-vertex-builtin": ["simple-mono-vertex-builtin"],
    "6-reduce-fixed-window": ["in", "atoi", "compute-sum", "sink"],
    "7-reduce-sliding-window": ["in", "map", "reduce-sliding", "sink"],
    "8-reduce-complex-pipeline": [
        "in",
        "atoi",
        "keyed-fixed-sum",
        "non-keyed-fixed-sum",
        "non-keyed-sliding-sum",
        "sink",
    ],
}
REFUSED = {
    "4-udsink-pipeline": "spec.vertices[2].sink.udsink.container.image",  # my-sink:latest: no handler
    "12-simple-session-pipeline": "spec.vertices[2].udf.container.image",  # a session reducer: no handler
    "21-simple-mono-vertex": "spec.udf",  # a transformer and a udf: Tidal's MonoVertex runs one
}


def _load(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())


@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_runnable_example_becomes_a_valid_spec_with_the_same_vertices(name):
    spec = load_pipeline(EXAMPLES / f"{name}.yaml")
    assert [v.name for v in spec.vertices] == RUNS[name]


def test_a_manifest_keeps_numaflows_rules_where_tidals_own_specs_default_to_tidal():
    """Its ``scale:`` blocks are Numaflow's; an HTTP source stays the KPA's, as in a Tidal spec."""
    joined = load_pipeline(EXAMPLES / "11-join-on-map.yaml")
    assert {n: joined.policy_of(n) for n in RUNS["11-join-on-map"]} == {
        "http-in": "kpa", "kafka-in": "numaflow", "cat": "numaflow", "out": "numaflow"
    }  # fmt: skip
    mono = load_pipeline(EXAMPLES / "20-simple-mono-vertex-builtin.yaml")
    assert mono.policy_of("simple-mono-vertex-builtin") == "numaflow"
    own = {k: v for k, v in manifest.convert(_load("1-simple-pipeline")).data.items() if k != "policy"}
    assert parse_pipeline(own).policy_of("cat") == "tidal"  # without the manifest's: Tidal's default


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_tidal_cannot_run_is_refused_naming_the_field(name):
    with pytest.raises(errors.SpecError) as err:
        manifest.convert(_load(name))
    assert err.value.path == REFUSED[name]


def test_even_odd_keeps_its_conditions_and_knows_the_handlers_tags():
    data = manifest.convert(_load("2-even-odd-pipeline")).data
    assert data["vertices"][1]["udf"] == {
        "pynumaflow": "tidal.examples.numaflow:even_odd",
        "tags": ["even-tag", "odd-tag"],
    }
    assert data["edges"][3]["conditions"] == {"tags": {"operator": "or", "values": ["odd-tag", "even-tag"]}}
    bad = _load("2-even-odd-pipeline")
    bad["spec"]["edges"][1]["conditions"]["tags"]["values"] = ["evn-tag"]
    with pytest.raises(errors.SpecError, match=r"'evn-tag' is not among the tags 'even-or-odd' emits"):
        parse_pipeline(manifest.convert(bad).data)


def test_generator_rate_limits_and_what_is_not_honoured():
    m = _load("9-multi-partition-pipeline")
    m["spec"]["limits"] = {"bufferUsageLimit": 85, "readBatchSize": 100, "readTimeout": "2s"}
    m["spec"]["vertices"][0]["source"]["generator"].update(rpu=30, duration="500ms")
    converted = manifest.convert(m)
    assert converted.data["vertices"][0]["source"]["generator"]["rate"] == 60.0
    assert converted.data["limits"] == {"bufferUsageLimit": 0.85, "readBatchSize": 100}
    ignored = "\n".join(converted.ignored)
    for field in ("spec.limits.readTimeout", "spec.vertices[1].partitions", "generator.keyCount"):
        assert field in ignored
    assert "quay.io/numaio/numaflow-go/map-cat:stable runs as the pynumaflow handler" in ignored
    assert "imagePullPolicy" not in ignored


def test_a_users_image_needs_a_handler_from_an_annotation_or_the_handlers_file():
    m = _load("1-simple-pipeline")
    m["spec"]["vertices"][1]["udf"]["container"]["image"] = "registry.example.com/team/enrich:1.2"
    with pytest.raises(errors.SpecError, match=r"tidal\.dev/handler") as err:
        manifest.convert(m)
    assert err.value.path == "spec.vertices[1].udf.container.image"
    by_file = manifest.convert(m, {"team/enrich": "tidal.examples.numaflow:flatmap"}).data
    assert by_file["vertices"][1]["udf"] == {"pynumaflow": "tidal.examples.numaflow:flatmap"}
    m["spec"]["vertices"][1]["metadata"] = {
        "annotations": {"tidal.dev/handler": "tidal.examples.numaflow:cat"}
    }
    assert manifest.convert(m).data["vertices"][1]["udf"] == {"pynumaflow": "tidal.examples.numaflow:cat"}


def test_a_source_transformer_becomes_a_vertex_the_source_chains_into():
    m = _load("1-simple-pipeline")
    m["spec"]["vertices"][0]["source"]["transformer"] = {
        "container": {"image": "quay.io/numaio/numaflow-go/map-cat:stable"}
    }
    spec = parse_pipeline(manifest.convert(m).data)
    assert spec.inputs("cat") == ["in-transformer"] and spec.inputs("in-transformer") == ["in"]


def test_other_kinds_and_apis_are_refused():
    with pytest.raises(errors.SpecError, match="'InterStepBufferService' is not a Numaflow kind Tidal runs"):
        manifest.convert({"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": "InterStepBufferService"})
    assert not manifest.is_manifest({"name": "tidal-spec"})


def test_tidal_convert_prints_a_spec_that_loads_and_lists_what_is_not_honoured(tmp_path, capsys):
    assert convert_command(str(EXAMPLES / "3-pipeline-filter.yaml")) == 0
    text = capsys.readouterr().out
    assert "# Not honoured: spec.vertices[0].source.http.auth.token" in text
    out = tmp_path / "tidal.yaml"
    out.write_text(text)
    spec = load_pipeline(out)
    assert spec.vertex("in").source.http.auth.token.env == "MY_SECRET_MY_KEY"
    assert convert_command(str(EXAMPLES / "12-simple-session-pipeline.yaml")) == 2


def test_a_udsink_container_runs_as_the_pynumaflow_sink_its_handler_names():
    data = manifest.convert(_load("4-udsink-pipeline"), {"my-sink": "tidal.examples.numaflow:log_sink"}).data
    assert data["vertices"][2]["sink"] == {"pynumaflow": "tidal.examples.numaflow:log_sink"}
    assert parse_pipeline(data).vertex("out").sink.kind == "pynumaflow"


def test_a_udsource_container_runs_as_the_pynumaflow_sourcer_mapped_to_it():
    m = _load("21-simple-mono-vertex")
    del m["spec"]["source"]["transformer"]
    data = manifest.convert(m).data  # numaflow-rs/simple-source: the SDK's simple source
    assert data["source"] == {"pynumaflow": "tidal.examples.numaflow:SimpleSource"}
    assert data["transformer"] == {"pynumaflow": "tidal.examples.numaflow:cat"}
    assert data["sink"] == {"log": {}, "fallback": {"pynumaflow": "tidal.examples.numaflow:fallback_sink"}}
    assert parse_pipeline(data).vertices[0].source.staged


def test_a_reduce_keeps_its_window_partitions_and_the_handler_of_its_image():
    spec = parse_pipeline(manifest.convert(_load("6-reduce-fixed-window")).data)
    sums = spec.vertex("compute-sum")
    assert sums.udf.reduce == "tidal.examples.numaflow:reduce_sum"
    assert sums.udf.group_by.window.fixed.length == 60.0 and sums.udf.group_by.keyed
    assert sums.partitions == 2
    sliding = parse_pipeline(manifest.convert(_load("7-reduce-sliding-window")).data).vertex("reduce-sliding")
    assert (sliding.udf.group_by.window.sliding.length, sliding.udf.group_by.window.sliding.slide) == (
        60.0,
        10.0,
    )


def test_builtin_cat_and_filter_convert_and_an_unknown_builtin_names_the_field():
    m = _load("1-simple-pipeline")
    m["spec"]["vertices"][1]["udf"] = {
        "builtin": {"name": "filter", "kwargs": {"expression": "int(json(payload).id) < 100"}}
    }
    spec = parse_pipeline(manifest.convert(m).data)
    assert spec.vertex("cat").udf.builtin.kwargs["expression"] == "int(json(payload).id) < 100"
    m["spec"]["vertices"][1]["udf"] = {"builtin": {"name": "eventTimeExtractor"}}
    with pytest.raises(errors.SpecError, match="not one of Numaflow's") as err:
        manifest.convert(m)
    assert err.value.path == "spec.vertices[1].udf.builtin.name"


def test_without_pynumaflow_a_handler_module_says_what_to_install(tmp_path, monkeypatch):
    (tmp_path / "my_handlers.py").write_text(
        "from pynumaflow.mapper import Messages\n\ndef cat(keys, datum):\n    ...\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [
        m for m in list(__import__("sys").modules) if m == "pynumaflow" or m.startswith("pynumaflow.")
    ]:
        monkeypatch.delitem(__import__("sys").modules, name)
    monkeypatch.setitem(__import__("sys").modules, "pynumaflow", None)  # as if it were not installed
    from tidal.spec import resolve

    with pytest.raises(
        errors.SpecError, match=r"needs Numaflow's Python SDK.*pip install 'tidal\[numaflow\]'"
    ):
        resolve("my_handlers:cat", "vertices[cat].udf.pynumaflow")


def test_a_jetstream_source_converts_with_its_secrets_from_the_environment_and_tls_is_refused():
    m = _load("1-simple-pipeline")
    m["spec"]["vertices"][0]["source"] = {
        "jetstream": {
            "url": "nats://nats.example:4222",
            "stream": "orders",
            "consumer": "reader",
            "deliver_policy": "new",
            "filter_subjects": ["orders.eu", "orders.us"],
            "auth": {"token": {"name": "nats-secret", "key": "token"}},
        }
    }
    converted = manifest.convert(m)
    source = parse_pipeline(converted.data).vertex("in").source
    assert source.kind == "jetstream" and source.staged
    js = source.jetstream
    assert (js.url, js.stream, js.consumer, js.deliver_policy) == (
        "nats://nats.example:4222",
        "orders",
        "reader",
        "new",
    )
    assert js.filter_subjects == ["orders.eu", "orders.us"] and js.token == "${NATS_SECRET_TOKEN}"
    assert any("source.jetstream.auth" in line and "NATS_SECRET_TOKEN" in line for line in converted.ignored)
    m["spec"]["vertices"][0]["source"]["jetstream"]["tls"] = {"insecureSkipVerify": True}
    with pytest.raises(errors.SpecError, match=r"source\.jetstream\.tls: TLS .* not supported"):
        manifest.convert(m)


def _e2e(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / "e2e" / f"{name}.yaml").read_text())


def test_numaflows_e2e_retry_strategy_converts_with_its_durations_in_seconds():
    """numaproj/numaflow test/e2e/testdata/simple-pipeline-with-retry-strategy.yaml."""
    sink = (
        parse_pipeline(manifest.convert(_e2e("simple-pipeline-with-retry-strategy")).data)
        .vertex("output")
        .sink
    )
    assert sink.pynumaflow == "tidal.examples.numaflow:failing_sink"
    backoff = sink.retry_strategy.backoff
    assert (backoff.interval_seconds, backoff.steps, backoff.factor, backoff.cap_seconds, backoff.jitter) == (
        1.0,
        2,
        2.0,
        3.0,
        0.0,
    )
    assert sink.retry_strategy.on_failure == "drop"


@pytest.mark.parametrize(
    ("name", "route"), [("simple-fallback", "fallback"), ("simple-on-success", "onSuccess")]
)
def test_numaflows_e2e_fallback_and_on_success_sinks_convert(name, route):
    """The redis sinks of Numaflow's e2e tests have no Python handler: a handlers file maps them."""
    redis = {f"output.{route}": "tidal.examples.numaflow:log_sink"}  # by vertex and route
    converted = manifest.convert(_e2e(name), redis)
    sink = converted.data["vertices"][2]["sink"]
    assert sink[route] == {"pynumaflow": "tidal.examples.numaflow:log_sink"}
    spec = parse_pipeline(converted.data).vertex("output").sink
    assert spec.routed and spec.pynumaflow.endswith(
        "fallback_sink" if route == "fallback" else "on_success_sink"
    )
    assert f"spec.vertices[2].sink.{route}.udsink.container.env" in "\n".join(converted.ignored)


def test_numaflows_e2e_rate_limits_convert_with_the_vertex_inheriting_the_pipelines_store():
    """numaproj/numaflow test/map-e2e/testdata/rate-limit-redis.yaml: the pipeline's limit and
    the source's own, which takes the Redis store from the pipeline's (Numaflow's mergeLimits)."""
    converted = manifest.convert(_e2e("rate-limit-redis"))
    spec = parse_pipeline(converted.data)
    pipeline, source = spec.rate_limit("map-udf"), spec.rate_limit("in")
    assert (pipeline.max, pipeline.min, pipeline.ramp_up_seconds, pipeline.store) == (100, 10, 10, "shared")
    assert (source.max, source.min, source.ramp_up_seconds, source.store) == (200, 50, 1, "shared")
    assert "spec.limits.rateLimit.store.redisStore" in "\n".join(converted.ignored)
    mono = parse_pipeline(manifest.convert(_e2e("mono-vertex-rate-limit-redis")).data)
    limit = mono.rate_limit(mono.vertices[0].name)
    assert (limit.max, limit.min, limit.store) == (100, 50, "shared")


def test_numaflows_e2e_drop_on_full_keeps_its_edges_on_full():
    spec = parse_pipeline(manifest.convert(_e2e("drop-on-full")).data)
    assert [e.on_full for e in spec.edges] == ["discardLatest"]
    assert spec.limits.buffer_max_length == 1 and spec.limits.buffer_usage_limit == 1.0


def test_a_vertexs_own_limits_go_over_the_pipelines_and_are_checked_where_they_are():
    data = {
        "name": "p",
        "limits": {"readBatchSize": 100, "bufferMaxLength": 1000},
        "vertices": [
            {"name": "in", "source": {"generator": {"rate": 1}}},
            {"name": "out", "sink": {"log": {}}, "limits": {"readBatchSize": 7, "bufferUsageLimit": 0.5}},
        ],
        "edges": [{"from": "in", "to": "out"}],
    }
    spec = parse_pipeline(data)
    mine, theirs = spec.limits_of("out"), spec.limits_of("in")
    assert (mine.read_batch_size, mine.buffer_max_length, mine.buffer_usage_limit) == (7, 1000, 0.5)
    assert theirs.read_batch_size == 100
    data["vertices"][1]["limits"]["bufferUsageLimit"] = 1.5
    with pytest.raises(errors.SpecError, match=r"vertices\[1\]\.limits\.bufferUsageLimit"):
        parse_pipeline(data)


def test_numaflows_vertex_limits_convert_with_the_usage_limit_as_a_fraction():
    m = _load("1-simple-pipeline")
    m["spec"]["vertices"][1]["limits"] = {"readBatchSize": 5, "bufferUsageLimit": 70, "readTimeout": "1s"}
    converted = manifest.convert(m)
    assert converted.data["vertices"][1]["limits"] == {"readBatchSize": 5, "bufferUsageLimit": 0.7}
    assert "spec.vertices[1].limits.readTimeout" in "\n".join(converted.ignored)


def test_numaflows_e2e_map_bypass_routes_by_tags_to_the_sinks_parts():
    """numaproj/numaflow test/monovertex-e2e/testdata/map-bypass.yaml (its redis sinks mapped)."""
    redis = {
        f"{name}.{route}": "tidal.examples.numaflow:log_sink"
        for name in ["map-bypass"]
        for route in ("fallback", "onSuccess")
    }
    redis["numaio/numaflow-rs/redis-sink"] = "tidal.examples.numaflow:log_sink"
    m = _e2e("map-bypass")
    m["spec"]["source"] = {"generator": {"rpu": 10, "duration": "1s"}}  # for its HTTP source
    spec = parse_pipeline(manifest.convert(m, redis).data)
    sink = spec.vertices[0].sink
    assert spec.vertices[0].udf.pynumaflow == "tidal.examples.numaflow:bypass_cat"
    assert sink.bypass.fallback.tags.values == ["fallback"] and sink.bypass.on_success.tags.values == [
        "onSuccess"
    ]


def test_numaflows_e2e_nats_source_converts_with_its_token_from_the_environment():
    """numaproj/numaflow test/builtin-source-e2e/testdata/nats-source-pipeline.yaml (its redis sink
    mapped): the queue group carries over, the token secret becomes an environment variable."""
    converted = manifest.convert(_e2e("nats-source-pipeline"), {"out": "tidal.examples.numaflow:log_sink"})
    spec = parse_pipeline(converted.data)
    source = spec.vertex("in").source
    assert source.kind == "nats" and source.staged
    nats = source.nats
    assert (nats.url, nats.subject, nats.queue) == ("nats", "test-subject", "my-queue")
    assert nats.token == "${NATS_SOURCE_FAKE_TOKEN_FAKE_TOKEN}" and nats.user is None
    assert spec.vertex("in").scale.min == 2
    assert any("source.nats.auth" in line and "NATS_SOURCE_FAKE_TOKEN" in line for line in converted.ignored)


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        (
            {"tls": {"insecureSkipVerify": True}},
            r"source\.nats\.tls: TLS .* not supported by Tidal's NATS source",
        ),
        (
            {"auth": {"nkey": {"name": "s", "key": "seed"}}},
            r"source\.nats\.auth\.nkey: NKey .* not supported",
        ),
    ],
)
def test_a_nats_sources_tls_and_nkey_are_refused_naming_the_field(extra, path):
    m = _e2e("nats-source-pipeline")
    m["spec"]["vertices"][0]["source"]["nats"].update(extra)
    with pytest.raises(errors.SpecError, match=path):
        manifest.convert(m, {"out": "tidal.examples.numaflow:log_sink"})


def test_a_nats_sources_basic_auth_becomes_user_and_password_from_the_environment():
    m = _e2e("nats-source-pipeline")
    basic = {"user": {"name": "nats-creds", "key": "user"}, "password": {"name": "nats-creds", "key": "pass"}}
    m["spec"]["vertices"][0]["source"]["nats"]["auth"] = {"basic": basic}
    nats = (
        parse_pipeline(manifest.convert(m, {"out": "tidal.examples.numaflow:log_sink"}).data)
        .vertex("in")
        .source.nats
    )
    assert (nats.user, nats.password, nats.token) == ("${NATS_CREDS_USER}", "${NATS_CREDS_PASS}", None)


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("transformer-extract-event-time-from-payload",
         {"name": "eventTimeExtractor", "kwargs": {"expression": "json(payload).item[1].time"}}),
        ("transformer-time-extraction-filter",
         {"name": "timeExtractionFilter",
          "kwargs": {"filterExpr": "int(json(payload).id) < 100", "eventTimeExpr": "json(payload).time"}}),
    ],
)  # fmt: skip
def test_numaflows_builtin_transformers_become_the_transformer_vertexs_builtin(name, builtin):
    """numaproj/numaflow test/transformer-e2e/testdata (before 1.6 removed the builtins)."""
    spec = parse_pipeline(manifest.convert(_e2e(name)).data)
    assert [v.name for v in spec.vertices] == ["in", "in-transformer", "out"]
    assert spec.vertex("in-transformer").udf.builtin.model_dump() == {**builtin, "args": []}
    assert [(e.from_, e.to) for e in spec.edges] == [("in", "in-transformer"), ("in-transformer", "out")]


def test_numaflows_source_filtering_transformer_converts_with_its_redis_sink_named():
    redis = {"quay.io/numaio/numaflow-go/redis-sink:stable": "tidal.examples.numaflow:on_success_sink"}
    spec = parse_pipeline(manifest.convert(_e2e("transformer-source-filtering"), redis).data)
    fn = spec.vertex("in-transformer").udf.function
    assert callable(fn)
    good = b'{"id": 80, "msg": "hello", "expect3": "succeed", "desc": "A good example"}'
    bad = b'{"id": 80, "msg": "hello", "expect2": "fail", "desc": "A bad example"}'
    assert (fn(good), fn(bad)) == (True, False)


def test_a_builtin_transformer_is_refused_where_numaflow_refuses_it_and_its_kwargs_carry_as_text():
    m = _load("1-simple-pipeline")
    source = m["spec"]["vertices"][0]["source"]
    source["transformer"] = {"builtin": {"name": "cat"}}  # a UDF's builtin, not a transformer's
    with pytest.raises(errors.SpecError, match="builtin source transformers") as err:
        manifest.convert(m)
    assert err.value.path == "spec.vertices[0].source.transformer.builtin.name"
    kwargs = yaml.safe_load("{expression: json(payload).d, format: 2006-01-02, color: red}")
    source["transformer"] = {"builtin": {"name": "eventTimeExtractor", "kwargs": kwargs}}
    converted = manifest.convert(m)
    udf = parse_pipeline(converted.data).vertex("in-transformer").udf
    assert udf.builtin.kwargs == {
        "expression": "json(payload).d",
        "format": "2006-01-02",
    }  # YAML's date as text
    assert any("kwargs.color" in line for line in converted.ignored)
    mono = {
        "apiVersion": "numaflow.numaproj.io/v1alpha1",
        "kind": "MonoVertex",
        "metadata": {"name": "m"},
        "spec": {
            "source": {"http": {}, "transformer": {"builtin": source["transformer"]["builtin"]}},
            "sink": {"log": {}},
        },
    }
    assert manifest.convert(mono).data["transformer"]["builtin"]["name"] == "eventTimeExtractor"


def test_numaflow_pythons_stream_sorter_pipeline_converts_to_an_accumulator_window(tmp_path, monkeypatch):
    """numaproj/numaflow-python's examples/accumulator/streamsorter/pipeline.yaml, unchanged, with
    its image mapped to its example.py's StreamSorter by a handlers file."""
    m = yaml.safe_load((EXAMPLES / "python" / "accumulator" / "streamsorter" / "pipeline.yaml").read_text())
    handlers = {"numaflow-python/streamsorter": "streamsorter_example:StreamSorter"}
    converted = manifest.convert(m, handlers)
    udf = converted.data["vertices"][2]["udf"]
    assert udf == {
        "reduce": "streamsorter_example:StreamSorter",
        "groupBy": {"window": {"accumulator": {"timeout": "10s"}}, "keyed": True},
    }
    ignored = "\n".join(converted.ignored)
    assert "spec.vertices[2].udf.groupBy.storage" in ignored
    assert "spec.vertices[2].udf.container.env" in ignored
    sorter = EXAMPLES / "python" / "accumulator" / "streamsorter" / "example.py"
    (tmp_path / "streamsorter_example.py").write_text(sorter.read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    window = parse_pipeline(converted.data).vertex("py-accum").udf.group_by.window
    assert (window.kind, window.accumulator.timeout) == ("accumulator", 10.0)


def test_tidal_convert_maps_the_stream_sorters_image_with_a_handlers_file(tmp_path, monkeypatch, capsys):
    folder = EXAMPLES / "python" / "accumulator" / "streamsorter"
    (tmp_path / "streamsorter_example.py").write_text((folder / "example.py").read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    handlers = tmp_path / "handlers.yaml"
    image = "quay.io/numaio/numaflow-python/streamsorter:stable"
    handlers.write_text(f"{image}: streamsorter_example:StreamSorter\n")
    assert convert_command(str(folder / "pipeline.yaml"), str(handlers)) == 0
    out = tmp_path / "tidal.yaml"
    out.write_text(capsys.readouterr().out)
    accum = load_pipeline(out).vertex("py-accum")
    assert accum.udf.reduce == "streamsorter_example:StreamSorter"
    assert accum.udf.group_by.window.accumulator.timeout == 10.0 and accum.udf.group_by.keyed
    assert convert_command(str(folder / "pipeline.yaml")) == 2  # the image alone names no handler

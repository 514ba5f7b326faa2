"""``source.http`` in the spec: the KPA by default, Knative's keys, and errors that name the field."""

from __future__ import annotations

import pytest

from tidal import errors
from tidal.scaling.kpa import KpaMetric
from tidal.spec import parse_pipeline
from tidal.spec.kpa import kpa_spec


def pipeline(source: dict, **vertex: object) -> dict:
    return {
        "name": "hooks",
        "vertices": [
            {"name": "in", "source": source, **vertex},
            {"name": "out", "sink": {"log": {}}},
        ],
        "edges": [{"from": "in", "to": "out"}],
    }


def problem(data: dict) -> str:
    with pytest.raises(errors.SpecError) as info:
        parse_pipeline(data)
    return "\n".join(str(e) for e in (info.value, *info.value.others))


def test_an_http_source_is_scaled_by_the_kpa_on_concurrency_by_default():
    spec = parse_pipeline(pipeline({"http": {"containerConcurrency": 4}}))
    assert spec.policy_of("in") == "kpa"
    kpa = kpa_spec(spec.vertex("in"))
    assert kpa.metric == KpaMetric.CONCURRENCY and kpa.container_concurrency == 4
    assert kpa.total_value == 4 and kpa.target_burst_capacity == 211  # Knative's defaults


def test_knative_config_keys_without_an_annotation_are_read_too():
    spec = parse_pipeline(
        pipeline({"http": {}}, kpa={"metric": "rps", "target": 50, "scale-to-zero-grace-period": "5s"})
    )
    kpa = kpa_spec(spec.vertex("in"))
    assert kpa.metric == KpaMetric.RPS and kpa.target == 50 and kpa.scale_to_zero_grace_period == 5


@pytest.mark.parametrize(
    ("source", "vertex", "words"),
    [
        ({"http": {}}, {"policy": "numaflow"}, "vertices[0].policy: numaflow cannot scale an HTTP source"),
        ({"http": {}}, {"kpa": {"metric": "cpu"}}, "vertices[0].kpa.metric: 'cpu' is not a metric"),
        ({"http": {}}, {"kpa": {"window": 1}}, "vertices[0].kpa.window"),
        ({"http": {"containerConcurrency": -1}}, {}, "containerConcurrency"),
        ({"http": {"port": 70000}}, {}, "port"),
        ({"http": {}, "generator": {}}, {}, "exactly one of generator, user, kafka, http"),
        ({"http": {"receiverHosts": ["10.0.0.3"]}}, {}, "receiverHosts[0]: '10.0.0.3' is not HOST:PORT"),
        ({"http": {"receiverHosts": ["a:1", "b:0"]}}, {}, "receiverHosts[1]: 'b:0' is not HOST:PORT"),
        ({"http": {"receiverHosts": ["a:1", "a:1"]}}, {}, "names an agent twice"),
    ],
)
def test_bad_http_settings_name_the_field(source, vertex, words):
    assert words in problem(pipeline(source, **vertex))


def test_receiver_hosts_are_agents_addresses_and_none_means_beside_the_driver():
    assert parse_pipeline(pipeline({"http": {}})).vertex("in").source.http.receiver_hosts == []
    spec = parse_pipeline(pipeline({"http": {"receiverHosts": ["10.0.0.3:7171", "worker-2:7171"]}}))
    assert spec.vertex("in").source.http.receiver_hosts == ["10.0.0.3:7171", "worker-2:7171"]

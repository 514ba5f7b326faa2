"""Every `tidal bench NAME` names a function that exists, and the policies settings are the
commands the CLI offers (a renamed function would otherwise fail only when someone runs it)."""

from __future__ import annotations

import importlib

from tidal.bench.policies import SETTINGS
from tidal.cli.main import BENCHMARKS


def test_every_benchmark_names_a_function_that_exists() -> None:
    for name, target in BENCHMARKS.items():
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(f"tidal.bench.{module}"), function or "main")), name


def test_each_policies_setting_is_a_command() -> None:
    assert {n for n in BENCHMARKS if n.startswith("policies")} == set(SETTINGS)
    assert all(name == s.name for name, s in SETTINGS.items())
    assert SETTINGS["policies-cluster"].cluster and SETTINGS["policies-cluster"].master is None


def test_every_peers_trace_makes_a_valid_pipeline_for_every_tidal_job(tmp_path):
    """The peers bench's Tidal jobs: each trace's load in the demo's pipeline, under each policy
    and static provisioning, is a pipeline `tidal run` takes, chained as the demo is."""
    from tidal.bench import peers
    from tidal.spec import load_pipeline
    from tidal.spec.chains import plan_chains

    for trace in peers.TRACES:
        for job in (j for j in peers.JOBS if j != "spark-da"):
            spec = load_pipeline(peers.tidal_spec(tmp_path, job, trace))
            assert plan_chains(spec).signature == "enrich>archive", (trace, job)
            if job == "static":
                assert spec.cluster.min_executors == spec.cluster.max_executors == 4
            elif job == "flink-tuned":  # Flink's autoscaler with Flink's keys set
                assert spec.policy == "flink"
                options = spec.controller.flink_options()
                assert (options.utilization_target, options.metrics_window) == (0.5, 30.0)
            else:
                assert spec.policy == job


def test_the_cluster_benchmarks_latency_pipeline_keeps_one_query_per_vertex() -> None:
    """Each vertex a query of its own, so a replica more is an executor more (chained, the two
    made one query of one replica and the benchmark waited for a second executor for ever)."""
    import yaml

    from tidal.bench.cluster import LATENCY_PIPELINE
    from tidal.spec import parse_pipeline
    from tidal.spec.chains import plan_chains

    plan = plan_chains(parse_pipeline(yaml.safe_load(LATENCY_PIPELINE)))
    assert plan.signature == "" and {plan.head_of("gen"), plan.head_of("out")} == {"gen", "out"}


def test_every_reduce_elastic_job_is_a_valid_pipeline_with_its_partitions(tmp_path) -> None:
    """The three jobs of ``tidal bench reduce-elastic``: only the elastic one lets the policy move."""
    import yaml

    from tidal.bench import reduce_elastic
    from tidal.spec import parse_pipeline

    for job, settings in reduce_elastic.JOBS.items():
        spec = parse_pipeline(yaml.safe_load(reduce_elastic.spec_text(job)))
        count = spec.vertex("count")
        assert count.partitions == settings["partitions"], job
        assert (count.state_partitions is not None) == (job == "elastic"), job
    assert reduce_elastic.partition_seconds(1, [(10.0, 2), (30.0, 1)], 0.0, 40.0) == 10 + 40 + 10


def test_the_reduce_pause_and_step_shuffle_pipelines_are_valid(tmp_path) -> None:
    """``tidal bench reduce-pause``: a reduce vertex of 2 partitions on day-long windows, keyed by
    message; ``tidal bench step-shuffle``: a DataFrame step at 4 replicas."""
    import yaml

    from tidal.bench import reduce_pause, step_shuffle
    from tidal.spec import parse_pipeline

    text = reduce_pause.PIPELINE.format(rate=reduce_pause.RATE, trickle=reduce_pause.TRICKLE, burst=10.0)
    spec = parse_pipeline(yaml.safe_load(text))
    assert spec.vertex("count").partitions == 2
    steps = step_shuffle._spec(tmp_path / "orders.jsonl")
    assert steps.vertex("lookup").replicas == step_shuffle.REPLICAS

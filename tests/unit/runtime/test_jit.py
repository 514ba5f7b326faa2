"""The executors' JIT: C1 only where every step is Python, the full JIT where work runs in the JVM."""

from __future__ import annotations

import pytest

from tidal import errors
from tidal.spark.cluster.jit import QUICK_OPTIONS, choose
from tidal.spark.cluster.session import cluster_conf
from tidal.spec import parse_pipeline


def pipeline(step: dict, sink: dict, cluster: dict | None = None) -> dict:
    return {
        "name": "p",
        "cluster": cluster or {},
        "vertices": [
            {"name": "in", "source": {"generator": {}}},
            {"name": "step", "udf": step},
            {"name": "out", "sink": sink},
        ],
        "edges": [
            {"from": "in", "to": "step", "records": {"schema": "n INT"}},
            {"from": "step", "to": "out"},
        ],
    }


PYTHON = {"map": "tidal.examples.udfs:upper"}
SQL = {"sql": "SELECT _id FROM input"}


def test_python_steps_get_c1_only_and_say_why():
    jit = choose(parse_pipeline(pipeline(PYTHON, {"log": {}})))
    assert (jit.mode, jit.options) == ("quick", QUICK_OPTIONS)
    assert jit.reason.startswith("auto: every step runs in Python")


@pytest.mark.parametrize(
    ("step", "sink", "named"),
    [
        (SQL, {"log": {}}, "step (sql step)"),
        (PYTHON, {"parquet": {"path": "t"}}, "out (parquet sink)"),
        (PYTHON, {"delta": {"path": "t"}}, "out (delta sink)"),
    ],
)
def test_work_in_the_jvm_keeps_the_full_jit_naming_the_vertex(step, sink, named):
    jit = choose(parse_pipeline(pipeline(step, sink)))
    assert (jit.mode, jit.options) == ("full", "")
    assert named in jit.reason


def test_the_spec_can_force_either():
    assert choose(parse_pipeline(pipeline(SQL, {"log": {}}, {"executorJit": "quick"}))).mode == "quick"
    assert choose(parse_pipeline(pipeline(PYTHON, {"log": {}}, {"executorJit": "full"}))).options == ""


def test_an_unknown_jit_is_refused_naming_the_field_and_the_choices():
    with pytest.raises(errors.SpecError) as caught:
        parse_pipeline(pipeline(PYTHON, {"log": {}}, {"executorJit": "fast"}))
    text = str(caught.value)
    assert "executorJit" in text and "'quick'" in text and "'full'" in text


def test_the_session_passes_the_jit_to_executors_unless_the_spec_sets_their_options():
    spec = parse_pipeline(pipeline(PYTHON, {"log": {}}))
    conf = cluster_conf(spec.cluster, "spark://10.0.0.5:7077", QUICK_OPTIONS)  # remote: no archive
    assert conf["spark.executor.extraJavaOptions"] == QUICK_OPTIONS
    own = parse_pipeline(
        pipeline(PYTHON, {"log": {}}, {"conf": {"spark.executor.extraJavaOptions": "-Xss4m"}})
    )
    conf = cluster_conf(own.cluster, "spark://10.0.0.5:7077", QUICK_OPTIONS)
    assert conf["spark.executor.extraJavaOptions"] == "-Xss4m"

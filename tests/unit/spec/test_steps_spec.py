"""SQL and DataFrame steps in the spec: what is checked when the file loads (Spark checks the
SQL and the schema when the run starts: tests/integration/test_steps.py)."""

from __future__ import annotations

import pytest

from tidal import errors
from tidal.spec import Pipeline, parse_pipeline


def pipeline(udf: dict, records: dict | None = {"schema": "n INT"}, top: dict | None = None) -> dict:  # noqa: B006
    edge: dict = {"from": "in", "to": "step"}
    if records is not None:
        edge["records"] = records
    return {
        "name": "p",
        **(top or {}),
        "vertices": [
            {"name": "in", "source": {"generator": {}}},
            {"name": "step", "udf": udf},
            {"name": "out", "sink": {"log": {}}},
        ],
        "edges": [edge, {"from": "step", "to": "out"}],
    }


def problem(data: dict) -> str:
    with pytest.raises(errors.SpecError) as info:
        parse_pipeline(data)
    return "\n".join(str(e) for e in (info.value, *info.value.others))


def two_arguments(df, other):  # a DataFrame step takes one
    return df


def test_a_sql_step_with_a_schema_on_its_edge_or_the_pipeline_loads():
    spec = parse_pipeline(pipeline({"sql": "SELECT _id FROM input"}))
    assert spec.vertex("step").udf.engine == "sql"
    assert spec.input_records("step")[0].schema_ == "n INT"
    spec = parse_pipeline(pipeline({"sql": "SELECT _id FROM input"}, None, {"records": {"schema": "m INT"}}))
    assert spec.input_records("step")[0].schema_ == "m INT"  # the pipeline's default


def test_a_step_without_a_schema_is_refused_with_where_to_declare_it():
    text = problem(pipeline({"sql": "SELECT _id FROM input"}, None))
    assert "vertices[1].udf.sql" in text and "records: {format: json, schema:" in text


def test_only_json_records():
    assert "records.format" in problem(
        pipeline({"sql": "SELECT _id FROM input"}, {"format": "avro", "schema": "n INT"})
    )


def test_a_dataframe_function_must_take_one_dataframe():
    text = problem(pipeline({"dataframe": two_arguments}))
    assert "vertices[1].udf.dataframe" in text and "def step(df: DataFrame) -> DataFrame" in text
    assert "cannot import" in problem(pipeline({"dataframe": "no_such_module:f"}))


@pytest.mark.parametrize(
    ("udf", "words"),
    [
        ({"sql": "SELECT _id FROM input", "map": "tidal.examples.udfs:upper"}, "exactly one of"),
        ({"sql": ""}, "udf.sql"),
        (
            {"map": "tidal.examples.udfs:upper", "reference": {"t": {"path": "x"}}},
            "reference tables are for sql",
        ),
        ({"sql": "SELECT _id FROM input", "reference": {"input": {"path": "x"}}}, "other than input"),
        ({"sql": "SELECT _id FROM input", "reference": {"t": {"path": "x", "format": "xls"}}}, "format"),
    ],
)
def test_bad_step_fields_name_the_field(udf, words):
    assert words in problem(pipeline(udf))


def test_the_builder_makes_sql_and_dataframe_steps():
    spec = (
        Pipeline("b")
        .source("in", generator={"rate": 1})
        .sql("step", "SELECT _id FROM input", reference={"t": {"path": "t.parquet"}})
        .dataframe("frame", "tidal.examples.udfs:large_orders")
        .sink("out", "log")
        .edge("in", "step", schema="n INT")
        .edge("step", "frame", schema="id STRING, n INT")
        .edge("frame", "out")
        .build()
    )
    assert spec.vertex("step").udf.reference["t"].path == "t.parquet"
    assert spec.vertex("frame").udf.engine == "dataframe"

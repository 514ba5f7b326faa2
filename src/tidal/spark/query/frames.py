"""Spark-native steps: a vertex whose work is SQL (``udf: {sql: …}``) or a DataFrame function
(``udf: {dataframe: module:function}``).

The step's query reads the messages of each input range as rows (``id, payload``:
:class:`~tidal.spark.batch.readers.RowsReader`), parses each payload as JSON with the input's declared
schema, and hands the records that parsed to the user's transformation as the view ``input``
(SQL) or as the DataFrame argument. The result goes back to the buffers as JSON objects under
``<vertex>:<input id>`` (:class:`~tidal.spark.query.frame_writer.FrameWriter`), through the same
replica-sized ranges, keyed appends and commit as every other vertex: exactly once, and scaled
by the same controller (a replica is a read partition).

**Bad records** never become silent nulls: a payload that is not JSON, not an object, has a
field of the wrong type, or lacks a field declared ``NOT NULL`` goes to the vertex's dead letter
with the reason (without one, the batch fails naming the message, as for a Python step). Spark's
``from_json`` alone would have made nulls of them.

**Stateless only.** A step is scaled by changing how each micro-batch is split, which is free
for stateless work. Aggregations, de-duplication, sorts, limits, windows, watermarks and joins
of the input with itself keep state whose partitioning Spark fixes once a checkpoint exists;
they are refused when the run starts (``docs/steps.md``). Joins with static tables are
stateless: ``reference`` tables are read when the run starts, cached, and refreshed every
``refreshSeconds``.

Everything here is checked before any query starts: the schema with Spark's DDL parser, the SQL
with Spark's analyzer (it may name ``input``, the step's reference tables and views registered
in the session), the function's result (a streaming DataFrame over ``df``, keeping ``_id``).

**``_id``** is the message id, a column of ``input`` beside the schema's fields (named apart
from them: records often have an ``id`` of their own). A step keeps it in its result, which
is what makes its output exactly once.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tidal import errors
from tidal.spark.batch.config import QueryConfig
from tidal.spec.records import ReferenceSpec
from tidal.spec.validate import resolve

__all__ = [
    "CORRUPT",
    "MESSAGE_ID",
    "STATEFUL",
    "ReferenceRefresher",
    "plan_step",
    "plan_steps",
    "read_reference",
    "stateful_node",
]

MESSAGE_ID = "_id"  # the message id's column in a step's input and result
CORRUPT = "_tidal_corrupt"  # the column from_json fills with a record it could not parse
# Logical plan nodes that keep state across micro-batches (or need all of a batch at once).
STATEFUL = {
    "Aggregate": "an aggregation",
    "Distinct": "DISTINCT",
    "Deduplicate": "dropDuplicates",
    "DeduplicateWithinWatermark": "dropDuplicatesWithinWatermark",
    "Window": "a window function",
    "Sort": "ORDER BY",
    "GlobalLimit": "LIMIT",
    "LocalLimit": "LIMIT",
    "Offset": "OFFSET",
    "Tail": "tail",
    "EventTimeWatermark": "a watermark",
    "FlatMapGroupsWithState": "(flat)mapGroupsWithState",
    "TransformWithState": "transformWithState",
    "Intersect": "INTERSECT",
    "Except": "EXCEPT",
}
_VIEWS = threading.Lock()  # temp views are per session: one step registers its own at a time


def _at(config: QueryConfig) -> str:
    assert config.udf is not None
    return f"vertices[{config.vertex}].udf.{config.udf.engine}"


def declared_schema(config: QueryConfig) -> Any:
    """The input's schema as a ``StructType``, parsed by Spark (so it is exactly what Spark accepts)."""
    from pyspark.sql.types import DataType, StructType

    at = f"vertices[{config.vertex}]: the records.schema of its input edge"
    text = config.schema or ""
    try:
        parsed = DataType.fromDDL(text)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise errors.SpecError(
            at,
            f"{text!r} is not a Spark DDL schema ({first})",
            'write it as "name TYPE, ...", e.g. "id STRING, n INT"',
        ) from None
    if not isinstance(parsed, StructType) or not parsed.fields:
        raise errors.SpecError(
            at, f"{text!r} is not a list of fields", 'write it as "name TYPE, ...", e.g. "n INT"'
        )
    for reserved in (CORRUPT, MESSAGE_ID):
        if reserved in parsed.fieldNames():
            raise errors.SpecError(
                at, f"the column {reserved} is Tidal's (the message id)", f"leave {reserved} out of it"
            )
    return parsed


def reference_path(ref: ReferenceSpec) -> str:
    """Where a reference table is: a relative path is from the working directory."""
    return str(Path(ref.path).expanduser().resolve())


def read_reference(spark: Any, name: str, ref: ReferenceSpec) -> Any:
    """The reference table ``name``, read and cached."""
    path = reference_path(ref)
    reader = spark.read.format(ref.format)
    if ref.format == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    try:
        frame = reader.load(path)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0]
        raise errors.SpecError(
            f"udf.reference.{name}.path",
            f"cannot read {ref.format} at {path} ({first})",
            "point it at a table",
        ) from None
    return frame.cache()


class ReferenceRefresher:
    """Reads a reference table again every ``refreshSeconds``: Spark drops the cached rows and
    the file listing of its path, and the next micro-batch of every step that joins it reads
    the table as it is then (a batch never sees half a refresh: the cache is replaced whole)."""

    def __init__(self, spark: Any, frame: Any, spec: ReferenceSpec) -> None:
        self.spark = spark
        self.frame = frame
        self.path = reference_path(spec)
        self.every = spec.refresh_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"tidal-reference-{self.path}", daemon=True)

    def start(self) -> ReferenceRefresher:
        self._thread.start()
        return self

    def refresh(self) -> None:
        self.spark.catalog.refreshByPath(self.path)
        self.frame.count()  # fill the cache now, not in the next micro-batch

    def _loop(self) -> None:
        import logging

        while not self._stop.wait(self.every):
            try:
                self.refresh()
            except Exception as exc:  # a table being rewritten: keep the last one, try again later
                logging.getLogger("tidal.frames").warning("reference %s not refreshed: %s", self.path, exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def stateful_node(plan: Any) -> str | None:
    """What in a JVM logical plan keeps state across micro-batches (None: nothing does)."""
    name = str(plan.nodeName())
    if name in STATEFUL:
        return STATEFUL[name]
    children = plan.children()
    kids = [children.apply(i) for i in range(children.size())]
    if name == "Join" and len(kids) == 2 and all(k.isStreaming() for k in kids):
        return "a join of the input with itself"
    for kid in kids:
        found = stateful_node(kid)
        if found is not None:
            return found
    return None


def _parse(raw: Any, schema: Any) -> tuple[Any, Any]:
    """``(records, dead)``: the rows that parsed as ``_id`` + the schema's columns, and the rest
    as ``id, payload, error`` with the reason."""
    from pyspark.sql import functions as F  # noqa: N812 - PySpark's convention
    from pyspark.sql.types import StringType, StructField, StructType

    text = F.col("payload").cast("string")
    with_corrupt = StructType([*(StructField(f.name, f.dataType, True) for f in schema.fields),
                               StructField(CORRUPT, StringType(), True)])  # fmt: skip
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    parsed = raw.select("id", "payload", F.from_json(text, with_corrupt, options).alias("r"))
    is_object = F.ltrim(F.col("payload").cast("string")).startswith("{")
    reasons = [
        (F.expr("try_parse_json(cast(payload AS STRING))").isNull(), "not valid JSON"),
        (~is_object | F.col("r").isNull(), "not a JSON object"),
        (F.col(f"r.{CORRUPT}").isNotNull(), f"a field does not match the schema {schema.simpleString()}"),
        *(
            (F.col("r").getField(f.name).isNull(), f"field {f.name} is missing or null (declared NOT NULL)")
            for f in schema.fields
            if not f.nullable
        ),
    ]
    good = is_object & F.col("r").isNotNull() & F.col(f"r.{CORRUPT}").isNull()
    for f in schema.fields:
        if not f.nullable:
            good = good & F.col("r").getField(f.name).isNotNull()
    error = F.when(reasons[0][0], F.lit(reasons[0][1]))
    for condition, reason in reasons[1:]:
        error = error.when(condition, F.lit(reason))
    records = parsed.where(good).select(
        F.col("id").alias(MESSAGE_ID), *(F.col("r").getField(f.name).alias(f.name) for f in schema.fields)
    )
    dead = parsed.where(~good).select("id", "payload", error.otherwise(F.lit("not a record")).alias("error"))
    return records, dead


def _transform(spark: Any, config: QueryConfig, records: Any, references: dict[str, Any]) -> Any:
    """The user's SQL or function over ``records``, with the reference tables registered."""
    assert config.udf is not None
    at = _at(config)
    with _VIEWS:
        records.createOrReplaceTempView("input")
        for name, frame in references.items():
            frame.createOrReplaceTempView(name)
        try:
            if config.udf.sql is not None:
                result = _run_sql(spark, config.udf.sql, at)
            else:
                fn = resolve(config.udf.dataframe or "", at, kind="function")
                try:
                    result = fn(records)
                except Exception as exc:
                    raise errors.SpecError(
                        at,
                        f"raised {type(exc).__name__}: {exc}",
                        "make the function build the DataFrame without error",
                    ) from None
        finally:
            # The session catalog's drop, not spark.catalog.dropTempView: that one also uncaches
            # the view's rows, and the reference tables' cache is what the step joins.
            catalog = spark._jsparkSession.sessionState().catalog()
            for name in ("input", *references):
                catalog.dropTempView(name)
    from pyspark.sql import DataFrame

    if not isinstance(result, DataFrame) or not result.isStreaming:
        raise errors.SpecError(
            at,
            f"returned {type(result).__name__}, not a DataFrame made from its argument",
            "return a transformation of df (df.where(...).select(...))",
        )
    return result


def _run_sql(spark: Any, sql: str, at: str) -> Any:
    from pyspark.errors import AnalysisException, ParseException

    try:
        return spark.sql(sql)
    except ParseException as exc:
        first = str(exc).strip().splitlines()[0]
        raise errors.SpecError(
            at, f"does not parse: {first}", "fix the SQL (it reads the view input)"
        ) from None
    except AnalysisException as exc:
        first = str(exc).strip().splitlines()[0]
        raise errors.SpecError(
            at,
            first,
            "select from input (the step's records), a reference table of the step, "
            "or a view registered in the session",
        ) from None


def plan_step(spark: Any, config: QueryConfig, references: dict[str, Any]) -> Any:
    """The step's streaming DataFrame, ``id, payload, error``: its transformed records as JSON
    (error null) and the records that did not parse (with the reason). Raises
    :class:`tidal.errors.SpecError` for anything Spark would refuse later, or worse, accept."""
    from pyspark.sql import functions as F  # noqa: N812

    schema = declared_schema(config)
    raw = spark.readStream.format("tidal_vertex").options(**config.options()).load()
    records, dead = _parse(raw, schema)
    result = _transform(spark, config, records, references)
    at = _at(config)
    if MESSAGE_ID not in result.columns:
        raise errors.SpecError(
            at, f"its result has no {MESSAGE_ID} column (the message id makes the output exactly once)",
            f"keep {MESSAGE_ID} in the result: SELECT {MESSAGE_ID}, ... FROM input",
        )  # fmt: skip
    state = stateful_node(result._jdf.queryExecution().analyzed())
    if state is not None:
        raise errors.SpecError(
            at,
            f"is stateful ({state}): a step's state is fixed to its partitions once a checkpoint exists, "
            "so it could not scale",
            "keep the step stateless (filters, projections, joins with reference tables); see docs/steps.md",
        )
    columns = [c for c in result.columns if c != MESSAGE_ID]
    out = result.select(
        F.concat(F.lit(f"{config.vertex}:"), F.col(MESSAGE_ID).cast("string")).alias("id"),
        F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns]), {"ignoreNullFields": "false"})
        .cast("binary")
        .alias("payload"),
        F.lit(None).cast("string").alias("error"),
    )
    return out.unionByName(dead)


def plan_steps(
    spark: Any, configs: dict[str, QueryConfig]
) -> tuple[dict[str, Any], list[ReferenceRefresher]]:
    """The streaming DataFrames of the SQL and DataFrame steps among ``configs``, checked by
    Spark, with their reference tables read; and a started refresher per table that has an
    interval (stop them with the run)."""
    planned: dict[str, Any] = {}
    refreshers: list[ReferenceRefresher] = []
    try:
        for name, config in configs.items():
            if config.reduce:
                from tidal.spark.query.reduce import plan_reduce

                planned[name] = plan_reduce(spark, config)
                continue
            if not config.rows or config.udf is None:
                continue
            refs = config.udf.reference
            tables = {ref: read_reference(spark, ref, spec) for ref, spec in refs.items()}
            planned[name] = plan_step(spark, config, tables)
            for ref, spec in refs.items():
                if spec.refresh_seconds > 0:
                    refreshers.append(ReferenceRefresher(spark, tables[ref], spec).start())
    except BaseException:
        for refresher in refreshers:
            refresher.stop()
        raise
    return planned, refreshers

"""Records with a schema, and the Spark-native steps that read them (``udf: {sql: …}``,
``udf: {dataframe: …}``).

A Python step sees payload bytes. A SQL or DataFrame step sees columns: its input edge (or the
pipeline, for every edge that names none) declares ``records: {format: json, schema: DDL}``,
and the runtime parses each payload with that schema in Spark (:mod:`tidal.spark.query.frames`).
The schema is Spark DDL (``"order_id STRING NOT NULL, amount DOUBLE"``); it is checked with
Spark's own parser when the run starts, before any query does.
"""

from __future__ import annotations

from pydantic import Field

from tidal.spec.base import Model

__all__ = ["RecordsSpec", "ReferenceSpec"]

IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"


class RecordsSpec(Model):
    """``records:`` — how the messages on an edge are encoded: JSON objects with a schema."""

    format: str = Field("json", pattern="^json$")
    schema_: str = Field(alias="schema", min_length=1)


class ReferenceSpec(Model):
    """``udf.reference.<name>:`` — a static table a SQL or DataFrame step may join, registered
    under ``<name>``: read once when the run starts, and read again every ``refreshSeconds``
    (0: never) so a batch after the refresh sees the new rows."""

    path: str = Field(min_length=1)
    format: str = Field("parquet", pattern="^(parquet|json|csv)$")
    refresh_seconds: float = Field(0.0, ge=0, le=86_400)

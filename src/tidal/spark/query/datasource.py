"""The Python streaming data source every vertex query reads from and writes to: ``tidal_vertex``.

``spark.readStream.format("tidal_vertex").option("config", config.encode())`` reads what the
vertex consumes: its input buffer (a UDF or a sink, :mod:`tidal.spark.batch.readers`) or its
source, through the source's connector (:mod:`tidal.spark.sources.connector`).
``writeStream.format("tidal_vertex")`` reads each task's messages, applies the vertex's UDF and
writes to its output buffers, its sink and its dead letter (:mod:`tidal.spark.query.writer`).

**Spark carries the tasks; the buffers carry the messages.** A partition is a range of input
sequences, and the reader hands Spark one row per partition (:data:`SCHEMA`: ``first, last,
part``). The writer task reads that range straight from the buffer as Arrow. Passing the
messages themselves through Spark would send every payload from the reader's Python process
into the JVM and back out to the writer's, which the probe measured at about 1 µs per message
per hop on 2 cores: more than everything else a hop does (``docs/benchmarks.md``). A
consequence: Spark's own ``numInputRows`` counts tasks, not messages; Tidal's batch records
(``tidal status``, the controller) count messages.

The modules by Spark role: :mod:`~tidal.spark.batch.admission` (how much a batch takes and how it is
split: the replica count), :mod:`~tidal.spark.batch.readers`, :mod:`~tidal.spark.query.writer`,
:mod:`~tidal.spark.batch.stores` (opening the buffers and the control record) and
:mod:`~tidal.spark.batch.config` (what a query needs to know).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, DataSourceStreamWriter

from tidal import errors
from tidal.spark.batch.config import OPTION, ROWS_OPTION, QueryConfig
from tidal.spark.batch.heap import freeze_imports

__all__ = ["ROWS_SCHEMA", "SCHEMA", "VertexDataSource", "register"]

# kpart: a Kafka partition, else -1; t0: the generator's clock start (else NaN), which a task on
# another host cannot read from the control record on the driver's disk.
SCHEMA = "first long, last long, part int, kpart int, t0 double"
# A SQL or DataFrame step reads the messages themselves (Spark transforms them) and writes what
# its query made of them: good rows with ``error`` null, records that did not parse with the reason.
ROWS_SCHEMA = "id string, payload binary"


def _config(options: dict[str, str], where: str) -> QueryConfig:
    text = options.get(OPTION)
    if text is None:
        raise errors.SpecError(
            f"{where}.option({OPTION!r})",
            "is required",
            "start vertex queries with tidal.spark.query.vertex.start_vertex",
        )
    return QueryConfig.decode(text)


class VertexDataSource(DataSource):
    """``format("tidal_vertex")``; its one option, ``config``, is an encoded :class:`QueryConfig`."""

    @classmethod
    def name(cls) -> str:
        return "tidal_vertex"

    def schema(self) -> str:
        rows = self._options().get(ROWS_OPTION)
        if rows == "2":
            from tidal.spark.query.reduce import REDUCE_ROWS_SCHEMA

            return REDUCE_ROWS_SCHEMA
        return ROWS_SCHEMA if rows == "1" else SCHEMA

    def _options(self) -> dict[str, str]:
        # PySpark hands options over case-insensitively (lower-cased keys): normalise once here.
        return {str(k).lower(): str(v) for k, v in self.options.items()}

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: N802 - PySpark's name
        from tidal.spark.batch import readers

        config = _config(self._options(), "readStream")
        if config.source is not None:  # the source's own reader (tidal.spark.sources.connector)
            from tidal.spark.sources.connector import source_connector

            return source_connector(config.source).reader(config)
        if config.rows:
            return readers.RowsReader(config)
        return readers.BufferReader(config)

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        from tidal.spark.query.writer import VertexWriter

        config = _config(self._options(), "writeStream")
        if config.reduce:
            from tidal.spark.query.accumulator import AccumulatorWriter
            from tidal.spark.query.reduce import ReduceWriter

            group = config.udf.group_by if config.udf is not None else None
            if group is not None and group.window.accumulator is not None:
                return AccumulatorWriter(config)
            return ReduceWriter(config)
        if config.rows:
            from tidal.spark.query.frame_writer import FrameWriter

            writer: VertexWriter = FrameWriter(config)
        else:
            writer = VertexWriter(config)
        freeze_imports()  # PySpark creates the writer anew in a worker of its own every micro-batch
        return writer


def register(spark: Any) -> None:
    """Register ``tidal_vertex`` in ``spark``, as ``spark.dataSource.register`` does, but with
    its environment in a ``ConcurrentHashMap``.

    Why: every reader and writer of a Python data source shares the registered function's
    environment map, and Spark's Python runners ``put`` into it as they start a worker
    (``SPARK_LOCAL_DIRS``, ``SPARK_REUSE_WORKER``, …). In local mode the driver serializes a
    stage's tasks from the same JVM objects, so a runner adding a key while another query's
    stage is serialized corrupts that stage: its task fails with ``java.io.OptionalDataException``
    (seen about one resume in five with several queries starting at once). A concurrent map
    serializes consistently while it changes.
    """
    from pyspark.core.rdd import _prepare_for_python_RDD

    context = spark.sparkContext
    jvm = context._jvm
    pickled, broadcasts, env, includes = _prepare_for_python_RDD(context, VertexDataSource)
    shared_env = jvm.java.util.concurrent.ConcurrentHashMap()
    for key, value in env.items():
        shared_env.put(key, value)
    function = jvm.SimplePythonFunction(
        bytearray(pickled), shared_env, includes, context.pythonExec, context.pythonVer, broadcasts,
        context._javaAccumulator,
    )  # fmt: skip
    source = getattr(jvm, "org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource")
    spark._jsparkSession.dataSource().registerPython(VertexDataSource.name(), source(function))

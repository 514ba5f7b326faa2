"""The Spark runtime: the only package that imports pyspark, in six rooms (docs/architecture.md).

- :mod:`~tidal.spark.run` — a pipeline run: its queries, its controller, its operations (pause,
  resume, scale, edits), its status; the top floor.
- :mod:`~tidal.spark.query` — a vertex's Spark query: the ``tidal_vertex`` data source, the writer
  that runs the UDF chain and fans out, SQL/DataFrame steps, reduce windows.
- :mod:`~tidal.spark.cluster` — the Spark session, a standalone cluster, the executors Tidal asks
  for, and what makes their JVMs start fast.
- :mod:`~tidal.spark.sources` and :mod:`~tidal.spark.sinks` — one module per kind, behind one
  seam each (:mod:`~tidal.spark.sources.connector`, :mod:`~tidal.spark.sinks.connector`); neither
  imports the other.
- :mod:`~tidal.spark.batch` — what every micro-batch uses: the query's config, the admission of a
  batch by the replica count, the stores, the readers' base, the checkpoint's durability.

Each room imports only from the rooms below it (``pyproject.toml``'s import-linter contract).
"""

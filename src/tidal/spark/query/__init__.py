"""A vertex's Spark query: the ``tidal_vertex`` data source and what its tasks run.

The data source (:mod:`.datasource`) builds a reader through the source seam or over the input
buffer, and a writer (:mod:`.writer`) that runs the vertex's UDF chain (:mod:`.udf`) and writes its
output buffers and its sink through the sink seam; SQL and DataFrame steps (:mod:`.frames`,
:mod:`.frame_writer`), reduce windows (:mod:`.reduce`), the plan of a run's queries
(:mod:`.queries`, :mod:`.vertex`) and the workers' daemon (:mod:`.daemon`). Imports:
:mod:`tidal.spark.sources` and :mod:`tidal.spark.sinks` (their connectors only), :mod:`tidal.spark.batch`.
"""

"""A pipeline run, the runtime's top room: its queries, its controller, its operations, its status.

:class:`~tidal.spark.run.pipeline.PipelineRun` opens the buffers, seeds the replicas, starts one
query per chain and the HTTP sources' request paths, and runs the controller;
:mod:`.operations` is what the control API does to it (pause, resume, scale, live edits);
:mod:`.status` what ``tidal status`` shows. Imports every room below it.
"""

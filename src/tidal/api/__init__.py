"""The control API of a running pipeline: the scale subresource, its lifecycle, live edits.

:mod:`tidal.api.scale` (Kubernetes' ``Scale`` and how a write is parsed), :mod:`tidal.api.auth`
(the run's bearer token), :mod:`tidal.api.server` (the HTTP routes). The run answers through
the :class:`~tidal.api.server.Operable` protocol, which :mod:`tidal.spark.run.operations`
implements; docs/api.md is the user's guide, with curl examples.
"""

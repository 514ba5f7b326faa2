"""The source kinds, one module each, behind one seam (:mod:`.connector`).

``generator``, ``user``, ``pynumaflow``, ``kafka``, ``jetstream``, ``nats`` (staged through
:mod:`.staged` where the kind acknowledges upstream) and ``http`` (served by the request path).
Imports: :mod:`tidal.spark.batch`, ``tidal.isb``, ``tidal.spec``, ``tidal.request`` and
``tidal.controller`` (the HTTP source's request path); never :mod:`tidal.spark.sinks` nor the
rooms above.
"""

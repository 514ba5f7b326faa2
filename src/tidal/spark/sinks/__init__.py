"""The sink kinds, one module each, behind one seam (:mod:`.connector`).

``blackhole``, ``log``, ``file``, ``user`` (:mod:`.files`), ``parquet`` and ``delta``
(:mod:`.tables`), ``kafka``, ``pynumaflow``. Imports: :mod:`tidal.spark.batch`, ``tidal.isb``
(durable writes), ``tidal.spec``; never :mod:`tidal.spark.sources` nor the rooms above.
"""

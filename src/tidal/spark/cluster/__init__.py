"""Spark's session, a standalone cluster, and the executors Tidal asks for.

The session (:mod:`.session`), a master and workers on 127.0.0.1 (:mod:`.standalone`), the
executor allocator that turns the replica counts into executors (:mod:`.executors`, through
:mod:`.spark_executors`), and what makes a new executor's JVM and Python start in seconds
(:mod:`.cds`, :mod:`.pyzip`, :mod:`.jit`). Imports: ``tidal.scaling`` (the executor rules),
``tidal.spec``; nothing of the other rooms.
"""

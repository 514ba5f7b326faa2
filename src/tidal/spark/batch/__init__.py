"""A micro-batch's plumbing, shared by every query, source and sink: the lowest room of the runtime.

What a query is told (:mod:`.config`), how a batch is admitted and split by the replica count
(:mod:`.admission`, :mod:`.pieces`), the buffers and the control record it opens (:mod:`.stores`),
the readers every source builds on (:mod:`.readers`), the checkpoint's and the run directory's
durability (:mod:`.checkpoint_sync`, :mod:`.rundir`), a task's heap and usage, and what the
connectors' clients share (:mod:`.clients`). Imports: ``tidal.isb``, ``tidal.spec``,
``tidal.errors``; nothing of the other rooms.
"""

"""Example pipelines to copy (``*.yaml`` here: ``wave``, the demo; ``fanout``; ``lines``) and the
small functions and classes they use as UDFs and user code (``udfs``, ``sources``).

They ship with the package, so ``tidal demo`` works wherever Tidal is installed; ``README.md``
beside them says what each one shows.
"""

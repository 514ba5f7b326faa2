"""Tidal: autoscaling streaming data pipelines on Apache Spark (PySpark).

The public surface is small: this module, :mod:`tidal.scaling` (the pure decision core),
:mod:`tidal.errors`, :mod:`tidal.contracts` (what a user's source and sink implement) and
:mod:`tidal.testing` (helpers for users' tests). Everything else is runtime machinery.
"""

from tidal.contracts import Message
from tidal.errors import (
    BufferError,
    BufferFull,
    BufferNotFound,
    BufferUnavailable,
    MessageTooLarge,
    PipelineError,
    SourceError,
    SpecError,
    TidalError,
    UdfError,
)
from tidal.scaling import Decision, KpaSpec, NumaflowScale, Rule, VertexKind

__version__ = "0.1.0"

__all__ = [
    "BufferError",
    "BufferFull",
    "BufferNotFound",
    "BufferUnavailable",
    "Decision",
    "KpaSpec",
    "Message",
    "MessageTooLarge",
    "NumaflowScale",
    "PipelineError",
    "Rule",
    "SourceError",
    "SpecError",
    "TidalError",
    "UdfError",
    "VertexKind",
    "__version__",
]

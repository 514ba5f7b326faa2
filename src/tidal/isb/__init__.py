"""Inter-step buffers: one protocol (:mod:`tidal.isb.base`), two real backends.

``sqlite`` (default, one host, zero setup) and ``jetstream`` (NATS JetStream, many hosts).
"""

from tidal.isb.base import (
    DEFAULT_MAX_LENGTH,
    DEFAULT_USAGE_LIMIT,
    AppendResult,
    Buffer,
    BufferLimits,
    BufferStats,
    BufferStore,
    Message,
)

__all__ = [
    "DEFAULT_MAX_LENGTH",
    "DEFAULT_USAGE_LIMIT",
    "AppendResult",
    "Buffer",
    "BufferLimits",
    "BufferStats",
    "BufferStore",
    "Message",
]

"""Numaflow's pipeline limits, validated once: ``bufferMaxLength``, ``bufferUsageLimit``, ``readBatchSize``.

The one home of these defaults and of the *usable length* (``maxLength × usageLimit``): the
buffers refuse appends past it, back pressure compares pending with it, the buffer model of the
Numaflow policy sizes replicas against it, and the simulator models it. The spec layer embeds
this value, the buffers take it as their limits.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidal import errors

__all__ = [
    "DEFAULT_MAX_LENGTH",
    "DEFAULT_READ_BATCH_SIZE",
    "DEFAULT_USAGE_LIMIT",
    "BufferLimits",
    "usable_length",
]

DEFAULT_MAX_LENGTH = 30000
DEFAULT_USAGE_LIMIT = 0.8
DEFAULT_READ_BATCH_SIZE = 500


def usable_length(max_length: int, usage_limit: float) -> int:
    """``max_length × usage_limit``, whole messages: past this a buffer is full for its writers."""
    return int(max_length * usage_limit)


@dataclass(frozen=True, slots=True)
class BufferLimits:
    """``bufferMaxLength`` and ``bufferUsageLimit`` (Numaflow's names and defaults), validated."""

    max_length: int = DEFAULT_MAX_LENGTH
    usage_limit: float = DEFAULT_USAGE_LIMIT

    def __post_init__(self) -> None:
        if isinstance(self.max_length, bool) or not isinstance(self.max_length, int) or self.max_length < 1:
            raise errors.SpecError(
                "limits.bufferMaxLength", f"{self.max_length!r} is not a whole number ≥ 1", "use e.g. 30000"
            )
        if not 0 < self.usage_limit <= 1:
            raise errors.SpecError(
                "limits.bufferUsageLimit", f"{self.usage_limit} is outside (0, 1]", "use a fraction, e.g. 0.8"
            )

    @property
    def usable_length(self) -> int:
        """``max_length × usage_limit``: past this a buffer is "full" for its writers."""
        return usable_length(self.max_length, self.usage_limit)

"""``limits.rateLimit``: the most messages a second a vertex reads, ramping up from ``min``.

Numaflow's ``rateLimit`` (``pkg/apis/numaflow/v1alpha1/rate_limiter.go``, run by
``rust/numaflow-throttling``), set on the pipeline's ``limits`` (every vertex but a reduce and an
HTTP source) or a vertex's ``limits`` (which wins). A second's budget starts at ``min`` and grows
by ``(max − min) / rampUpSeconds`` a second up to ``max``; ``mode`` decides when it grows
(:mod:`tidal.scaling.throttle`). Where Tidal differs on purpose:

- **Messages a second for every vertex.** Numaflow counts a source's ``read()`` calls (``max``
  divided by ``readBatchSize``, rounded up), so a source may read up to ``readBatchSize − 1`` more
  a second than ``max``; Tidal counts its messages, as for the other vertices.
- **``store``** names how replicas share it, without Redis: ``shared`` (the default, Numaflow's
  ``redisStore``): ``max`` is the vertex's total, and the driver, which admits every replica's
  reads, holds the one budget; ``perReplica`` (Numaflow's ``inMemoryStore``, and its default
  with no store): each replica may read ``max``. ``tidal convert`` maps one to the other.
- **A vertex's ``rateLimit`` replaces the pipeline's whole** (Numaflow fills the fields the
  vertex's leaves out from the pipeline's).
- **Times are seconds** (``rampUpSeconds``, ``coolDownSeconds``); ``resumedRampUp`` and ``ttl``
  (a Redis store's) are not read: a restarted run ramps up from ``min`` again.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from tidal.scaling.throttle import RateLimit, RateLimitMode
from tidal.spec.base import Model

__all__ = ["RateLimitMode", "RateLimitSpec", "RateLimitStore", "VertexLimits"]


class RateLimitStore(StrEnum):
    SHARED = "shared"
    PER_REPLICA = "perReplica"


class RateLimitSpec(Model):
    max: float = Field(gt=0, le=1e9)
    min: float = Field(1.0, ge=0, le=1e9)
    ramp_up_seconds: float = Field(1.0, gt=0, le=86_400)
    mode: RateLimitMode = RateLimitMode.RELAXED
    threshold_percentage: int = Field(50, ge=0, le=100)  # onlyIfUsed, goBackN
    cool_down_seconds: float = Field(5.0, ge=0, le=86_400)  # goBackN
    ramp_down_percentage: int = Field(50, ge=0, le=100)  # goBackN
    store: RateLimitStore = RateLimitStore.SHARED

    @model_validator(mode="after")
    def _min_within_max(self) -> RateLimitSpec:
        if self.min > self.max:
            raise ValueError(f"min ({self.min:g}) exceeds max ({self.max:g}): lower min or raise max")
        return self

    @property
    def limit(self) -> RateLimit:
        """The limit the throttle and the autoscaler's guard work with."""
        return RateLimit(
            self.max,
            self.min,
            self.ramp_up_seconds,
            self.mode,
            self.threshold_percentage,
            self.cool_down_seconds,
            self.ramp_down_percentage,
        )


class VertexLimits(Model):
    """A vertex's own ``limits``, each over the pipeline's (Numaflow's vertex limits):
    ``rateLimit``, ``readBatchSize`` (what one replica reads at a time), and its input buffer's
    ``bufferMaxLength`` and ``bufferUsageLimit`` (a buffer is its reader's, named after it)."""

    rate_limit: RateLimitSpec | None = None
    read_batch_size: int | None = Field(None, ge=1)
    buffer_max_length: int | None = Field(None, ge=1, le=2**31 - 1)
    buffer_usage_limit: float | None = None

    def over(self) -> dict[str, object]:
        """The pipeline-limit fields this vertex sets (by their Python names)."""
        fields = ("read_batch_size", "buffer_max_length", "buffer_usage_limit")
        return {f: getattr(self, f) for f in fields if getattr(self, f) is not None}

"""``sink.retryStrategy``: how a sink retries the messages a write refused, and what then.

Numaflow's ``retryStrategy`` (``pkg/apis/numaflow/v1alpha1/retry_strategy.go``, run by
``numaflow-core``'s sink writer): only the refused messages are written again, the n-th retry
``intervalSeconds × factor^(n-1)`` later (times a random factor in ``[1-jitter, 1+jitter]``,
capped at ``capSeconds``); after ``steps`` retries, ``onFailure`` decides: ``fallback`` writes
them to the sink's ``fallback``, ``drop`` counts and drops them, ``retry`` fails the micro-batch.

Where Tidal differs on purpose:

- **Times are seconds** (``intervalSeconds``, ``capSeconds``), as everywhere in Tidal's spec;
  ``tidal convert`` turns Numaflow's durations (``interval: 1s``) into them.
- **``onFailure: retry`` honours ``steps``**: after them the micro-batch fails and replays from
  its input buffer (Tidal's restart), where Numaflow ignores ``steps`` and retries 65,535 times
  before it shuts the sink down, which restarts the pod: the same outcome, sooner.
- **An unknown ``onFailure`` is refused**, where Numaflow's runtime reads it as ``retry``.

The checks and their messages are Numaflow's validator's (``hasValidBackOff``).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from tidal.spec.base import Model

__all__ = ["DEFAULT_STEPS", "BackoffSpec", "OnFailure", "RetryStrategySpec", "backoff_delay"]

DEFAULT_STEPS = 65_535  # Numaflow's: its u32 default as the u16 its runtime counts in


class OnFailure(StrEnum):
    RETRY = "retry"
    FALLBACK = "fallback"
    DROP = "drop"


class BackoffSpec(Model):
    """``retryStrategy.backoff``: Numaflow's defaults (1 ms, factor 1, no cap, no jitter)."""

    interval_seconds: float = Field(0.001, ge=0, le=3600)
    steps: int = Field(DEFAULT_STEPS, le=DEFAULT_STEPS)
    factor: float = Field(1.0, le=100)
    cap_seconds: float | None = Field(None, le=86_400)
    jitter: float = 0.0

    @model_validator(mode="after")
    def _numaflow_rules(self) -> BackoffSpec:
        if self.steps <= 0:
            raise ValueError("steps in backoff strategy cannot be 0: give 1 or more retries")
        if self.factor < 1:
            raise ValueError("factor in backoff strategy cannot be less than 1")
        if self.cap_seconds is not None and self.cap_seconds < self.interval_seconds:
            raise ValueError("cap in backoff strategy cannot be less than interval: raise capSeconds")
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter in backoff strategy should be between 0 and 1 (1 excluded)")
        return self


class RetryStrategySpec(Model):
    """``sink.retryStrategy``: ``backoff`` and ``onFailure`` (``retry``, ``fallback``, ``drop``)."""

    backoff: BackoffSpec = BackoffSpec()
    on_failure: OnFailure = OnFailure.RETRY


def backoff_delay(backoff: BackoffSpec, retry: int, draw: float = 0.5) -> float:
    """Seconds to wait before the ``retry``-th retry (1-based): ``interval × factor^(retry-1)``,
    times the jitter's multiplier (``draw`` uniform in [0, 1) picks it in ``[1-jitter, 1+jitter]``),
    capped. Pure: the caller draws the random number."""
    delay = backoff.interval_seconds * backoff.factor ** (retry - 1)
    delay *= 1 - backoff.jitter + 2 * backoff.jitter * draw
    return delay if backoff.cap_seconds is None else min(delay, backoff.cap_seconds)

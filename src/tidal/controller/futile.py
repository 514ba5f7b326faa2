"""A scale-up that cannot help: held by a policy that sizes on its own estimates (``tidal``).

Numaflow's rules (:func:`tidal.scaling.decide`) hold a scale-up while the vertex's rate limit
holds its reads back or its rate is at the limit (rule ``rate-limited``), and while its sink is
failing (rule ``sink-failing``, Tidal's: :mod:`tidal.scaling.sink_health`). More replicas would
not read more, nor make a refusing system accept more (kedacore/keda #7092). ``policy: tidal``
sizes on the backlog such a vertex builds, so without the same guards a map limited to 20/s went
from its min of 2 to its max of 6 (``tests/integration/test_rate_limit.py``, the day `tidal`
became the default). :class:`FutileScaleUp` keeps the sink's health a policy object must
remember between ticks and asks :func:`tidal.scaling.futile.futile_scale_up`, the guards'
one home, for a :class:`~tidal.controller.policy.PolicyInput`.

Pure: the policy hands it the view and the time in it.
"""

from __future__ import annotations

from tidal.controller.policy import PolicyInput
from tidal.scaling import Rule
from tidal.scaling.futile import futile_scale_up
from tidal.scaling.sink_health import SinkHealth
from tidal.scaling.throttle import THROTTLED_RECENTLY

__all__ = ["FutileScaleUp"]


class FutileScaleUp:
    """Why more replicas would not help a vertex now, if they would not."""

    def __init__(self, lookback_seconds: float) -> None:
        self.lookback = lookback_seconds  # over which a sink's retried share is judged
        self.sink = SinkHealth()

    def record(self, view: PolicyInput) -> None:
        """Every tick: the sink's retried writes are a share over the lookback."""
        self.sink.record(view.now, view.processed, view.sink_retried)

    def why(self, view: PolicyInput, wanted: int) -> tuple[Rule, str] | None:
        """The rule and reason that hold a scale-up to ``wanted``; None if more replicas may help."""
        throttled = view.throttled_at is not None and view.now - view.throttled_at <= THROTTLED_RECENTLY
        return futile_scale_up(
            wanted,
            throttled=throttled,
            rate=view.rate,
            max_rate=view.rate_limit,
            failing_share=self.sink.retried_share(view.now, self.lookback),
            lookback_seconds=self.lookback,
        )

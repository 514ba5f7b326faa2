"""A scale-up that cannot help: the guards that hold it, as one pure function.

More replicas read no more while a rate limit is what bounds a vertex, and make a refusing sink
accept no more (kedacore/keda #7092). Numaflow's rules (:func:`tidal.scaling.numaflow.decide`,
step 12) hold a scale-up while the limit held a read back in the last ``THROTTLED_RECENTLY``
seconds or the rate is at the limit (rule ``rate-limited``); Tidal adds a sink that retried
≥ ``FAILING_SHARE`` of its writes over the lookback (rule ``sink-failing``,
:mod:`.sink_health`). ``policy: tidal`` applies the same guards with the same thresholds
(:class:`tidal.controller.futile.FutileScaleUp`): both call :func:`futile_scale_up`, so the two
policies hold for the same reasons, in the same words.

The caller asks only when the wanted count is above ``max(current, min)``: below ``min`` a vertex
still goes to ``min`` (the fix to numaproj/numaflow #3411), and a wake from zero is never held.
"""

from __future__ import annotations

import math

from tidal.scaling.decision import Rule
from tidal.scaling.sink_health import FAILING_SHARE

__all__ = ["futile_scale_up"]


def futile_scale_up(
    wanted: int,
    *,
    throttled: bool,
    rate: float | None,
    max_rate: float | None,
    failing_share: float | None,
    lookback_seconds: float,
) -> tuple[Rule, str] | None:
    """The rule and reason that hold a scale-up to ``wanted``; None if more replicas may help.

    ``throttled``: the rate limit held a read back within ``THROTTLED_RECENTLY``; ``max_rate``:
    the limit in messages a second (a source's ``rateLimit.max × readBatchSize``);
    ``failing_share``: the sink's retried writes over ``lookback_seconds``. Checked in
    Numaflow's order; the reason is built only when a guard holds.
    """
    if throttled:
        why = f"reads held back by the rate limit: more replicas would not read more (wanted {wanted})"
        return Rule.RATE_LIMITED, why
    if max_rate is not None and rate is not None and math.ceil(rate) >= max_rate:
        why = f"rate {rate:.0f}/s at the rate limit {max_rate:.0f}/s: no scale-up (wanted {wanted})"
        return Rule.RATE_LIMITED, why
    if failing_share is not None and failing_share >= FAILING_SHARE:
        why = (
            f"sink failing: {failing_share:.0%} of writes retried over the last {lookback_seconds:.0f} s; "
            f"more replicas would not help (wanted {wanted})"
        )
        return Rule.SINK_FAILING, why
    return None

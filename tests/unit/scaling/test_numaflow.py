"""Numaflow's vertex policy: every rule in upstream order (numaflow.md §1.3–1.6), the seeds' examples."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tidal.errors import SpecError
from tidal.scaling import (
    BufferInfo,
    NumaflowScale,
    PartitionMetrics,
    Pressure,
    PressureCheck,
    Rule,
    VertexKind,
    VertexObservation,
    decide,
    desired_replicas,
    wake_on_path,
)

from .conftest import NOW, source, udf

FAST = NumaflowScale(target_processing_seconds=3)


def parts(*pr: tuple[float | None, float | None]) -> tuple[PartitionMetrics, ...]:
    return tuple(PartitionMetrics(f"p{i}", rate=r, pending=p) for i, (r, p) in enumerate(pr))


# -- the seeds' worked examples --------------------------------------------------------------


def test_seed_example_source_time_model():
    d = decide(FAST, source(), NOW)
    assert (d.desired, d.rule, d.recommended) == (4, Rule.SCALE_UP, 4)
    assert d.reason == "avg pending 60000 at 10000/s over 2 replicas, target 3 s → 4"
    assert d.inputs["model"] == "time"


def test_seed_example_steps_up_by_replicas_per_scale_up():
    # current 3, desired 8, replicasPerScaleUp 2 → 5
    obs = source(replicas=3, ready_replicas=3, partitions=parts((1000.0, 8000.0)))
    scale = NumaflowScale(target_processing_seconds=3)
    assert desired_replicas(scale, obs).desired == 8
    d = decide(scale, obs, NOW)
    assert d.desired == 5
    assert "step +2 of 5" in d.reason


def test_seed_example_steps_down_by_replicas_per_scale_down():
    # current 9, desired 4 → 7
    obs = source(replicas=9, ready_replicas=9, partitions=parts((9000.0, 12000.0)))
    d = decide(FAST, obs, NOW)
    assert d.recommended == 4
    assert (d.desired, d.rule) == (7, Rule.SCALE_DOWN)


# -- the order of the checks -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scale", "obs", "rule", "desired"),
    [
        pytest.param(NumaflowScale(disabled=True), source(), Rule.DISABLED, 2, id="disabled"),
        pytest.param(FAST, source(running=False), Rule.NOT_RUNNING, 2, id="not-running"),
        pytest.param(FAST, source(last_scaled_at=NOW - 30), Rule.COOLDOWN, 2, id="global-cooldown"),
        pytest.param(FAST, source(desired_replicas=3), Rule.CONVERGING, 2, id="converging"),
        pytest.param(NumaflowScale(min=2, max=2), source(), Rule.FIXED, 2, id="min-equals-max"),
        pytest.param(NumaflowScale(min=3, max=3), source(), Rule.INTO_BOUNDS, 3, id="fixed-count-enforced"),
        pytest.param(FAST, udf(buffers=()), Rule.BUFFER_UNAVAILABLE, 2, id="no-buffer-info"),
        pytest.param(FAST, source(ready_replicas=0), Rule.NOT_READY, 2, id="none-ready"),
        pytest.param(
            FAST, source(partitions=parts((None, 5.0))), Rule.METRICS_UNAVAILABLE, 2, id="rate-missing"
        ),
        pytest.param(
            FAST, source(partitions=parts((-1.0, 5.0))), Rule.METRICS_UNAVAILABLE, 2, id="rate-negative"
        ),
        pytest.param(
            FAST, source(partitions=parts((5.0, -1.0))), Rule.METRICS_UNAVAILABLE, 2, id="pending-negative"
        ),
        pytest.param(
            FAST, source(partitions=parts((5.0, None))), Rule.METRICS_UNAVAILABLE, 2, id="pending-missing"
        ),
        pytest.param(FAST, source(partitions=()), Rule.METRICS_UNAVAILABLE, 2, id="no-partitions"),
        pytest.param(
            FAST,
            source(partitions=parts((5.0, 5.0), (None, 1.0))),
            Rule.METRICS_UNAVAILABLE,
            2,
            id="one-of-two-missing",
        ),
    ],
)
def test_skips_and_holds(scale, obs, rule, desired):
    d = decide(scale, obs, NOW)
    assert (d.rule, d.desired) == (rule, desired)
    assert d.reason


def test_global_cooldown_uses_the_shorter_cooldown():
    scale = NumaflowScale(
        target_processing_seconds=3, scale_up_cooldown_seconds=10, scale_down_cooldown_seconds=90
    )
    assert decide(scale, source(last_scaled_at=NOW - 9), NOW).rule == Rule.COOLDOWN
    assert decide(scale, source(last_scaled_at=NOW - 10), NOW).rule == Rule.SCALE_UP


def test_disabled_comes_before_everything():
    d = decide(NumaflowScale(disabled=True), source(running=False, last_scaled_at=NOW), NOW)
    assert d.rule == Rule.DISABLED


def test_fixed_check_comes_before_zero_replica_logic():
    d = decide(NumaflowScale(min=0, max=0), udf(replicas=0, ready_replicas=0), NOW)
    assert d.rule == Rule.FIXED


# -- zero replicas -----------------------------------------------------------------------------


def test_udf_at_zero_wakes_on_pending_without_zero_sleep():
    obs = udf(replicas=0, ready_replicas=0, last_scaled_at=NOW - 91, buffer_pending=1)
    d = decide(NumaflowScale(), obs, NOW)
    assert (d.rule, d.desired) == (Rule.WAKE_ON_PENDING, 1)


def test_udf_at_zero_with_empty_buffer_waits():
    d = decide(NumaflowScale(), udf(replicas=0, ready_replicas=0, buffer_pending=0), NOW)
    assert (d.rule, d.desired) == (Rule.ZERO_WAIT, 0)


def test_udf_wake_is_gated_only_by_global_cooldown():
    obs = udf(replicas=0, ready_replicas=0, last_scaled_at=NOW - 30, buffer_pending=5)
    assert decide(NumaflowScale(), obs, NOW).rule == Rule.COOLDOWN


def test_source_at_zero_peeks_after_zero_replica_sleep():
    scale = NumaflowScale()
    asleep = source(replicas=0, ready_replicas=0, last_scaled_at=NOW - 119)
    assert decide(scale, asleep, NOW).rule == Rule.ZERO_WAIT
    awake = decide(scale, replace(asleep, last_scaled_at=NOW - 120), NOW)
    assert (awake.rule, awake.desired) == (Rule.PEEK, 1)


def test_peek_is_not_gated_by_scale_up_cooldown():
    scale = NumaflowScale(
        scale_up_cooldown_seconds=500, scale_down_cooldown_seconds=100, zero_replica_sleep_seconds=120
    )
    d = decide(scale, source(replicas=0, ready_replicas=0, last_scaled_at=NOW - 130), NOW)
    assert d.rule == Rule.PEEK


def test_zero_replicas_below_min_goes_to_min():
    # Deliberate difference: upstream ignores min here (#2220).
    d = decide(NumaflowScale(min=2), udf(replicas=0, ready_replicas=0, buffer_pending=0), NOW)
    assert (d.rule, d.desired) == (Rule.INTO_BOUNDS, 2)


# -- the formulas ------------------------------------------------------------------------------


def test_scale_to_zero_only_when_total_pending_and_rate_are_zero():
    obs = source(replicas=2, partitions=parts((0.0, 0.0)))
    d = decide(NumaflowScale(), obs, NOW)
    assert (d.rule, d.desired, d.recommended) == (Rule.SCALE_TO_ZERO, 0, 0)


def test_scale_to_zero_is_step_limited():
    d = decide(NumaflowScale(), source(replicas=5, ready_replicas=5, partitions=parts((0.0, 0.0))), NOW)
    assert (d.rule, d.desired) == (Rule.SCALE_DOWN, 3)


def test_zero_is_clamped_to_min():
    d = decide(NumaflowScale(min=1), source(replicas=2, partitions=parts((0.0, 0.0))), NOW)
    assert (d.desired, d.recommended) == (1, 1)


def test_pending_zero_rate_positive_gives_one():
    d = decide(NumaflowScale(), source(replicas=3, ready_replicas=3, partitions=parts((500.0, 0.0))), NOW)
    assert (d.recommended, d.desired) == (1, 1)


def test_stalled_partition_holds_ready_replicas():
    # Deliberate difference: upstream would scale a stuck vertex down to 1.
    obs = source(replicas=4, ready_replicas=4, partitions=parts((0.0, 5000.0)))
    d = decide(NumaflowScale(), obs, NOW)
    assert (d.rule, d.desired) == (Rule.STEADY, 4)
    assert "no progress" in d.reason


@pytest.mark.parametrize(
    ("pending", "rate", "ready", "t", "expected"),
    [
        pytest.param(60000, 10000, 2, 3, 4, id="doc-example"),
        pytest.param(27000, 1000, 1, 20, 1, id="round-1.35-down"),
        pytest.param(25000, 1000, 1, 10, 3, id="round-2.5-up"),
        pytest.param(13500, 100, 1, 100, 1, id="1.35"),
        pytest.param(1350, 10, 1, 10, 14, id="13.5-rounds-to-14"),
        pytest.param(100, 1000, 1, 20, 1, id="floored-at-1"),
        pytest.param(3, 0.001, 1, 1, 3, id="capped-at-pending"),
    ],
)
def test_time_model(pending, rate, ready, t, expected):
    obs = source(replicas=ready, ready_replicas=ready, partitions=parts((rate, pending)))
    assert desired_replicas(NumaflowScale(target_processing_seconds=t), obs).desired == expected


def test_ready_replicas_not_replicas_in_formula():
    obs = source(replicas=4, ready_replicas=2)
    assert desired_replicas(FAST, obs).desired == 4


def test_max_over_partitions():
    obs = source(partitions=parts((10000.0, 60000.0), (10000.0, 120000.0)))
    assert desired_replicas(FAST, obs).desired == 8


def test_udf_uses_time_model_below_switch_point():
    # defaults: limit 24000, target available 15000 → time model while pending <= 15000
    obs = udf(pending=15000, rate=100)
    est = desired_replicas(NumaflowScale(target_processing_seconds=100), obs)
    assert est.inputs["model"] == "time"
    assert est.desired == 3  # 150 s / 100 s × 2 = 3


def test_udf_buffer_model_above_switch_point():
    obs = udf(pending=20000, rate=100)
    est = desired_replicas(NumaflowScale(), obs)
    assert est.inputs["model"] == "buffer"
    # contribution = (24000 − 20000) / 2 = 2000; 15000 / 2000 = 7.5 → 8
    assert est.desired == 8


def test_udf_buffer_full_adds_replicas_per_scale_up_to_replicas():
    obs = udf(pending=24000, rate=100, replicas=3, ready_replicas=2)
    est = desired_replicas(NumaflowScale(replicas_per_scale_up=3), obs)
    assert (est.inputs["model"], est.desired) == ("buffer-full", 6)


def test_buffer_model_never_asks_below_ready_with_defaults():
    for pending in range(15001, 24000, 500):
        obs = udf(pending=pending, rate=100, replicas=4, ready_replicas=4)
        assert desired_replicas(NumaflowScale(), obs).desired >= 4


def test_buffer_limits_from_last_buffer():
    obs = udf(pending=20000, rate=100)
    obs = replace(obs, buffers=(BufferInfo("a", 1000, 0.8), BufferInfo("b", 30000, 0.8)))
    assert desired_replicas(NumaflowScale(), obs).inputs["bufferLengthLimit"] == 24000


def test_vanishing_rate_does_not_overflow():
    # found by hypothesis: pending / 5e-324 is inf
    obs = source(replicas=1, ready_replicas=1, partitions=parts((5e-324, 1.0)))
    assert desired_replicas(NumaflowScale(target_processing_seconds=1), obs).desired == 1


def test_huge_values_do_not_wrap():
    obs = source(replicas=10, ready_replicas=10, partitions=parts((1e-4, 1e6)))
    est = desired_replicas(NumaflowScale(target_processing_seconds=1), obs)
    assert est.desired == 1_000_000  # capped at pending, not wrapped
    d = decide(NumaflowScale(target_processing_seconds=1), obs, NOW)
    assert (d.recommended, d.desired) == (50, 12)


# -- rate limit, bounds, steps, cooldowns -------------------------------------------------------


def test_rate_limit_guard_for_source_multiplies_by_read_batch_size():
    obs = source(rate_limit_max=20, read_batch_size=500)  # 10000/s
    d = decide(FAST, obs, NOW)
    assert d.rule == Rule.RATE_LIMITED
    assert d.desired == 2


def test_rate_limit_guard_for_udf_uses_plain_max():
    obs = udf(pending=20000, rate=100, rate_limit_max=100)
    assert decide(NumaflowScale(), obs, NOW).rule == Rule.RATE_LIMITED


def test_rate_limit_does_not_block_scale_down():
    obs = source(replicas=9, ready_replicas=9, partitions=parts((9000.0, 12000.0)), rate_limit_max=1)
    assert decide(FAST, obs, NOW).rule == Rule.SCALE_DOWN


def test_rate_below_limit_allows_scale_up():
    assert decide(FAST, source(rate_limit_max=21), NOW).rule == Rule.SCALE_UP


def test_desired_clamped_to_max():
    d = decide(NumaflowScale(target_processing_seconds=3, max=3), source(), NOW)
    assert (d.recommended, d.desired) == (3, 3)
    assert "clamped to [0, 3]" in d.reason


def test_out_of_bounds_jumps_without_step_or_cooldown():
    scale = NumaflowScale(
        target_processing_seconds=3, max=3, scale_down_cooldown_seconds=1000, scale_up_cooldown_seconds=10
    )
    d = decide(scale, source(replicas=10, ready_replicas=10, last_scaled_at=NOW - 20), NOW)
    assert (d.rule, d.desired) == (Rule.INTO_BOUNDS, 3)


def test_below_min_jumps_up():
    d = decide(NumaflowScale(min=6), source(), NOW)
    assert (d.rule, d.desired) == (Rule.INTO_BOUNDS, 6)


def test_scale_down_cooldown():
    scale = NumaflowScale(
        scale_up_cooldown_seconds=10, scale_down_cooldown_seconds=100, target_processing_seconds=3
    )
    obs = source(replicas=9, ready_replicas=9, partitions=parts((9000.0, 12000.0)), last_scaled_at=NOW - 50)
    assert decide(scale, obs, NOW).rule == Rule.SCALE_DOWN_COOLDOWN
    assert decide(scale, replace(obs, last_scaled_at=NOW - 100), NOW).rule == Rule.SCALE_DOWN


def test_scale_up_cooldown():
    scale = NumaflowScale(
        scale_up_cooldown_seconds=100, scale_down_cooldown_seconds=10, target_processing_seconds=3
    )
    d = decide(scale, source(last_scaled_at=NOW - 50), NOW)
    assert (d.rule, d.desired, d.recommended) == (Rule.SCALE_UP_COOLDOWN, 2, 4)


def test_steady():
    d = decide(FAST, source(replicas=4, ready_replicas=4, partitions=parts((20000.0, 60000.0))), NOW)
    assert (d.rule, d.desired) == (Rule.STEADY, 4)
    assert "already at 4" in d.reason


# -- back pressure -----------------------------------------------------------------------------

DIRECT = PressureCheck(Pressure.DIRECT, "out", 0.95, "direct back pressure: buffer 'out' at 95 %")
DOWN = PressureCheck(Pressure.DOWNSTREAM, "sink", 0.93, "downstream buffer 'sink' at 93 %")


def test_direct_back_pressure_decrements_instead_of_scaling_up():
    d = decide(FAST, source(replicas=3, ready_replicas=3), NOW, DIRECT)
    assert (d.rule, d.desired) == (Rule.BACK_PRESSURE_DIRECT, 2)
    assert "buffer 'out'" in d.reason


def test_direct_back_pressure_ignores_scale_down_cooldown():
    scale = NumaflowScale(
        target_processing_seconds=3, scale_up_cooldown_seconds=10, scale_down_cooldown_seconds=1000
    )
    d = decide(scale, source(replicas=3, ready_replicas=3, last_scaled_at=NOW - 20), NOW, DIRECT)
    assert d.rule == Rule.BACK_PRESSURE_DIRECT


def test_direct_back_pressure_at_floor_holds():
    d = decide(FAST, source(replicas=1, ready_replicas=1, partitions=parts((1000.0, 60000.0))), NOW, DIRECT)
    assert (d.rule, d.desired) == (Rule.BACK_PRESSURE_AT_FLOOR, 1)
    d = decide(NumaflowScale(min=2, target_processing_seconds=3), source(), NOW, DIRECT)
    assert d.rule == Rule.BACK_PRESSURE_AT_FLOOR


def test_downstream_back_pressure_holds():
    d = decide(FAST, source(), NOW, DOWN)
    assert (d.rule, d.desired) == (Rule.BACK_PRESSURE_DOWNSTREAM, 2)


def test_back_pressure_only_consulted_on_scale_up():
    obs = source(replicas=9, ready_replicas=9, partitions=parts((9000.0, 12000.0)))
    assert decide(FAST, obs, NOW, DIRECT).rule == Rule.SCALE_DOWN


# -- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"min": -1}, "scale.min"),
        ({"min": 3, "max": 1}, "scale.max"),
        ({"lookback_seconds": 0}, "scale.lookbackSeconds"),
        ({"lookback_seconds": 601}, "scale.lookbackSeconds"),
        ({"scale_up_cooldown_seconds": -1}, "scale.scaleUpCooldownSeconds"),
        ({"scale_down_cooldown_seconds": -5}, "scale.scaleDownCooldownSeconds"),
        ({"zero_replica_sleep_seconds": -1}, "scale.zeroReplicaSleepSeconds"),
        ({"target_processing_seconds": 0}, "scale.targetProcessingSeconds"),
        ({"target_buffer_availability": 0}, "scale.targetBufferAvailability"),
        ({"target_buffer_availability": 101}, "scale.targetBufferAvailability"),
        ({"replicas_per_scale_up": 0}, "scale.replicasPerScaleUp"),
        ({"replicas_per_scale_down": 0}, "scale.replicasPerScaleDown"),
    ],
)
def test_invalid_values_name_the_field(kwargs, path):
    with pytest.raises(SpecError) as err:
        NumaflowScale(**kwargs)
    assert err.value.path == path
    assert str(err.value).startswith(path)


def test_max_below_min_message():
    with pytest.raises(SpecError, match=r"scale.max: 1 is below min 3 \(raise max or lower min\)"):
        NumaflowScale(min=3, max=1)


def test_defaults_are_numaflows():
    s = NumaflowScale()
    assert (s.min, s.max, s.lookback_seconds) == (0, 50, 120)
    assert (s.scale_up_cooldown_seconds, s.scale_down_cooldown_seconds, s.zero_replica_sleep_seconds) == (
        90,
        90,
        120,
    )
    assert (s.target_processing_seconds, s.target_buffer_availability) == (20, 50)
    assert (s.replicas_per_scale_up, s.replicas_per_scale_down) == (2, 2)


def test_decision_round_trips_through_dict():
    d = decide(FAST, source(), NOW)
    from tidal.scaling import Decision

    again = Decision.from_dict(d.to_dict())
    assert again == d or (again.desired, again.rule, again.reason) == (d.desired, d.rule, d.reason)
    assert d.explain() == "in: 2 → 4 [scale-up] avg pending 60000 at 10000/s over 2 replicas, target 3 s → 4"


def test_sink_kind_behaves_like_udf():
    obs = udf(pending=20000, rate=100, kind=VertexKind.SINK)
    assert desired_replicas(NumaflowScale(), obs).inputs["model"] == "buffer"


def test_rate_limited_hold_recommends_what_the_model_wanted():
    d = decide(FAST, source(rate_limit_max=20, read_batch_size=500), NOW)
    assert d.rule == Rule.RATE_LIMITED
    assert d.recommended == 4  # was mistakenly the inputs mapping
    assert d.inputs["totalRate"] == 10000.0


# -- the activator (Tidal's wake from zero) --------------------------------------------------------


def test_activator_wakes_a_udf_at_zero_at_once_even_in_cooldown():
    from tidal.scaling import wake_from_zero

    obs = replace(udf(pending=5, rate=0), replicas=0, ready_replicas=0, last_scaled_at=NOW - 1)
    d = wake_from_zero(NumaflowScale(), obs, NOW)
    assert d is not None and (d.rule, d.desired) == (Rule.WAKE_ON_PENDING, 1)
    assert "5 messages waiting at 0 replicas" in d.reason
    assert decide(NumaflowScale(), obs, NOW).rule == Rule.COOLDOWN  # what Numaflow alone would do


def test_activator_wakes_to_min_and_leaves_sources_and_empty_buffers_alone():
    from tidal.scaling import wake_from_zero

    at_zero = replace(udf(pending=5, rate=0), replicas=0, ready_replicas=0)
    assert wake_from_zero(NumaflowScale(min=0, max=5), at_zero, NOW).desired == 1
    empty = replace(at_zero, buffers=(BufferInfo("in", 30000, 0.8, 0),))
    assert wake_from_zero(NumaflowScale(), empty, NOW) is None
    quiet_source = replace(source(), replicas=0, partitions=(PartitionMetrics("in", 0.0, 0.0),))
    assert wake_from_zero(NumaflowScale(), quiet_source, NOW) is None
    assert wake_from_zero(NumaflowScale(disabled=True), at_zero, NOW) is None
    assert wake_from_zero(NumaflowScale(), replace(at_zero, replicas=1), NOW) is None


def test_activator_wakes_a_source_that_reports_pending_and_leaves_one_that_cannot():
    from tidal.scaling import wake_from_zero

    reporting = replace(source(), replicas=0, ready_replicas=0, last_scaled_at=NOW - 1)
    d = wake_from_zero(NumaflowScale(), reporting, NOW)
    assert d is not None and (d.rule, d.desired) == (Rule.WAKE_ON_PENDING, 1)
    assert "60000 messages reported by the source at 0 replicas" in d.reason
    silent = replace(reporting, partitions=(PartitionMetrics("in", None, None),))
    assert wake_from_zero(NumaflowScale(), silent, NOW) is None  # zeroReplicaSleepSeconds applies
    assert decide(NumaflowScale(), silent, NOW).rule == Rule.COOLDOWN


# -- the path wake-up (Tidal's, not Numaflow's) -------------------------------------------------


def _at_zero(kind: VertexKind = VertexKind.UDF, replicas: int = 0) -> VertexObservation:
    return VertexObservation("down", kind, replicas=replicas, ready_replicas=replicas, last_scaled_at=0.0)


def test_wake_on_path_wakes_a_vertex_at_zero_to_its_floor() -> None:
    d = wake_on_path(NumaflowScale(), _at_zero(), 50.0, "in")
    assert (d.current, d.desired, d.rule) == (0, 1, Rule.WAKE_ON_PATH)
    assert d.reason == "upstream 'in' woke: wake to 1 now, ahead of its messages"
    assert wake_on_path(NumaflowScale(min=0, max=5), _at_zero(VertexKind.SINK), 1.0, "x").desired == 1


@pytest.mark.parametrize(
    ("scale", "replicas"),
    [(NumaflowScale(), 2), (NumaflowScale(disabled=True), 0), (NumaflowScale(min=0, max=0), 0)],
)
def test_wake_on_path_leaves_running_disabled_and_capped_vertices_alone(scale, replicas) -> None:
    assert wake_on_path(scale, _at_zero(replicas=replicas), 1.0, "in") is None

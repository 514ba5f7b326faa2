"""Numaflow's adaptive lookback, per pod and per partition: ``TestCalculateMaxLookback``
(``pkg/mvtxdaemon/server/service/rater/helper_test.go``) ported case by case onto
:func:`tidal.scaling.lookback.max_unchanged_seconds`, and the Rater that feeds it several series."""

from __future__ import annotations

import pytest

from tidal.scaling.lookback import adaptive_lookback, max_unchanged_seconds
from tidal.scaling.rates import Rater


def tl(*rows):
    return [(float(t), counts) for t, counts in rows]


@pytest.mark.parametrize(
    ("timeline", "start", "end", "want"),
    [
        pytest.param(
            tl(
                (100, {"pod1": 100, "pod2": 200}),
                (200, {"pod1": 100, "pod2": 200}),
                (400, {"pod1": 100, "pod2": 200}),
            ),
            0,
            2,
            300,
            id="Uniform data across the range",
        ),
        pytest.param(
            tl(
                (100, {"pod1": 100, "pod2": 150}),
                (240, {"pod1": 100, "pod2": 200}),
                (360, {"pod1": 150, "pod2": 200}),
            ),
            0,
            2,
            260,
            id="Values change midway",
        ),
        pytest.param(
            tl((100, {"pod1": 500}), (600, {"pod1": 500})), 0, 1, 500, id="No data change across any pods"
        ),
        pytest.param(tl((100, {"pod1": 100})), 0, 0, 0, id="Edge Case: One entry only"),
        pytest.param(
            tl(
                (100, {"pod1": 500, "pod2": 400}),
                (130, {"pod1": 600, "pod2": 400}),
                (160, {"pod1": 600, "pod2": 600}),
            ),
            0,
            2,
            60,
            id="Rapid changes in sequential entries",
        ),
        pytest.param(
            tl(
                (0, {"pod1": 50}),
                (30, {"pod1": 50}),
                (60, {"pod1": 0}),
                (120, {"pod1": 25}),
                (180, {"pod1": 25}),
                (240, {"pod1": 25}),
            ),
            0,
            5,
            120,
            id="Pod goes to zero",
        ),
        pytest.param(
            tl(
                (0, {"pod1": 60}),
                (60, {"pod1": 60}),
                (120, {"pod1": 70}),
                (180, {"pod1": 0}),
                (240, {"pod1": 25}),
                (300, {"pod1": 25}),
            ),
            0,
            5,
            120,
            id="Pod goes to zero - 2",
        ),
        pytest.param(
            tl(*[(t, {"pod1": 0, "pod2": 5 if t < 240 else 6}) for t in range(0, 301, 60)]),
            0,
            5,
            240,
            id="One pod no data, other >0 ",
        ),
    ],
)
def test_calculate_max_lookback(timeline, start, end, want):
    assert max_unchanged_seconds(timeline, start, end) == want


def test_the_maximum_is_per_series_not_of_the_sum():
    """A busy pod beside a slow one: the sum moves every tick, the slow pod's spell is 240 s.
    Upstream stretches the lookback to cover the slow pod; a summed counter would not."""
    rows = tl(*[(t, {"fast": float(t), "slow": 10.0 if t < 240 else 20.0}) for t in range(0, 301, 10)])
    assert max_unchanged_seconds(rows, 0, len(rows) - 1) == 240
    summed = [(t, {"all": sum(c.values())}) for t, c in rows]
    assert max_unchanged_seconds(summed, 0, len(summed) - 1) == 10


def test_rater_fed_several_series_stretches_the_lookback_by_the_slowest():
    r = Rater(capacity=400)
    for t in range(0, 361, 5):
        r.record(float(t), {"replica-0": float(t * 10), "replica-1": 5.0 if t < 300 else 9.0}, pending=100)
    # Over 3 × 120 s, replica-1 stayed at 5 from t=0 to t=300: rounded up to 300 s.
    assert adaptive_lookback(r, 360.0, current=120.0, configured=120.0) == 300.0


def test_rater_snapshots_survive_compaction():
    r = Rater(capacity=4)
    for t in range(20):
        r.record(float(t), {"a": float(t), "b": 1.0}, pending=1)
    timeline = r.timeline(r._start)
    assert [at for at, _ in timeline] == [16.0, 17.0, 18.0, 19.0]  # capacity 4: the newest 4
    assert all(counts == {"a": at, "b": 1.0} for at, counts in timeline)


# -- TestCalculateRate (pkg/mvtxdaemon/server/service/rater/helper_test.go) -------------------------

NOW = 1_000.0


def window(*rows):
    from tidal.scaling.rates import CounterWindow

    w = CounterWindow()
    for ago, counts in rows:
        w.record(NOW - ago, counts)
    return w


def test_calculate_rate_with_fewer_than_two_samples_is_not_available():
    assert window().rate(NOW, 10) is None
    assert window((20, {"pod1": 5.0})).rate(NOW, 10) is None


@pytest.mark.parametrize(
    ("rows", "rates"),
    [
        pytest.param(
            [(20, {"pod1": 5.0}), (10, {"pod1": 10.0}), (0, {"pod1": 20.0})],
            {5: None, 15: None, 25: 0.5, 100: 0.5},
            id="singlePod_givenCountIncreases",
        ),
        pytest.param(
            [(30, {"pod1": 200.0}), (20, {"pod1": 100.0}), (10, {"pod1": 50.0}), (0, {"pod1": 80.0})],
            {5: None, 15: None, 25: 5.0, 35: 7.5, 100: 7.5},
            id="singlePod_givenCountDecreases",
        ),
        pytest.param(
            [(30, {"pod1": 50.0, "pod2": 100.0}), (20, {"pod1": 100.0, "pod2": 200.0}),
             (10, {"pod1": 200.0, "pod2": 300.0})],
            {5: None, 15: None, 25: None, 35: 15.0},
            id="multiplePods_givenCountIncreases",
        ),
        pytest.param(
            [(30, {"pod1": 200.0, "pod2": 300.0}), (20, {"pod1": 100.0, "pod2": 200.0}),
             (10, {"pod1": 50.0, "pod2": 100.0})],
            {5: None, 15: None, 25: None, 35: 30.0},
            id="multiplePods_givenCountDecreases",
        ),
        pytest.param(
            [(30, {"pod1": 50.0, "pod2": 300.0}), (20, {"pod1": 100.0, "pod2": 200.0}),
             (10, {"pod1": 200.0, "pod2": 100.0})],
            {5: None, 15: None, 25: None, 35: 25.0},
            id="multiplePods_givenOnePodRestarts",
        ),
        pytest.param(
            [(30, {"pod1": 200.0, "pod2": 90.0, "pod3": 50.0}), (20, {"pod1": 100.0, "pod2": 200.0}),
             (10, {"pod1": 50.0, "pod2": 300.0, "pod4": 100.0}),
             (0, {"pod2": 400.0, "pod3": 200.0, "pod100": 200.0})],
            {5: None, 15: None, 25: 25.0, 35: 23.0, 100: 23.0},
            id="multiplePods_givenPodsComeAndGo",
        ),
    ],
)  # fmt: skip
def test_calculate_rate(rows, rates):
    w = window(*rows)
    assert {lookback: w.rate(NOW, lookback) for lookback in rates} == rates


def test_a_pod_back_from_a_missed_scrape_counts_its_increase_not_its_whole_counter():
    """The one deliberate difference (docs/conformance.md): pod3 missed two scrapes and came back
    at 200 having been at 50. Upstream's ``calculatePodDelta`` takes its previous count from the
    previous snapshot (absent: 0) and counts 200; Tidal counts 150, what it really processed."""
    w = window((20, {"pod3": 50.0}), (10, {"pod1": 1.0}), (0, {"pod3": 200.0}), (-10, {"pod3": 200.0}))
    assert w.rate(NOW + 10, 100) == pytest.approx((1.0 + 150.0) / 20)  # upstream: (1 + 200) / 20

"""RiseWatch: the rises of a periodic load, learnt from the arrivals, and the misses."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidal.scaling.periodic import RiseWatch


def feed(watch: RiseWatch, rates: list[float], start: float = 0.0, needed: int | None = None) -> list[float]:
    """One observation a second; the seconds at which a rise started."""
    rose = []
    for i, rate in enumerate(rates):
        if watch.observe(start + i, rate):
            rose.append(start + i)
        if needed is not None:
            watch.note_needed(needed)
    return rose


def waves(
    on: int = 40, period: int = 110, first: int = 30, count: int = 3, rate: float = 900.0
) -> list[float]:
    rates = [0.0] * (first + period * count)
    for k in range(count):
        for t in range(first + k * period, first + k * period + on):
            rates[t] = rate
    return rates


def test_the_waves_rise_every_period_and_the_next_is_due_one_period_after_the_last():
    watch = RiseWatch()
    assert feed(watch, waves(count=2), needed=4) == [30.0, 140.0]
    forecast = watch.forecast(200.0)
    assert forecast is not None
    assert (forecast.at, forecast.period, forecast.rises, forecast.replicas) == (250.0, 110.0, 2, 4)
    assert forecast.reason(238.0) == (
        "the load rose every 110 s (2 rises), the next rise is due in 12 s; the last one needed 4"
    )
    assert watch.outlook(238.0) == forecast.reason(238.0)


def test_a_forecast_says_whether_two_periods_agree():
    watch = RiseWatch()
    feed(watch, waves(count=2))
    two = watch.forecast(200.0)
    assert two is not None and not two.agreed  # one period: seen once
    feed(watch, waves(count=3)[250:], start=250.0)
    three = watch.forecast(300.0)
    assert three is not None and three.agreed and three.at == 360.0


def test_one_rise_predicts_nothing():
    watch = RiseWatch()
    assert watch.outlook(0.0) == "no rise forecast: 0 rises seen, 2 needed"
    feed(watch, waves(count=1))
    assert watch.rises == (30.0,)
    assert watch.forecast(100.0) is None
    assert watch.outlook(100.0) == "no rise forecast: 1 rise seen, 2 needed"


def test_due_within_a_lead_and_not_while_the_load_is_up():
    watch = RiseWatch()
    rates = waves(count=2)
    feed(watch, rates)  # ends at 249, low
    assert watch.due_within(240.0, lead=10.0) is not None
    assert watch.due_within(230.0, lead=10.0) is None  # 20 s away
    watch.observe(250.0, 900.0)  # risen: the policy sees the load itself
    assert watch.due_within(250.0, lead=10.0) is None


def test_nothing_is_due_until_the_load_has_been_low_as_long_as_a_rise_needs():
    """One low reading under load (a tick with no batch committed) is not a quiet spell: no rise
    can follow it, so none is due, though the periods say one is."""
    watch = RiseWatch()
    rates = [0.0] * 10 + [225.0] * 40 + [0.0] * 10 + [900.0] * 45
    assert feed(watch, rates) == [10.0, 60.0]  # rose at the start, and at a step after a stall
    assert watch.observe(105.0, 0.0) is False  # the next rise due at 110: one reading of 0
    assert watch.forecast(105.0) is not None
    assert watch.due_within(105.0, lead=10.0) is None
    feed(watch, [0.0] * 4, start=106.0)
    assert watch.low_for(109.0) == 4.0
    assert watch.due_within(109.0, lead=10.0) is None
    watch.observe(110.0, 0.0)
    assert watch.due_within(110.0, lead=10.0) is not None  # low for 5 s: a rise could come


def test_a_micro_batch_that_reads_zero_mid_wave_is_not_a_rise():
    """On Spark a tick with no batch committed reads 0 arrivals: without the quiet spell each such
    tick would start a new rise, and the period would be a second."""
    rates = waves(count=2)
    for t in range(35, 70, 4):
        rates[t] = 0.0  # in both waves
        rates[t + 110] = 0.0
    watch = RiseWatch()
    assert feed(watch, rates) == [30.0, 140.0]


def test_a_rise_that_does_not_come_is_a_miss_and_prediction_waits_for_two_agreeing_periods():
    watch = RiseWatch()
    feed(watch, waves(count=2))  # rises 30, 140: the next due at 250, grace 22 s
    assert watch.forecast(271.0) is not None
    assert watch.outlook(273.0) == "no rise forecast: the rise due 23 s ago did not come"
    feed(watch, [0.0] * 60, start=250.0)  # nothing by 309: a miss
    assert watch.forecast(310.0) is None
    missed = "no rise forecast: a rise did not come when due, and two periods must agree again"
    assert watch.outlook(310.0) == missed
    feed(watch, [900.0] * 10 + [0.0] * 90, start=310.0)  # a rise at 310 (170 s after 140)
    assert watch.rises[-1] == 310.0
    assert watch.forecast(320.0) is None  # 110 then 170: they do not agree
    feed(watch, [900.0] * 10 + [0.0] * 160, start=480.0)  # 170 s again
    forecast = watch.forecast(500.0)
    assert forecast is not None and forecast.at == 650.0


def test_a_load_that_settles_lower_is_measured_against_its_new_peak():
    """A square wave 400 ↔ 2000: the first 400/s read as high (nothing higher was seen), the
    low spells after the first high one are low however far the peak decays meanwhile."""
    rates = ([400.0] * 300 + [2000.0] * 300) * 3
    watch = RiseWatch()
    assert feed(watch, rates) == [900.0, 1500.0]


def test_shares_must_be_ordered():
    with pytest.raises(ValueError, match="low_share < high_share"):
        RiseWatch(low_share=0.6, high_share=0.5)


@given(
    period=st.integers(min_value=20, max_value=600),
    on_share=st.floats(min_value=0.05, max_value=0.8),
    first=st.integers(min_value=6, max_value=100),  # quiet before the first rise
    rate=st.floats(min_value=1.0, max_value=1e6),
)
def test_any_square_wave_is_predicted_to_the_second_after_two_rises(
    period: int, on_share: float, first: int, rate: float
) -> None:
    on = max(1, min(period - 6, round(period * on_share)))  # at least the quiet spell between
    watch = RiseWatch()
    feed(watch, waves(on=on, period=period, first=first, count=2, rate=rate))
    forecast = watch.forecast(first + period + on + 1.0)
    assert forecast is not None
    assert forecast.at == first + 2 * period
    assert forecast.period == period


def test_jittered_rises_give_the_median_period_and_come_forward_by_its_spread():
    """On Spark the rises of a 110 s wave were seen at 121, 232, 352 and 458 s."""
    starts = [121, 232, 352, 458]
    rates = [0.0] * 560
    for s in starts:
        for t in range(s, s + 30):
            rates[t] = 900.0
    watch = RiseWatch()
    assert feed(watch, rates) == [float(s) for s in starts]
    forecast = watch.forecast(559.0)
    assert forecast is not None
    assert forecast.period == 111.0 and forecast.spread == 9.0  # median of 111, 120, 106
    assert forecast.at == 569.0
    assert watch.due_within(559.0, lead=1.0) is not None  # 10 s ahead: 1 of lead, 9 of spread
    assert watch.due_within(557.0, lead=1.0) is None


def test_one_period_between_unlike_rises_predicts_nothing_until_a_second_agrees() -> None:
    """A run's start at 225/s (1 replica) and a spike a minute later (6) are not a pattern yet;
    the same rises again a period later are."""
    watch = RiseWatch()
    feed(watch, [0.0] * 10 + [225.0] * 20, needed=1)
    feed(watch, [0.0] * 30 + [2250.0] * 20, start=30.0, needed=6)
    assert watch.rises == (10.0, 60.0)
    assert watch.forecast(90.0) is None  # needed 1, then 6
    unlike = "no rise forecast: one period (50 s) between unlike rises (needed 1, then 6)"
    assert watch.outlook(90.0) == unlike
    feed(watch, [0.0] * 30 + [2250.0] * 20, start=80.0, needed=6)
    forecast = watch.forecast(140.0)
    assert watch.rises == (10.0, 60.0, 110.0)
    assert forecast is not None and forecast.agreed and forecast.at == 160.0 and forecast.replicas == 6
    alike = RiseWatch()
    feed(alike, [0.0] * 10 + [900.0] * 20 + [0.0] * 30 + [900.0] * 20, needed=4)
    assert alike.forecast(90.0) is not None  # one period, rises alike: trusted after one period


def test_a_low_reading_with_a_backlog_is_a_stall_not_a_quiet() -> None:
    """On a cluster the demo's first wave read low for seconds while its executors started with
    thousands waiting, and the end of that stall was taken for a rise: a period of 88 s where
    the waves come every 110 s. Backed up, a low reading neither starts a low spell nor
    continues one; a high one under a backlog is still a rise after a quiet."""
    watch = RiseWatch()
    for t in range(20):  # the run starts under load: readings of 0 while executors start
        assert watch.observe(float(t), 0.0, backed_up=True) is False
    rates = [900.0] * 20 + [0.0] * 70 + [900.0] * 40
    rose = [20.0 + i for i, r in enumerate(rates) if watch.observe(20.0 + i, r, backed_up=i < 10)]
    assert rose == [110.0]  # the wave after a quiet, not the start
    stalled = RiseWatch()
    feed(stalled, [900.0] * 10)
    for t in range(10, 30):  # mid-load, a restart: low readings with a backlog, for 20 s
        stalled.observe(float(t), 0.0, backed_up=True)
    assert stalled.low_for(29.0) == 0.0
    assert stalled.observe(30.0, 900.0) is False


def test_a_rise_whose_backlog_is_seen_a_tick_before_its_rate_is_still_a_rise() -> None:
    """The cluster's bursts at `enrich` (sized on its source's counts, which come with the
    source's next report while its pending is seen at once): after 15 s of quiet at 100/s, the
    burst's first tick read 0/s with 1,252 waiting, the next 1,975/s. Each such rise was missed
    when the backed-up reading wiped the quiet before it: three rises learnt of eight."""
    watch = RiseWatch()
    for t in range(15):  # nothing yet
        watch.observe(float(t), 0.0)
    rose: list[float] = []
    for start in (15, 45, 75, 105):
        for t in range(start, start + 30):
            into = t - start
            if into == 0:
                reading, backed_up = 0.0, True  # the backlog first, the rate a tick later
            elif into < 6:
                reading, backed_up = 2000.0, True
            elif into < 16:
                reading, backed_up = 0.0, True  # draining: a stall, no quiet
            else:
                reading, backed_up = 100.0, False
            if watch.observe(float(t), reading, backed_up=backed_up):
                rose.append(float(t))
    assert rose == [16.0, 46.0, 76.0, 106.0]
    assert watch.due_within(130.0, 8.0) is not None  # after 15 s of quiet: the next is due at 136


def bursts(
    count: int = 4, on: int = 5, period: int = 30, base: float = 100.0, peak: float = 2000.0
) -> list[float]:
    """The cluster bench's bursty trace: ``base``/s with ``on`` s of ``peak``/s every ``period`` s."""
    return [peak if t % period < on else base for t in range(count * period)]


def test_a_rise_s_high_phase_is_learnt_once_two_agree_and_the_rise_under_way_ends_on_time():
    watch = RiseWatch()  # the load at the start is no rise (never low before): placed by its fall
    feed(watch, bursts(count=2))
    assert watch.rises == (0.0, 30.0) and watch.rise_ends(31.0) is None  # one high phase seen (30-35)
    feed(watch, bursts(count=4)[60:92], start=60.0)  # the third burst, then the fourth 2 s in
    ends = watch.rise_ends(91.0)
    assert ends is not None and (ends.lasts, ends.left, ends.seen, ends.low) == (5.0, 4.0, 2, 100.0)
    assert ends.reason() == "the rise ends in 4 s (its high phase lasted 5 s, 2 seen)"
    forecast = watch.forecast(91.0)
    assert forecast is not None and (forecast.lasts, forecast.rate) == (5.0, 2000.0)


def test_a_reading_or_two_low_mid_rise_do_not_end_its_high_phase():
    """On the cluster a source's reports lag its load, and a burst of 5 s read high, low, high:
    cut at the first low reading, its high phases were 1, 11, 1 and 13 s, which never agree."""
    watch = RiseWatch()
    rates = bursts(count=4)
    for start in (30, 60, 90):
        rates[start + 1] = 100.0  # one lagging reading a burst
    feed(watch, rates)
    assert list(watch._highs) == [5.0, 5.0, 5.0, 5.0]  # the first placed, as long as the second
    assert watch._seen_highs == 3


def test_a_rise_lasts_as_long_as_its_arrivals_not_as_the_backlog_it_leaves():
    """The cluster's bursts (2026-12-06): after each 5 s burst the backlog took 12 s more to
    drain, and its low readings with thousands waiting were stalls, no quiet spell. Measured to
    where the quiet began, a burst lasted 17 s; `orders`' one replica then looked too slow for
    the next, and was pre-scaled, which restarted the source as the burst came."""
    watch = RiseWatch()
    for t in range(4 * 30 + 3):  # four bursts, then 2 s into the fifth
        high = t % 30 < 5
        draining = 5 <= t % 30 < 17  # the burst's backlog, still waiting
        watch.observe(float(t), 2000.0 if high else 100.0, backed_up=draining)
    assert watch.rises == (30.0, 60.0, 90.0, 120.0)  # the last four (the one placed at 0 is out)
    assert list(watch._highs)[-3:] == [5.0, 5.0, 5.0]
    ends = watch.rise_ends(122.0)
    assert ends is not None and ends.lasts == 5.0 and ends.left == 3.0


def test_a_rise_whose_end_the_frozen_counts_hide_lasts_as_long_as_it_was_seen_high():
    """The cluster's bursts (2026-12-06): `orders`' restart at each burst froze the counts from
    the burst's fourth second for 7 s (readings left out), and the first reading after them
    was low with the backlog draining. Its high phase read 8 and 12 s; seen high for 4 s, it is
    taken as 4."""
    watch = RiseWatch()
    for t in range(4 * 30 + 3):
        into = t % 30
        if 4 <= into < 11:
            continue  # the counts frozen: no reading
        watch.observe(float(t), 2000.0 if into < 5 else 100.0, backed_up=11 <= into < 17)
    assert watch.rises == (30.0, 60.0, 90.0, 120.0)
    assert list(watch._highs)[-3:] == [4.0, 4.0, 4.0]


def test_a_rise_that_outlasts_the_ones_before_is_judged_as_a_load_that_stays():
    watch = RiseWatch()
    feed(watch, bursts(count=3) + [2000.0] * 10)
    assert watch.rise_ends(95.0) is not None  # 5 s in: due to end now
    assert watch.rise_ends(97.0) is not None  # within 2 s of it
    assert watch.rise_ends(98.0) is None  # 8 s in, 3 s past: a step, not a burst
    assert watch.rise_ends(99.0) is None


def test_high_phases_that_disagree_are_no_length():
    watch = RiseWatch()
    rates = bursts(count=3)  # rises at 30 (5 s high), 60 (18 s high) and 90
    rates[60:78] = [2000.0] * 18
    feed(watch, rates + [2000.0] * 2)
    assert watch.rises == (0.0, 30.0, 60.0, 90.0)  # the first placed by its fall
    assert watch.forecast(91.0) is not None
    assert watch.rise_ends(91.0) is None
    assert watch.rise_ends(50.0) is None  # and no rise is under way in a low spell


def test_a_rise_that_fell_after_its_learnt_length_has_run_it_before_the_quiet_spell_ends():
    """The cluster's waves (2026-12-07): a learnt wave's executors stayed 5 s past its drain,
    waiting for the quiet spell that closes its high phase."""
    watch = RiseWatch()
    rates = waves(count=3)  # 40 s high at 30, 140 and 250
    feed(watch, rates[:291])  # the third wave fell at 290
    assert watch.ran_its_length() == (40.0, 40.0)  # at its first low reading
    feed(watch, rates[291:296], start=291.0)  # the quiet spell has closed the phase
    assert watch.ran_its_length() is None


def test_a_rise_that_fell_short_of_its_learnt_length_or_before_two_agree_has_not_run_it():
    watch = RiseWatch()
    rates = waves(count=3)
    rates[260:290] = [0.0] * 30  # the third wave fell after 10 s of its 40
    feed(watch, rates[:262])
    assert watch.ran_its_length() is None
    early = RiseWatch()
    feed(early, waves(count=2)[:181])  # the second wave fell: one length seen, none agreed
    assert early.ran_its_length() is None
    high = RiseWatch()
    feed(high, waves(count=3)[:289])  # still high
    assert high.ran_its_length() is None


def test_what_a_rise_leaves_clears_through_the_capacity_over_the_rate_after_it():
    from tidal.scaling.periodic import RiseEnd

    ends = RiseEnd(left=3.0, lasts=5.0, seen=2, low=100.0)
    # 1 replica at 1,558/s under 2,000/s: 500 + 442 × 3 = 1,826 left, drained at 1,458/s after
    assert ends.clears(500.0, 1558.0, 2000.0) == pytest.approx(3.0 + 1826.0 / 1458.0)
    assert ends.clears(500.0, 2500.0, 2000.0) == 1.0  # gone while the rise lasts
    assert ends.clears(0.0, 2000.0, 2000.0) == 0.0
    assert ends.clears(10.0, 90.0, 2000.0) == float("inf")  # not even the rate after it


@given(
    backlog=st.floats(0, 1e5),
    capacity=st.floats(1, 1e4),
    more=st.floats(0, 1e4),
    arriving=st.floats(0, 1e4),
    left=st.floats(0, 60),
    low=st.floats(0, 1e3),
)
def test_more_capacity_never_clears_later(backlog, capacity, more, arriving, left, low):
    from tidal.scaling.periodic import RiseEnd

    ends = RiseEnd(left=left, lasts=left, seen=2, low=low)
    assert ends.clears(backlog, capacity + more, arriving) <= ends.clears(backlog, capacity, arriving) + 1e-6


def test_the_fewest_replicas_clear_a_forecast_rise_within_the_time_given_after_it():
    from tidal.scaling.periodic import Forecast

    burst = Forecast(at=90.0, period=30.0, rises=3, replicas=6, rate=2000.0, lasts=5.0)
    # 370/s a replica, 100/s after: 3 leave 4,450 at the burst's end, gone 4.4 s later; 2 take 9.8 s
    assert burst.fewest(0.0, 370.0, 100.0, within=5.0) == 3
    assert burst.fewest(0.0, 370.0, 100.0, within=10.0) == 2
    assert burst.fewest(0.0, 370.0, 100.0, within=0.0) == 6  # never fewer than its peak needed
    unknown = Forecast(at=90.0, period=30.0, rises=3, replicas=6, rate=2000.0)
    assert unknown.fewest(0.0, 370.0, 100.0, within=5.0) == 6  # how long it lasts not known yet


@given(
    backlog=st.floats(0, 1e5),
    per_replica=st.floats(1, 1e4),
    rate=st.floats(0, 1e4),
    lasts=st.floats(0, 60),
    low=st.floats(0, 1e3),
    within=st.floats(0, 60),
    replicas=st.integers(1, 20),
)
def test_the_fewest_clear_the_rise_in_time_and_one_fewer_would_not(
    backlog, per_replica, rate, lasts, low, within, replicas
):
    from tidal.scaling.periodic import Forecast

    rise = Forecast(at=0.0, period=30.0, rises=2, replicas=replicas, rate=rate, lasts=lasts)
    fewest = rise.fewest(backlog, per_replica, low, within)
    assert 1 <= fewest <= replicas
    if fewest < replicas:
        assert rise.clears(backlog, fewest * per_replica, low) <= lasts + within
    if fewest > 1:
        assert rise.clears(backlog, (fewest - 1) * per_replica, low) > lasts + within


def test_a_quiet_spell_s_own_small_backlog_is_no_stall() -> None:
    """The cluster's bursts (2026-11-30): `enrich` went 6 → 1 five seconds into a quiet spell
    at 100/s, and its query's restart piled up 525–675 waiting. Over a micro-batch, one reading
    of 0/s was a stall and cleared the spell; the next burst came three seconds into a new one
    and was never learnt. Under a second of a rise's arrivals waiting, it is still a quiet."""
    watch = RiseWatch()
    for t in range(15):
        watch.observe(float(t), 0.0)
    rose: list[float] = []
    for start in (15, 45, 75):
        for t in range(start, start + 30):
            into = t - start
            if into < 5:
                reading, waiting = 2000.0, 3_000.0
            elif into < 12:
                reading, waiting = 0.0, 4_000.0 - 400 * (into - 5)  # draining the burst: a stall
            elif into < 27:
                reading, waiting = (0.0, 525.0) if into % 2 else (100.0, 675.0)  # the restart's pile
            else:
                reading, waiting = 100.0, 25.0
            if watch.observe(float(t), reading, backed_up=watch.backed_up(waiting, reading, 500)):
                rose.append(float(t))
    assert rose == [15.0, 45.0, 75.0]
    assert watch.backed_up(1_252.0, 0.0, 500)  # a burst's backlog seen a tick before its rate
    assert not watch.backed_up(525.0, 0.0, 500)  # a quiet spell's restart
    fresh = RiseWatch()  # no peak yet: more than a micro-batch or a second of arrivals
    assert fresh.backed_up(7_380.0, 0.0, 500) and not fresh.backed_up(400.0, 0.0, 500)


def test_a_run_that_starts_under_a_rise_places_it_by_its_fall_once_the_next_has_ended() -> None:
    """The cluster's waves: the run starts under the first wave, which no rise began. Its fall
    at 40 s, less the second wave's 40 s, puts it at 0, so the third is due at 220 s, not only
    the fourth once three rises were seen."""
    watch = RiseWatch()
    assert feed(watch, waves(first=0, count=2)[:150], needed=3) == [110.0]
    assert watch.rises == (110.0,) and watch.forecast(150.0) is None  # the second wave under way
    feed(watch, [0.0] * 10, start=150.0, needed=3)
    assert watch.rises == (0.0, 110.0)
    forecast = watch.forecast(160.0)
    assert forecast is not None and forecast.placed and not forecast.agreed
    assert (forecast.at, forecast.period, forecast.replicas) == (220.0, 110.0, 3)
    assert "(2 rises, the first placed by its fall)" in forecast.reason(200.0)
    feed(watch, waves(first=0, count=3)[160:], start=160.0, needed=3)
    third = watch.forecast(300.0)
    assert watch.rises == (0.0, 110.0, 220.0)
    assert third is not None and third.agreed and third.at == 330.0


def test_a_placed_period_lets_a_drained_vertex_go_early_and_a_single_seen_one_does_not() -> None:
    """The cluster's second wave: its period, placed, is what the third wave is pre-scaled on,
    so it also lets the second wave's replicas go after the quiet spell (not three start-ups
    later). One period between two rises seen may be two random bursts: that waits for a second."""
    from tidal.controller.ahead import RisesAhead

    placed = RisesAhead(tick=1.0, catch_up=10.0)
    feed(placed.watch, waves(first=0, count=2)[:150] + [0.0] * 10, needed=3)
    far = placed.far(160.0, startup=5.0)
    assert far is not None and far.placed and not far.agreed and far.at == 220.0
    assert placed.far(210.0, startup=5.0) is None  # within two start-ups and a tick: kept
    seen = RisesAhead(tick=1.0, catch_up=10.0)
    feed(seen.watch, waves(first=30, count=2)[:190], needed=3)
    once = seen.watch.forecast(190.0)
    assert once is not None and not once.placed and not once.agreed
    assert seen.far(190.0, startup=5.0) is None


@given(
    period=st.integers(min_value=20, max_value=600),
    on_share=st.floats(min_value=0.05, max_value=0.8),
    into=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),  # how far into a rise the run starts
    rate=st.floats(min_value=1.0, max_value=1e6),
)
def test_any_square_wave_the_run_starts_under_is_predicted_after_the_next_rise_ends(
    period: int, on_share: float, into: float, rate: float
) -> None:
    on = max(1, min(period - 6, round(period * on_share)))
    late = int(into * on)  # seconds of the first high phase before the run began
    watch = RiseWatch()
    rates = waves(on=on, period=period, first=0, count=2, rate=rate)[late:]
    feed(watch, rates + [0.0] * 6, needed=2)
    forecast = watch.forecast(len(rates) + 5.0)
    assert forecast is not None and forecast.placed
    assert forecast.at == 2 * period - late  # to the second, as if the first rise had been seen
    assert forecast.period == period


def test_a_placed_rise_unlike_the_next_predicts_nothing_until_a_period_agrees() -> None:
    """A run that starts under a base load (1 replica) followed by spikes (6): one period between
    unlike rises is not a pattern, placed or seen."""
    watch = RiseWatch()
    feed(watch, [225.0] * 20 + [0.0] * 30, needed=1)  # the base
    feed(watch, [2250.0] * 20 + [0.0] * 10, start=50.0, needed=6)  # then a spike
    assert watch.rises == (0.0, 50.0)
    assert watch.forecast(80.0) is None


def test_a_run_that_starts_quiet_places_nothing() -> None:
    watch = RiseWatch()
    assert feed(watch, waves(first=10, count=2)) == [10.0, 120.0]
    forecast = watch.forecast(170.0)
    assert forecast is not None and not forecast.placed

"""Knative's scraping at scale, ported: ``TestPopulationMeanSampleSize``
(``pkg/autoscaler/metrics/sample_size_test.go``), the pod order of ``scrapePods`` (``TestOldPodShuffle``,
``TestMixedPodShuffle``, ``TestScrapeAllPodsOldPods`` / ``…YoungPods``, ``TestScrapeSomePodsOldPods``) and
``Stat.average``, onto :mod:`tidal.scaling.scrape_sample`."""

from __future__ import annotations

import random

import pytest

from tidal.scaling.scrape_sample import extrapolate, population_mean_sample_size, scrape_order


@pytest.mark.parametrize(
    ("population", "want"), [(0, 0), (1, 1), (2, 2), (5, 4), (10, 7), (100, 14), (1000, 16)]
)
def test_population_mean_sample_size(population, want):
    assert population_mean_sample_size(population) == want


def test_scrape_all_pods_when_three_or_fewer():
    order, sample = scrape_order(["o1", "o2"], ["y1"], random.Random(0).shuffle)
    assert sample == 3 and sorted(order) == ["o1", "o2", "y1"]


def test_enough_old_pods_the_old_are_shuffled_and_the_young_stand_behind_unshuffled():
    old = [f"o{i}" for i in range(10)]
    young = [f"y{i}" for i in range(5)]
    seen_first = set()
    for seed in range(20):
        order, sample = scrape_order(old, young, random.Random(seed).shuffle)
        assert sample == 8  # 15 pods
        assert sorted(order[:10]) == old and order[10:] == young
        seen_first.add(order[0])
    assert len(seen_first) > 1  # the old are shuffled


def test_too_few_old_pods_all_old_first_then_the_young_shuffled():
    old = ["o0", "o1"]
    young = [f"y{i}" for i in range(8)]
    firsts = set()
    for seed in range(20):
        order, sample = scrape_order(old, young, random.Random(seed).shuffle)
        assert sample == 7  # 10 pods
        assert order[:2] == old and sorted(order[2:]) == young
        firsts.add(order[2])
    assert len(firsts) > 1


def test_the_sample_stands_for_the_population():
    """``Stat.average``: 7 sampled pods summing 14 concurrent requests stand for 10 pods."""
    assert extrapolate(14.0, 7, 10) == 20.0
    assert extrapolate(5.0, 0, 10) == 0.0

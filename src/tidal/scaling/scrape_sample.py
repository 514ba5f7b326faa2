"""Scraping at scale (``pkg/autoscaler/metrics``: ``sample_size.go``, ``stats_scraper.go``), pure.

Knative's autoscaler does not scrape every pod of a large revision each second: it scrapes a
sample whose size is what estimating the population's mean needs (95 % confidence, a margin of
error of 5, an assumed variance of 100) and scales the sample's sums up to the whole population
(``Stat.average``: ``sum / sample × total``). Older pods are preferred, as young ones may not
have a full window of data yet; young pods fill in when the old are too few, and stand behind
the sample as backups for pods that fail to answer.

The request path uses these functions for its receivers (:mod:`tidal.request.path`); the shuffle
is the caller's (``random.Random.shuffle`` there, as ``rand.Shuffle`` upstream): the core stays
free of randomness.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["SAMPLE_SIZE", "extrapolate", "population_mean_sample_size", "scrape_order"]

T = TypeVar("T")

CRITICAL_VALUE_SQUARED = 1.96 * 1.96  # the Normal distribution at 95 % confidence
MARGIN_OF_ERROR_SQUARED = 5.0 * 5.0
POPULATION_VARIANCE = 100.0
SAMPLE_SIZE = CRITICAL_VALUE_SQUARED * POPULATION_VARIANCE / MARGIN_OF_ERROR_SQUARED  # ≈ 15.37


def population_mean_sample_size(population: float) -> float:
    """``populationMeanSampleSize``: ``N`` up to 3, else ``ceil(N·X / (N + X − 1))``."""
    if population <= 3:
        return max(population, 0.0)
    return float(math.ceil(population * SAMPLE_SIZE / (population + SAMPLE_SIZE - 1)))


def scrape_order(
    old: Sequence[T], young: Sequence[T], shuffle: Callable[[list[T]], None]
) -> tuple[list[T], int]:
    """The pods in the order to try and how many answers make the sample (``scrapePods``).

    Too few old pods for the sample: all the old ones, then the young shuffled. Enough: the old
    shuffled (the first ``sample`` are the sample), then the young, unshuffled, as backups.
    """
    old_list, young_list = list(old), list(young)
    sample = int(population_mean_sample_size(float(len(old_list) + len(young_list))))
    if len(old_list) < sample:
        shuffle(young_list)
    else:
        shuffle(old_list)
    return old_list + young_list, sample


def extrapolate(summed: float, sample: float, total: float) -> float:
    """``Stat.average``: what ``sample`` pods summed to, as the ``total`` pods' sum."""
    if sample <= 0:
        return 0.0
    return summed / sample * total

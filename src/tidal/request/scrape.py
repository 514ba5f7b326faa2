"""One second of a request path's statistics, read from its processes (``spec/knative.md``
§3.3–3.5): Knative's collector scrapes the pods' queue-proxies and receives the activators'
pushes; here the run reads both over loopback.

:func:`scrape_receivers` reads the receivers' queue-proxies (a sample of them once there are more
than three, as Knative's scraper does: :mod:`tidal.scaling.scrape_sample`) and keeps each one's
cumulative counters on it. :func:`scrape_activators` sums what every activator counted itself.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tidal.request.children import Child, get
from tidal.scaling import scrape_sample

__all__ = ["ActivatorLoad", "ReceiverLoad", "RequestSample", "scrape_activators", "scrape_receivers"]


@dataclass(frozen=True, slots=True)
class RequestSample:
    """One second of the source's load, revision-wide (Knative's collector sums)."""

    at: float
    concurrency: float
    rps: float
    held: int = 0
    in_path: bool = True
    ready: int = 0  # receivers that answered the probe
    refused: int = 0  # 503s so far: the activator's (held too many or too long) and the receivers'
    longest_wait: float = 0.0  # seconds the longest request of the second waited for a receiver
    accepted: int = 0  # messages stored so far
    unauthorized: int = 0  # requests refused for their token so far (401, 403: source.http.auth)

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


@dataclass(frozen=True, slots=True)
class ReceiverLoad:
    """The receivers' own load (minus what the activators forwarded), scaled up from the sample."""

    concurrency: float
    rps: float
    answered: int
    ready: int


@dataclass(frozen=True, slots=True)
class ActivatorLoad:
    concurrency: float
    rps: float
    held: int
    in_path: bool
    longest_wait: float
    rejected: int
    unauthorized: int = 0  # 401s and 403s (source.http.auth)


def scrape_receivers(targets: Sequence[Child], now: float, window: float, rng: random.Random) -> ReceiverLoad:
    """Read the ready ``targets`` (older than ``window`` first); each answer also updates the
    receiver's accepted, refused and peak counters. A receiver that fails to answer (going
    away) is left out of the population and the next in the order stands in."""
    ready = [r for r in targets if r.ready_at is not None]
    old = [r for r in ready if r.ready_at is not None and now - r.ready_at >= window]
    young = [r for r in ready if r.ready_at is not None and now - r.ready_at < window]
    order, sample_size = scrape_sample.scrape_order(old, young, rng.shuffle)
    concurrency = rps = 0.0
    answered = failed = 0
    for r in order:
        if answered >= sample_size:
            break
        try:
            stat = get(r.url + "_tidal/stats", timeout=0.5)
        except (OSError, ValueError):
            failed += 1
            continue
        answered += 1
        r.accepted = int(stat["accepted"])
        r.extra["refused"] = int(stat["refused"])
        r.extra["unauthorized"] = int(stat.get("unauthorized", 0))
        r.extra["peak_inside"] = int(stat["peak_inside"])
        concurrency += stat["concurrency"] - stat["proxied_concurrency"]
        rps += stat["rps"] - stat["proxied_rps"]
    if answered:  # the sample's sums as the population's (Stat.average), the gone left out
        concurrency = scrape_sample.extrapolate(concurrency, answered, len(ready) - failed)
        rps = scrape_sample.extrapolate(rps, answered, len(ready) - failed)
    return ReceiverLoad(concurrency, rps, answered, len(ready))


def scrape_activators(activators: Sequence[Child]) -> ActivatorLoad:
    """Every activator's one-second report, summed (Knative's collector adds the activators'
    pushes); one that does not answer counts as in the path, the safe side."""
    concurrency = rps = wait = 0.0
    held = rejected = unauthorized = 0
    in_path = False
    for activator in activators:
        try:
            a = get(f"http://127.0.0.1:{activator.port}/_tidal/stats", timeout=0.5)
        except (OSError, ValueError):
            in_path = True
            continue
        concurrency += a["concurrency"]
        rps += a["rps"]
        held += int(a["held"])
        in_path = in_path or bool(a["in_path"])
        wait = max(wait, float(a["longest_wait"]))
        rejected += int(a["rejected"])
        unauthorized += int(a.get("unauthorized", 0))
    return ActivatorLoad(concurrency, rps, held, in_path, wait, rejected, unauthorized)

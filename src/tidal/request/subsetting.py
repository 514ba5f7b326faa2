"""Activator subsetting (``pkg/activator/net/throttler.go``): with several activators in front of
one source, each balances over its own slice of the receivers, and its capacity is that slice's.

Knative runs several activators; each learns how many there are and its own index from the
public endpoints (its address's place in the sorted list, :func:`infer_index`), and takes the
receivers (sorted by address) that :func:`assign_slice` gives it. A request any activator
holds can then only go to receivers no other activator counts on, so their breakers never
over-commit a receiver between them. Tidal starts its activators itself and numbers them
0..n-1 (their names sort that way), so :func:`infer_index` applies to those names.

Pure functions of their arguments: the throttler calls them on every update.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["MAX_CAPACITY", "assign_slice", "calculate_capacity", "infer_index", "pick_indices"]

T = TypeVar("T")

MAX_CAPACITY = (1 << 31) - 1  # revisionMaxConcurrency / queue.MaxBreakerCapacity (math.MaxInt32)


def infer_index(activators: Sequence[str], me: str) -> int:
    """``inferIndex``: this activator's index in the **sorted** list of activators, or -1 when it
    is not (yet) among them (then it takes every receiver, as upstream does while unassigned)."""
    i = bisect.bisect_left(activators, me)
    if i == len(activators) or activators[i] != me:
        return -1
    return i


def pick_indices(receivers: int, index: int, activators: int) -> tuple[int, int, int]:
    """``pickIndices``: ``(begin, end, remnants)`` of activator ``index``'s slice of ``receivers``.

    Fewer receivers than activators: each activator gets one, round robin (``index % receivers``).
    Otherwise equal slices of ``receivers // activators``, and the ``receivers % activators``
    left over at the end are handed out one each to the first activators (:func:`assign_slice`).
    """
    if activators > receivers:
        begin = index % receivers
        return begin, begin + 1, 0
    size = receivers // activators
    begin = index * size
    return begin, begin + size, receivers % activators


def assign_slice(trackers: Sequence[T], index: int, activators: int) -> list[T]:
    """``assignSlice``: the receivers (sorted by address) this activator balances over."""
    n = len(trackers)
    if index == -1 or n <= 1 or activators == 1:
        return list(trackers)
    begin, end, remnants = pick_indices(n, index, activators)
    mine = list(trackers[begin:end])
    if remnants > 0:
        tail = trackers[n - remnants :]
        if len(tail) > index:
            mine.append(tail[index])
    return mine


def calculate_capacity(cc: int, assigned: int, receivers: int, activators: int) -> int:
    """``calculateCapacity`` with pod addressing (every Tidal receiver has its own address):
    ``cc × assigned``; with CC 0 (or above the cap) the "infinite" capacity once any receiver is
    ready. ``activators`` only divides the capacity when there are no trackers to slice (Knative's
    cluster-IP routing): ``max(1, cc × receivers // max(1, activators))``."""
    if assigned > 0:
        capacity = cc * assigned
    else:
        capacity = cc * receivers
        if capacity > 0:
            capacity = max(1, capacity // max(1, activators))
    if receivers > 0 and (cc == 0 or capacity > MAX_CAPACITY):
        capacity = MAX_CAPACITY
    return capacity

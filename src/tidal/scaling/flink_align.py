"""Flink's parallelism alignment: a computed parallelism moved to one that splits the key groups
(or a source's partitions) evenly, as the Flink Kubernetes operator's autoscaler does it
(``flink-autoscaler``, ``alignment/ParallelismAligner.java`` and ``BuiltInAlignmentMode.java``,
FLIP-586).

Alignment applies to a vertex that reads partitions whose count is known (a Kafka source) or
reads keyed input (Flink's ``HASH`` ship strategy; in Tidal a reduce vertex over its
``partitions``). ``N`` is that count. For a scale-up it looks in ``[target, min(N, upper)]``,
for a scale-down in ``[target, current]``, upward from the target, for the first parallelism
that divides ``N`` (``EVENLY_SPREAD``) or, with ``BALANCED`` (Flink's default), also for the
first that lowers each subtask's share ``N // p``.

Rounding must never turn a decision around (FLINK-39299, "Inconsistent vertex parallelism
alignment logic", Critical): before the fix a scale-down could be "aligned" up past the current
parallelism, and a scale-up down below it. The search regions above cannot cross ``current``;
when they find nothing, the built-in modes keep the computed target and Flink's deprecated
blocking modes (``scaling.key-group.partitions.adjust.mode``, kept here because Flink's own
tests are written against them) fall back to a relaxed search downward and hold at the current
parallelism if that would cross it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Alignment", "AlignmentMode", "align"]


class AlignmentMode(StrEnum):
    """``job.autoscaler.scaling.parallelism-alignment.mode`` (and the deprecated legacy keys)."""

    BALANCED = "BALANCED"  # Flink's default: a divisor, or the first that reduces per-subtask load
    EVENLY_SPREAD = "EVENLY_SPREAD"  # a divisor of N, else the target unchanged
    OFF = "OFF"  # the target as computed
    # scaling.key-group.partitions.adjust.mode (deprecated in Flink): blocking when nothing fits
    LEGACY_EVENLY_SPREAD = "LEGACY_EVENLY_SPREAD"
    LEGACY_MAXIMIZE_UTILISATION = "LEGACY_MAXIMIZE_UTILISATION"


@dataclass(frozen=True, slots=True)
class Alignment:
    """What :func:`align` returned and why (``how`` names the step that chose it)."""

    parallelism: int
    how: str  # "not applicable", "off", "aligned", "target kept", "relaxed", "blocked"


def align(
    mode: AlignmentMode,
    *,
    current: int,
    target: int,
    partitions: int,
    max_parallelism: int,
    lower: int,
    upper: int,
    keyed: bool = False,
) -> Alignment:
    """The parallelism to apply for the clamped ``target`` (``target != current``).

    ``partitions``: a source's partition count (``<= 0``: not a source, or unknown);
    ``max_parallelism``: the key groups; ``lower``/``upper``: the vertex's parallelism limits.
    Never returns a value on the other side of ``current`` from ``target``.
    """
    if partitions <= 0 and not keyed:
        return Alignment(target, "not applicable")
    if mode == AlignmentMode.OFF:
        return Alignment(target, "off")
    n = partitions if partitions > 0 else max_parallelism
    up = target > current
    cap = min(n, max_parallelism, upper)
    end = cap if up else min(current, cap)
    load_reducing = mode in (AlignmentMode.BALANCED, AlignmentMode.LEGACY_MAXIMIZE_UTILISATION)
    for p in range(target, end + 1):
        if n % p == 0 or (load_reducing and n // p < n // target):
            return Alignment(p, "aligned")
    if mode in (AlignmentMode.BALANCED, AlignmentMode.EVENLY_SPREAD):
        return Alignment(target, "target kept")
    # Legacy: search downward for where each subtask's share grows, snap up to a divisor.
    p = target
    while p > 0:
        if n // p > n // target:
            if n % p != 0:
                p += 1
            break
        p -= 1
    candidate = max(p, lower)
    if (up and candidate <= current) or (not up and candidate >= current):
        return Alignment(current, "blocked")
    return Alignment(candidate, "relaxed")

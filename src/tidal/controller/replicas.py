"""The one writer of a vertex's replica count: the controller package.

Three kinds of write set a vertex's replicas, and all three are here:

- the autoscaler's decisions, at every tick (:class:`~tidal.controller.loop.Controller`, through
  its :class:`~tidal.controller.ports.Actuator`; under ``--dry-run`` they are only recommended);
- a person's: the scale subresource, ``tidal scale``, pause and resume
  (:meth:`~tidal.controller.loop.Controller.external`,
  :meth:`~tidal.controller.loop.Controller.lifecycle`), applied even under ``--dry-run`` and
  recorded as decisions with who wrote them, so "why did it scale?" has one answer;
- the run's first start (:func:`seed_replicas`): each vertex's spec ``replicas``, once.

Everything else (the readers' admission, the executor allocator, the status, the API) reads the
count; a unit test fails when a module outside this package writes it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

__all__ = ["DryRunActuator", "ReplicaStore", "seed_replicas"]


class ReplicaStore(Protocol):
    """Where the replica counts live (the run's control record)."""

    def known(self, vertex: str) -> bool: ...

    def set_replicas(self, vertex: str, replicas: int) -> object: ...


def seed_replicas(store: ReplicaStore, vertices: Iterable[tuple[str, int]]) -> None:
    """Give each ``(vertex, replicas)`` its spec's count if the store has none yet: a restart keeps
    the count the run had (the autoscaler's or a person's), not the spec's starting one."""
    for vertex, replicas in vertices:
        if not store.known(vertex):
            store.set_replicas(vertex, replicas)


class DryRunActuator:
    """``--dry-run``'s actuator: the autoscaler's decisions are computed, shown and logged, never
    applied (a person's writes still are: the controller's ``operator`` port)."""

    def __init__(self) -> None:
        self.recommended: dict[str, int] = {}

    def set_replicas(self, vertex: str, replicas: int) -> None:
        self.recommended[vertex] = replicas

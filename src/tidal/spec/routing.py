"""Conditional forwarding: tags on messages, ``conditions`` on edges, as Numaflow has them.

A UDF may put tags on each message it returns (a :class:`tidal.Message`, or pynumaflow's
``Message(value, tags=[...])``). An edge with ``conditions`` takes only the messages whose tags
match them; an edge without takes every message. A message that matches no output edge is
dropped, as Numaflow drops it, and counted (``dropped`` in status and the report). A message
tagged :data:`DROP` (pynumaflow's ``Message.to_drop()``) is dropped before any edge is asked.

The rule is Numaflow's, from ``numaflow-core``'s ``shared/forward.rs``:

- no ``conditions``, or ``conditions.tags.values`` empty: forward;
- a message with no tags is matched as having an empty set of tags;
- ``operator`` (default ``or``): ``or`` forwards when any of ``values`` is among the message's
  tags, ``and`` when all are, ``not`` when none is.

Numaflow evaluates an unknown operator as "do not forward"; Tidal refuses it in the spec instead
(a typo would silently drop every message of the edge). Pure: the spec checks it and the
writer's tasks call :func:`forwards` on every message of an edge that has conditions.
"""

from __future__ import annotations

from collections.abc import Collection

from pydantic import Field

from tidal.contracts import DROP
from tidal.spec.base import Model

__all__ = [
    "DROP",
    "ForwardConditions",
    "Route",
    "TagConditions",
    "forwards",
    "route",
    "tags_match",
]


Route = tuple[str, tuple[str, ...]]  # (operator, values): an edge's conditions as plain data


def tags_match(operator: str, values: Collection[str], tags: Collection[str]) -> bool:
    """Numaflow's ``check_operator_condition`` (with its "no values: forward" rule)."""
    if not values:
        return True
    if operator == "and":
        return all(v in tags for v in values)
    found = any(v in tags for v in values)
    return found if operator == "or" else not found


class TagConditions(Model):
    """``conditions.tags``: ``operator`` (``or``, ``and``, ``not``; default ``or``) over ``values``."""

    operator: str = Field("or", pattern="^(or|and|not)$")
    values: list[str] = Field(default_factory=list)

    def matches(self, tags: Collection[str]) -> bool:
        return tags_match(self.operator, self.values, tags)


class ForwardConditions(Model):
    """An edge's ``conditions:``: Numaflow has only ``tags``."""

    tags: TagConditions


def forwards(tags: Collection[str] | None, conditions: ForwardConditions | None) -> bool:
    """Whether a message with ``tags`` (None: untagged) goes along an edge with ``conditions``."""
    if conditions is None:
        return True
    return conditions.tags.matches(tags or ())


def route(conditions: ForwardConditions | None) -> Route | None:
    """An edge's conditions as plain data for the tasks (None: every message goes)."""
    if conditions is None:
        return None
    return conditions.tags.operator, tuple(conditions.tags.values)

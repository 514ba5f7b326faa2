"""Numaflow's ``spec.sideInputs`` as Tidal's ``sideInputs``: each retriever's container becomes
its pynumaflow handler, found as a UDF's is (:class:`~tidal.spec.manifest_handlers.HandlerFinder`:
the handlers file by the side input's name or by image); its trigger carries over as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tidal import errors
from tidal.spec.manifest_handlers import HandlerFinder

__all__ = ["convert_side_inputs"]

_RUNS = ("side input retriever", "side-input retriever", "module:Class (a pynumaflow SideInput)")


def convert_side_inputs(
    found: HandlerFinder, skip: Callable[[str, str], None], sides: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The pipeline's side inputs; ``found`` names their handlers, ``skip`` lists what is not
    honoured (a retriever's volumes and container settings: it runs in the driver)."""
    out: list[dict[str, Any]] = []
    for k, side in enumerate(sides):
        at = f"spec.sideInputs[{k}]"
        name = side.get("name")
        if not isinstance(name, str) or not name:
            raise errors.SpecError(f"{at}.name", "is missing", "name the side input")
        container = side.get("container") or {}
        handler = found.container(container, f"{at}.container", name, {}, _RUNS)
        for key in container:
            if key not in ("image", "imagePullPolicy"):
                skip(f"{at}.container.{key}", "a container setting: the retriever runs in Tidal's driver")
        if side.get("volumes"):
            skip(f"{at}.volumes", "Kubernetes volumes: the retriever runs in Tidal's driver")
        trigger = side.get("trigger")
        if not isinstance(trigger, Mapping) or not trigger.get("schedule"):
            raise errors.SpecError(
                f"{at}.trigger.schedule",
                "is missing",
                "give a schedule, e.g. trigger: {schedule: '@every 30s'}",
            )
        converted: dict[str, Any] = {"schedule": trigger["schedule"]}
        if trigger.get("timezone"):
            converted["timezone"] = trigger["timezone"]
        out.append({"name": name, "pynumaflow": handler, "trigger": converted})
    return out

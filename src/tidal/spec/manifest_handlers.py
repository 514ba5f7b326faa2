"""Which pynumaflow handler a Numaflow container runs as, in a manifest Tidal converts.

Tidal runs Python, not images: a ``udf``, ``transformer``, ``udsource`` or ``udsink`` container
runs as the handler named, in this order, by the vertex's annotation ``tidal.dev/handler``, by
the handlers file (a vertex name, an image, the image without its registry and tag, or that
without Numaflow's ``numaio/`` organisation), or, for Numaflow's own example images, by Tidal's
Python versions of them (:data:`IMAGES`). A handlers-file key that misses by a little is an error
naming the closest name, never a silent miss: the container would run the example handler, or
none.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from typing import Any

from tidal import errors

__all__ = ["HANDLER_ANNOTATION", "IMAGES", "HandlerFinder"]

HANDLER_ANNOTATION = "tidal.dev/handler"
IMAGES = {  # Numaflow's example images → the pynumaflow handler shipped with Tidal
    "numaflow-go/map-cat": "tidal.examples.numaflow:cat",
    "numaflow-go/map-even-odd": "tidal.examples.numaflow:even_odd",
    "numaflow-go/map-flatmap": "tidal.examples.numaflow:flatmap",
    "numaflow-go/map-filter-id": "tidal.examples.numaflow:filter_id",
    "numaflow-go/map-retry": "tidal.examples.numaflow:retry",
    "numaflow-python/map-even-odd": "tidal.examples.numaflow:even_odd",
    "numaflow-python/map-flatmap": "tidal.examples.numaflow:flatmap",
    "numaflow-python/map-forward-message": "tidal.examples.numaflow:cat",
    "numaflow-rs/simple-source": "tidal.examples.numaflow:SimpleSource",
    "numaflow-go/source-simple-source": "tidal.examples.numaflow:SimpleSource",
    "numaflow-python/simple-source": "tidal.examples.numaflow:SimpleSource",
    "numaflow-go/reduce-sum": "tidal.examples.numaflow:reduce_sum",
    "numaflow-go/reduce-counter": "tidal.examples.numaflow:reduce_counter",
    "numaflow-python/reduce-counter": "tidal.examples.numaflow:reduce_counter",
    "numaflow-go/fb-sink-log": "tidal.examples.numaflow:fallback_sink",
    "numaflow-go/on-success-log": "tidal.examples.numaflow:on_success_sink",
    "numaflow-go/sink-failure": "tidal.examples.numaflow:failing_sink",
    "numaflow-rs/map-bypass-cat": "tidal.examples.numaflow:bypass_cat",
    # side inputs (tidal.examples.numaflow_side_inputs): retrievers, and the UDFs that read them
    "numaflow-python/sideinput-example": "tidal.examples.numaflow_side_inputs:ExampleSideInput",
    "numaflow-python/udf-sideinput-example": "tidal.examples.numaflow_side_inputs:SideInputHandler",
    "numaflow-go/map-sideinput": "tidal.examples.numaflow_side_inputs:EvenOddTicker",
    "numaflow-go/map-sideinput-udf": "tidal.examples.numaflow_side_inputs:map_side_input",
}


class HandlerFinder:
    """Finds containers' handlers, and remembers which handlers-file keys it used (``skip``
    lists what is not honoured, as the converter's)."""

    def __init__(self, handlers: Mapping[str, str], skip: Callable[[str, str], None]) -> None:
        self.handlers = dict(handlers)
        self.skip = skip
        self.names: set[str] = set()  # every name a handlers-file key could have matched
        self.used: set[str] = set()  # the handlers-file keys that named a handler

    def find(self, image: str, vertex: str, annotations: Mapping[str, Any]) -> str | None:
        """The pynumaflow handler a container runs as: the vertex's annotation, the handlers file
        (by vertex, image, image without its registry and tag, or that without Numaflow's
        ``numaio/`` organisation), else Numaflow's example image."""
        bare = without_registry(image)
        short = bare.split("/", 1)[-1] if bare.startswith("numaio/") else bare
        keys = [vertex, image, bare, short] if image else [vertex]
        self.names.update(k for k in keys if k)
        if annotations.get(HANDLER_ANNOTATION):
            return str(annotations[HANDLER_ANNOTATION])
        for key in keys:
            if key and key in self.handlers:
                self.used.add(key)
                return self.handlers[key]
        found = IMAGES.get(short)
        return str(found) if found else None

    def unused(self) -> None:
        """A handlers-file key that matched nothing is refused when it is close to a name that
        would have matched (a typo, a missing organisation: the container then silently runs
        Numaflow's example handler, or none); one close to nothing is listed as not used."""
        for key in sorted(set(self.handlers) - self.used):
            if key in self.names:  # the vertex's annotation came first
                self.skip(
                    f"handlers[{key}]", f"the vertex's {HANDLER_ANNOTATION} annotation names its handler"
                )
                continue
            close = difflib.get_close_matches(key, sorted(self.names), n=1, cutoff=0.75)
            if close and close[0] not in self.used:
                raise errors.SpecError(
                    f"handlers[{key}]",
                    "matches no vertex or image of this manifest",
                    f"did you mean {close[0]!r}? A key is a vertex name, an image, or an image "
                    "without its registry and tag (quay.io/numaio/numaflow-go/redis-sink:stable → "
                    "numaflow-go/redis-sink)",
                )
            self.skip(f"handlers[{key}]", "matches no vertex or image of this manifest")

    def container(
        self,
        container: Mapping[str, Any],
        at: str,
        vertex: str,
        annotations: Mapping[str, Any],
        runs: tuple[str, str, str],
    ) -> str:
        """The handler a ``udf``, ``udsource`` or ``udsink`` container runs as, listed as not
        honoured (no containers); refused when none is named. ``runs``: what the container is, what
        its handler is called, and what the annotation must name."""
        what, called, names = runs
        image = str(container.get("image", ""))
        handler = self.find(image, vertex, annotations)
        if not handler:
            bare = without_registry(image)
            near = [
                (key, close[0])
                for key in sorted(self.handlers)
                for close in [difflib.get_close_matches(key, [vertex, bare], n=1, cutoff=0.75)]
                if close
            ]
            fix = (
                f"the handlers file's key {near[0][0]!r} is close: write it as {near[0][1]!r}"
                if near
                else f"annotate the vertex {HANDLER_ANNOTATION}: {names}, or map the image or the vertex "
                "in a handlers file (tidal convert --handlers)"
            )
            raise errors.SpecError(
                f"{at}.image", f"{image or 'no image'}: no Python handler for this {what}", fix
            )
        if image:
            self.skip(f"{at}.image", f"no containers: {image} runs as the pynumaflow {called} {handler}")
        return handler


def without_registry(image: str) -> str:
    """An image without its registry, tag and digest: ``quay.io/numaio/numaflow-go/map-cat:stable``
    → ``numaio/numaflow-go/map-cat``."""
    return re.sub(r"^[^/]+\.[^/]+/", "", image.split("@", maxsplit=1)[0]).rsplit(":", 1)[0]

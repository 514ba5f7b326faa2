"""A ``policy: kpa`` vertex's :class:`~tidal.scaling.KpaSpec`, from its ``kpa:`` block.

The keys are Knative's ``autoscaling.knative.dev/…`` annotation keys (the prefix may be left
out), with Knative's meanings. ``min-scale``/``max-scale`` default to ``scale.min``/``max``.

* A stream vertex (generator, Kafka or user source, UDF, sink) has no request concurrency: its
  KPA runs on the arrival rate (``metric: rps``), and ``target`` — the messages/s one replica
  should take — is required.
* An HTTP source has what Knative has: ``metric: concurrency`` (the default) or ``rps`` on the
  measured requests, Knative's default targets, and ``containerConcurrency`` from
  ``source.http``.
"""

from __future__ import annotations

from typing import Any

from tidal import errors
from tidal.scaling import KpaMetric, KpaSpec
from tidal.spec.model import VertexSpec
from tidal.spec.scale import numaflow_scale

__all__ = ["kpa_spec"]

# config-autoscaler keys with no annotation of their own: read from the same ``kpa:`` block.
CONFIG_ONLY = frozenset(
    {
        "container-concurrency-target-percentage", "container-concurrency-target-default",
        "requests-per-second-target-default", "stable-window", "max-scale-up-rate", "max-scale-down-rate",
        "enable-scale-to-zero", "scale-to-zero-grace-period", "activator-capacity",
        "allow-zero-initial-scale", "max-scale-limit",
    }
)  # fmt: skip


def kpa_spec(v: VertexSpec, at: str = "") -> KpaSpec:
    at = at or f"vertices[{v.name}]"
    keys = {str(k).removeprefix("autoscaling.knative.dev/"): value for k, value in v.kpa.items()}
    http = v.source.http if v.source is not None else None
    fields: dict[str, Any] = {}
    if http is not None:
        metric = str(keys.get("metric", "concurrency"))
        if metric not in ("concurrency", "rps"):
            raise errors.SpecError(
                f"{at}.kpa.metric",
                f"{metric!r} is not a metric of the request path",
                "use concurrency or rps",
            )
        fields["metric"] = KpaMetric(metric)
        fields["container_concurrency"] = http.container_concurrency
    else:
        if str(keys.get("metric", "rps")) != "rps":
            raise errors.SpecError(
                f"{at}.kpa.metric",
                "a stream vertex has no request concurrency",
                "use metric: rps (the default)",
            )
        if "target" not in keys:
            raise errors.SpecError(
                f"{at}.kpa.target",
                "is required with policy: kpa",
                "give the messages/s one replica should take",
            )
        fields["metric"] = KpaMetric.RPS
    scale = numaflow_scale(v.scale, at)
    if "min-scale" not in keys:
        fields["min_scale"] = scale.min
    if "max-scale" not in keys:
        fields["max_scale"] = scale.max
    try:
        return KpaSpec.from_knative(
            config={k: v for k, v in keys.items() if k in CONFIG_ONLY},
            annotations={k: v for k, v in keys.items() if k != "metric" and k not in CONFIG_ONLY},
            **fields,
        )
    except errors.SpecError as exc:
        raise errors.SpecError(f"{at}.{_as_written(exc.path, keys)}", exc.problem, exc.fix) from None


def _as_written(path: str, keys: dict[str, Any]) -> str:
    """``kpa.stableWindow`` (KpaSpec's name) as the user wrote it: ``kpa.stable-window`` or
    ``kpa.window``."""
    field = path.removeprefix("kpa.")
    kebab = "".join(f"-{c.lower()}" if c.isupper() else c for c in field)
    for written in (kebab, "window" if kebab == "stable-window" else kebab):
        if written in keys:
            return f"kpa.{written}"
    return path

"""``cluster:`` — the pipeline on a Spark cluster manager (docs/cluster.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from tidal.spec.base import Model as _Model

__all__ = ["DYNAMIC_ALLOCATION", "ClusterSpec"]

DYNAMIC_ALLOCATION = "spark.dynamicAllocation.enabled"


class ClusterSpec(_Model):
    """``cluster:`` — run on a Spark cluster manager, where replicas become executors.

    Without ``master`` (and without ``tidal run --master/--cluster``) the pipeline runs in local
    mode and this block is ignored. ``conf`` passes Spark settings through, except Spark's own
    dynamic allocation: with it on, Spark owns the executor target and ignores Tidal's requests.
    """

    master: str | None = Field(None, pattern=r"^spark://[^/\s]+:\d+$")
    executor_cores: int = Field(1, ge=1, le=256)
    executor_memory: str = Field("1g", pattern=r"^\d+[kmgt]?$")
    min_executors: int = Field(0, ge=0, le=10_000)
    max_executors: int = Field(8, ge=1, le=10_000)
    shrink_wait_seconds: float = Field(30.0, ge=0, le=3600)
    # A vertex with nothing pending here or upstream that processed nothing this long needs no
    # executor (its replicas stay): executors go when the work does, not a cooldown later
    # (docs/cluster.md).
    executor_idle_seconds: float = Field(10.0, ge=0, le=86_400)
    # The next executor must raise what the sinks deliver, while executors are the limit, by
    # this share of one executor's delivery, or no more are asked for (0, the default: off; try
    # 0.25; docs/cluster.md).
    executor_payoff: float = Field(0.0, ge=0, le=10)
    # How the executors' JVMs compile: ``quick`` (C1 only: they start ~3 s sooner, JVM code runs
    # slower), ``full``, or ``auto`` — quick unless a step or sink runs in the JVM (tidal.spark.cluster.jit).
    executor_jit: Literal["auto", "quick", "full"] = "auto"
    # A registering executor runs a tiny job first that starts its Python workers, so a vertex's
    # first micro-batch there does not pay for it (4-5 s on a loaded box; tidal.spark.cluster.warm).
    warm_executors: bool = True
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("conf")
    @classmethod
    def _no_dynamic_allocation(cls, conf: dict[str, str]) -> dict[str, str]:
        if str(conf.get(DYNAMIC_ALLOCATION, "false")).strip().lower() == "true":
            raise ValueError(
                f"{DYNAMIC_ALLOCATION}: true would make Spark ignore Tidal's executor requests "
                "(with dynamic allocation on, Spark owns the executor target and sees only task "
                "backlog, not buffers); remove it — Tidal sets it to false and sizes executors itself"
            )
        return conf

    @model_validator(mode="after")
    def _bounds(self) -> ClusterSpec:
        if self.min_executors > self.max_executors:
            raise ValueError(
                f"minExecutors {self.min_executors} is above maxExecutors {self.max_executors}: "
                "raise maxExecutors or lower minExecutors"
            )
        return self

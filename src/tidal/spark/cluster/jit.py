"""How the executors' JVMs compile: quickly (C1 only) where the work is in Python, fully elsewhere.

A new executor on the 2-core box ran its first task 8.2 s after Tidal asked for it; with
``-XX:TieredStopAtLevel=1`` 4.2 s (medians of five in one session, ``tidal bench cluster``'s
scale-up), and 3.3 s over ten scale-ups on a quieter box later. A starting JVM compiles
thousands of Spark's methods, first into profiled code and then again with C2, on the cores
its Python workers and the other executors need; stopping at C1 skips the profiling and the
second compilation, and registration alone went from 4.7 to 1.7 s (medians).

The price is the JVM's own speed once warm: a SQL aggregate over 30 M rows took 8.3 s against
2.5 s (3.4×). Where the pipeline's work is Python (its UDFs, sources and sinks), the executor's
JVM only moves Arrow batches between Python workers and buffers, and the demo's steps on four
executors delivered as many with C1 only (docs/benchmarks.md). A SQL or DataFrame step, or a
Parquet or Delta sink, runs in the JVM: those pipelines keep the full JIT.

``cluster.executorJit``: ``auto`` (default) chooses as above, ``quick`` or ``full`` force it.
The spec's own ``spark.executor.extraJavaOptions`` (``cluster.conf``) replaces Tidal's options
altogether. Neither Numaflow (a pod runs one image) nor Spark's dynamic allocation chooses a
JIT: executors there start with the JVM's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidal.spec.model import PipelineSpec

__all__ = ["QUICK_OPTIONS", "JitChoice", "choose"]

QUICK_OPTIONS = "-XX:TieredStopAtLevel=1"
JVM_SINKS = ("parquet", "delta")
JVM_STEPS = ("sql", "dataframe")


@dataclass(frozen=True)
class JitChoice:
    """``quick`` or ``full``, the Java options that make it, and why (for the run's log)."""

    mode: str
    options: str
    reason: str


def _jvm_work(spec: PipelineSpec) -> list[str]:
    """The vertices whose work runs in the executors' JVMs, as ``name (what)``."""
    found = []
    for v in spec.vertices:
        if v.udf is not None and v.udf.engine in JVM_STEPS:
            found.append(f"{v.name} ({v.udf.engine} step)")
        if v.sink is not None and v.sink.kind in JVM_SINKS:
            found.append(f"{v.name} ({v.sink.kind} sink)")
    return found


def choose(spec: PipelineSpec) -> JitChoice:
    """The executors' JIT for this pipeline: ``cluster.executorJit``, ``auto`` resolved."""
    mode = spec.cluster.executor_jit
    if mode == "quick":
        return JitChoice("quick", QUICK_OPTIONS, "cluster.executorJit: quick")
    if mode == "full":
        return JitChoice("full", "", "cluster.executorJit: full")
    jvm = _jvm_work(spec)
    if jvm:
        return JitChoice("full", "", f"auto: work in the JVM ({', '.join(jvm)})")
    return JitChoice(
        "quick", QUICK_OPTIONS, "auto: every step runs in Python (C1 only: executors start sooner)"
    )

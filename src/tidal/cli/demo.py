"""``tidal demo``: the smallest real thing Tidal runs today, end to end on Spark.

A generator fills the SQLite buffer ``in``; a Spark Structured Streaming query reads it through
Tidal's buffer data source, enriches every message with a Python (Arrow) function, and writes to
the buffer ``out``. Halfway through, the vertex's replicas go from 1 to 2 in the control record,
and the next micro-batches run 2 tasks instead of 1. At the end the demo checks that every
message arrived exactly once and reports timings.

The autoscaling demo (a load wave, scale-up, scale to zero and back, a report with plots) is
issue #6; this one exercises the runtime pieces it will stand on.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.table import Table

MESSAGES = 40_000
READ_BATCH_SIZE = 2_000


def _enrich(batches: Iterator[object]) -> Iterator[object]:
    """The demo's UDF: upper-case the payload (Arrow, vectorised)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for batch in batches:
        assert isinstance(batch, pa.RecordBatch)
        text = pc.cast(batch.column("payload"), pa.string())
        upper = pc.cast(pc.utf8_upper(text), pa.binary())
        yield pa.RecordBatch.from_arrays(
            [batch.column("seq"), batch.column("id"), upper], names=batch.schema.names
        )


def run(run_root: str | Path = "runs") -> int:
    from tidal import log
    from tidal.isb import BufferLimits
    from tidal.isb.control import ControlStore
    from tidal.isb.sqlite import SqliteStore

    log.configure()
    console = Console()
    run_dir = Path(run_root) / time.strftime("demo-%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    db = run_dir / "pipeline.db"
    console.rule("[bold]Tidal demo[/]: generator → enrich (Python UDF on Spark) → out")

    store = SqliteStore(db)
    source = store.create("in", BufferLimits(max_length=100_000))
    out = store.create("out", BufferLimits(max_length=100_000))
    control = ControlStore(db)
    control.set_replicas("enrich", 1)
    started = time.perf_counter()
    for i in range(0, MESSAGES, 1000):
        source.append(
            [f"order {n:08d} from tidal".encode() for n in range(i, i + 1000)],
            [f"m{n}" for n in range(i, i + 1000)],
        )
    console.print(
        f"generated {MESSAGES} messages into buffer [cyan]in[/] in {time.perf_counter() - started:.2f} s"
    )

    started = time.perf_counter()
    from tidal.spark.datasource import BufferDataSource
    from tidal.spark.session import build_session
    from tidal.spark.vertex import start_vertex

    spark = build_session("tidal-demo")
    spark.dataSource.register(BufferDataSource)
    session_s = time.perf_counter() - started
    console.print(f"Spark session (local[2], loopback, UI off) ready in {session_s:.1f} s")

    query = start_vertex(
        spark,
        db=db,
        vertex="enrich",
        source="in",
        sink="out",
        checkpoint=run_dir / "checkpoints" / "enrich",
        read_batch_size=READ_BATCH_SIZE,
        transform=_enrich,
    )
    started = time.perf_counter()
    switched = False
    try:
        # Done when the input is committed: Spark commits the source only after the sink committed.
        while source.stats().committed < MESSAGES:
            if not switched and out.stats().last_seq >= MESSAGES // 4:
                control.set_replicas("enrich", 2)
                switched = True
                console.print(
                    "[yellow]replicas 1 → 2[/] (control record); the next micro-batches split in 2 tasks"
                )
            if time.perf_counter() - started > 300:
                raise TimeoutError("the demo pipeline did not drain within 300 s")
            if query.exception() is not None:
                raise RuntimeError(f"query failed: {query.exception()}")
            time.sleep(0.2)
        elapsed = time.perf_counter() - started
    finally:
        query.stop()
        spark.stop()

    batches = control.batches("enrich")
    table = Table(title="micro-batches of vertex 'enrich', by replica count")
    for column in ("replicas", "micro-batches", "tasks per batch", "messages", "messages per batch"):
        table.add_column(column, justify="right")
    for replicas in sorted({b.tasks for b in batches}):
        group = [b for b in batches if b.tasks == replicas]
        rows = sum(b.rows for b in group)
        table.add_row(str(replicas), str(len(group)), str(replicas), str(rows), f"{rows / len(group):,.0f}")
    console.print(table)

    messages = out.read(0, MESSAGES + 1)
    ids = [message_id for _, message_id, _ in messages]
    exactly_once = len(ids) == MESSAGES and len(set(ids)) == MESSAGES
    enriched = all(payload.isupper() or not payload.isalpha() for _, _, payload in messages[:100])
    console.print(
        f"{len(ids)} messages in [cyan]out[/], {len(set(ids))} distinct: "
        + ("[green]exactly once[/]" if exactly_once else "[red]LOST OR DUPLICATED[/]")
    )
    console.print(
        f"drained in {elapsed:.1f} s → {MESSAGES / elapsed:,.0f} messages/s through Spark on 2 cores; "
        f"{len(batches)} micro-batches; tasks per batch seen: {sorted({b.tasks for b in batches})}"
    )
    console.print(f"run directory: {run_dir}")
    store.close()
    control.close()
    return 0 if exactly_once and enriched else 1

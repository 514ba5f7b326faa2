"""What a crash leaves in a checkpoint before its first batch, against Spark itself: Spark refuses
to start batch 0 on it, and starts once :func:`repair_checkpoint` has mended it (stop 66's CI)."""

from __future__ import annotations

import pytest

from tidal.spark.batch.checkpoint_sync import repair_checkpoint


def _run_once(spark, checkpoint) -> int:
    """Start a query on ``checkpoint``, run what is available, and return its last batch id."""
    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 10)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
        if query.exception() is not None:
            raise query.exception()
        return query.lastProgress["batchId"] if query.lastProgress else -1
    finally:
        query.stop()


def _crashed_before_batch_0(tmp_path):
    """A checkpoint as a power cut left it: ``metadata`` empty, ``offsets/0`` never renamed into place."""
    root = tmp_path / "cp"
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text("")
    (root / "offsets" / ".0.6b1f3c2a-0d1e-4c55-9e43-0c1a2b3c4d5e.tmp").write_text("v1\n")
    return root


def test_spark_refuses_batch_0_beside_a_crashs_temporary_file(spark, tmp_path):
    """The premise: without the repair Spark does not start (so the next test can fail)."""
    root = _crashed_before_batch_0(tmp_path)
    (root / "metadata").write_text('{"id":"483704eb-c835-4bc8-a198-6fdadb925968"}')
    with pytest.raises(Exception, match="STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"):
        _run_once(spark, root)


def test_a_mended_checkpoint_starts_at_batch_0_and_commits_it(spark, tmp_path):
    root = _crashed_before_batch_0(tmp_path)
    done = repair_checkpoint(root)
    assert len(done) == 2, done  # the temporary file, and metadata
    assert _run_once(spark, root) >= 0
    assert (root / "commits" / "0").exists()

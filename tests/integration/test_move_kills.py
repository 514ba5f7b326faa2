"""A reduce vertex's state move survives a SIGKILL of the driver at each of its steps (issue #60):
the driver, a real ``tidal run``, kills itself with SIGKILL at one named step of the move
(:mod:`tidal.failpoints`), the run is started again on its directory, and every window is
delivered once with the input's counts, on the count the checkpoint holds: the old one when the
kill came before Spark's repartition, the new one after it. The kill inside Spark's repartition
(an unfinished repartition batch) is ``test_repartition``'s, made certain on disk."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys

import pytest

from tidal.failpoints import ENV
from tidal.spark.batch.state_partitions import committed_partitions, unfinished_repartition
from tidal.spark.run.pipeline import PipelineRun

from .test_reduce import _tidal_counts, _write
from .test_repartition import STAGE_1, STAGE_2, T0, _expected, _moves, _scale, _spec
from .waits import eventually

pytestmark = [pytest.mark.spark, pytest.mark.long]

# step → the partitions the checkpoint holds after the kill, and what the restart's event says
STEPS = {
    "move:recorded": (1, "cut by a driver stop before Spark's repartition began"),
    "move:stopped": (1, "cut by a driver stop before Spark's repartition began"),
    "move:repartitioned": (2, "completed: the driver stopped after Spark's repartition"),
    "move:saved": (2, None),
    "move:restarted": (2, None),
}


@pytest.mark.parametrize("step", list(STEPS))
def test_a_move_killed_at_each_step_delivers_every_window_once_after_the_restart(spark, tmp_path, step):
    lines, run_dir = tmp_path / "events.txt", tmp_path / "run"
    out, checkpoint = run_dir / "out.jsonl", run_dir / "checkpoints" / "count"
    _write(lines, STAGE_1)
    spec = _spec(lines)
    (tmp_path / "moves.json").write_text(json.dumps(spec.model_dump(by_alias=True, exclude_none=True)))
    command = [sys.executable, "-m", "tidal", "run", str(tmp_path / "moves.json"), "--run-dir", str(run_dir),
               "--no-metrics", "--no-live"]  # fmt: skip
    env = {**os.environ, ENV: step, "PYTHONUNBUFFERED": "1"}
    with (tmp_path / "driver.log").open("w") as log:
        driver = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        before_move = _expected(STAGE_1, T0 + 25)

        def first_windows() -> None:
            assert _tidal_counts(out) == before_move

        eventually(first_windows, 240, "the windows before the move", proc=driver, poll=0.5)
        code, text = _scale(run_dir, "count", 2)
        assert code != 0, text  # the driver died answering it
        assert driver.wait(timeout=300) == -signal.SIGKILL, (tmp_path / "driver.log").read_text()[-3000:]
    finally:
        # the rest of its group (Spark's JVM, Python workers): a power cut takes them too
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=60)

    partitions, said = STEPS[step]
    assert committed_partitions(checkpoint) == partitions
    _write(lines, STAGE_2)
    with PipelineRun(spec, run_dir, spark=spark, trigger_seconds=0.25) as run:
        assert unfinished_repartition(checkpoint) is None
        every = _expected(STAGE_1 + STAGE_2, T0 + 100)

        def every_window() -> None:
            assert _tidal_counts(out) == every  # each window once (else _tidal_counts raises)
            progress = run.queries["count"].lastProgress
            assert progress is not None
            assert [op["numShufflePartitions"] for op in progress["stateOperators"]] == [partitions]

        eventually(every_window, 240, "every window after the restart", run=run, poll=0.5)
    assert _tidal_counts(out) == every
    moves = _moves(run_dir)
    if said is None:
        assert moves == [], moves  # the move had ended: its event is what the kill cut
    else:
        [move] = moves
        assert said in move["reason"] and move["inputs"]["by"] == "restart", move

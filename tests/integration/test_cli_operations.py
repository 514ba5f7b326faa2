"""The everyday paths of ``tidal run`` that used to lose data or mislead (issue #16), each in a
subprocess as a user runs it: the quickstart's dry run then real run, another pipeline's run
directory, a binary spec, an invalid name, and what Ctrl-C prints."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from .test_cli import PIPELINE, lines, output, tidal, wait_for

pytestmark = pytest.mark.spark

QUICKSTART = """
name: orders
controller: {{intervalSeconds: 0.5}}
vertices:
  - name: in
    source:
      user: {{class: tidal.examples.sources:LinesSource, options: {{path: {input}}}}}
  - name: parse
    udf: {{map: "tidal.examples.udfs:upper", retries: 2, deadLetter: {{file: {{path: bad.jsonl}}}}}}
    scale: {{min: 0, max: 8, lookbackSeconds: 5}}
  - name: out
    sink: {{file: {{path: totals.jsonl}}}}
edges:
  - {{from: in, to: parse}}
  - {{from: parse, to: out}}
"""


@pytest.mark.long
def test_the_quickstarts_dry_run_then_real_run_lose_nothing(tmp_path):
    data = tmp_path / "orders.jsonl"
    data.write_text("".join(f'{{"id": {i}}}\n' for i in range(1, 301)))
    spec = tmp_path / "pipeline.yaml"
    spec.write_text(QUICKSTART.format(input=data))
    env_cwd = {"cwd": tmp_path}
    # The quickstart, word for word (shorter durations): a dry run, then the run.
    command = ["run", "pipeline.yaml", "--dry-run", "--duration", "10", "--no-metrics"]
    dry = subprocess.run(
        [sys.executable, "-m", "tidal", *command],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        **env_cwd,
    )
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "reads its sources and writes its sinks" in dry.stdout  # it says what it does
    real_dir = tmp_path / "runs" / "orders"
    real = tidal("run", "pipeline.yaml", "--run-dir", "runs/orders", "--no-metrics", "--no-live", **env_cwd)
    try:
        wait_for(lambda: len(lines(real_dir / "totals.jsonl")) >= 300, 150, "every order", real)
    finally:
        real.send_signal(signal.SIGINT)
        out, _ = real.communicate(timeout=90)
    assert sorted(lines(real_dir / "totals.jsonl")) == sorted(f"parse:in:{i}" for i in range(1, 301)), out
    assert not list(tmp_path.glob("orders.jsonl.*")), "the source wrote next to the user's input"
    assert data.read_text().count("\n") == 300  # the input is untouched


def test_another_pipelines_run_directory_is_refused_with_the_way_out(tmp_path):
    first, second = tmp_path / "step1.yaml", tmp_path / "other.yaml"
    first.write_text(PIPELINE.format(rate=1, total=1))
    second.write_text(PIPELINE.format(rate=1, total=1).replace("name: cli", "name: other"))
    from tidal.spark.batch import rundir
    from tidal.spec import load_pipeline

    rundir.claim(tmp_path / "run", load_pipeline(first))
    code, text = output("run", str(second), "--run-dir", str(tmp_path / "run"), "--no-metrics")
    assert code == 2, text
    assert "'cli'" in text and "'other'" in text and "--reset" in text and "--run-dir" in text, text
    assert not (tmp_path / "run" / "pipeline.yaml").exists()  # nothing of it was touched


def test_a_binary_file_given_as_the_spec_is_an_invalid_pipeline(tmp_path):
    spec = tmp_path / "p.yaml"
    spec.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
    code, text = output("run", str(spec))
    assert code == 2, text
    flat = " ".join(text.split())  # rich wraps at 80 columns when piped
    assert "is not a text file" in flat and "Traceback" not in text, text


def test_an_invalid_name_shows_its_whole_pattern(tmp_path):
    spec = tmp_path / "p.yaml"
    spec.write_text(PIPELINE.format(rate=1, total=1).replace("name: cli", "name: Bad_Name"))
    code, text = output("run", str(spec))
    assert code == 2, text
    assert "[a-z0-9]" in text and "Bad_Name" in text, text


def test_ctrl_c_prints_a_few_readable_lines_and_spark_keeps_its_traces_in_the_run_log(tmp_path):
    spec = tmp_path / "p.yaml"
    spec.write_text(PIPELINE.format(rate=3000, total=10_000_000))
    run_dir = tmp_path / "run"
    proc = tidal(
        "run", str(spec), "--run-dir", str(run_dir), "--no-metrics", "--no-live", start_new_session=True
    )
    try:
        wait_for(lambda: len(lines(run_dir / "out.jsonl")) >= 2000, 120, "the first messages", proc)
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
        out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0, out
    noise = [
        line for line in out.splitlines() if "\tat " in line or "Traceback" in line or "Exception" in line
    ]
    assert noise == [], out
    assert len(out.splitlines()) < 80, out
    assert "stopping" in out and "report:" in out
    assert (run_dir / "spark.log").exists() and (run_dir / "report" / "summary.md").exists()


JVM_CALL_INTERRUPTED = """
import os, signal, sys, threading
from tidal.cli import interrupts
from tidal.spark.cluster.session import build_session

spark = build_session("interrupted", "local[1]")
interrupts.install()  # as tidal run does once Spark started (its context took SIGINT)
threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
spark._jvm.java.lang.Thread.sleep(4000)  # a call to the JVM under way when Ctrl-C comes
print("the call finished", flush=True)
try:
    interrupts.checked(lambda: False)()  # the wait loop's next check
except KeyboardInterrupt:
    print("the wait stopped", flush=True)
print("then", spark.range(3).count(), flush=True)  # the connection still works: the run can stop
"""


def test_ctrl_c_during_a_call_to_the_jvm_lets_it_finish_then_stops(tmp_path):
    """PySpark's own SIGINT handler interrupts a py4j call half-way: py4j logs the errors of a
    reentrant read, and a `tidal run` under load once exited 1 with a Py4JError traceback instead
    of draining. Tidal's handler lets the call finish and the wait loop stop."""
    done = subprocess.run(
        [sys.executable, "-c", JVM_CALL_INTERRUPTED], capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.splitlines() == ["the call finished", "the wait stopped", "then 3"], done.stdout
    assert "while sending command" not in done.stderr, done.stderr[-3000:]

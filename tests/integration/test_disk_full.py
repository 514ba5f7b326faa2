"""A full disk under a running pipeline (#56): a clear stop, nothing acknowledged that is not
stored, and a resume once there is room that delivers every record exactly once.

The run directory is on a small tmpfs (mounted for the test: root) nearly filled by a ballast
file; a Kafka source (its broker off that disk, as on its own machine) reads records of 2 KB
until some write of the run (a buffer segment, SQLite, Spark's checkpoint, the file sink) finds no
room. The run must stop with the disk named and exit 1, no traceback. The group's committed
offsets are what Tidal acknowledged: after the ballast is gone, the resumed run must deliver
every record once, which it could not if a commit had run ahead of what was stored.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tidal.testing import delivered, ids_of

from .kafka_broker import MockKafka
from .test_cli import tidal
from .waits import eventually

pytestmark = [
    pytest.mark.spark,
    pytest.mark.long,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root"),
]

COUNT = 3000
PIPELINE = """
name: full
limits: {{readBatchSize: 200}}
controller: {{intervalSeconds: 0.5}}
vertices:
  - name: in
    source: {{kafka: {{bootstrapServers: "{bootstrap}", topic: full, groupId: tidal}}}}
  - {{name: work, udf: {{map: "tidal.examples.udfs:upper"}}}}
  - {{name: file, sink: {{file: {{path: out.jsonl}}}}}}
edges:
  - {{from: in, to: work, chain: false}}
  - {{from: work, to: file, chain: false}}
"""


@pytest.fixture
def small_disk(tmp_path: Path):
    mount = tmp_path / "disk"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_stops_the_run_clearly_and_a_resume_delivers_every_record_once(tmp_path, small_disk):
    kafka = MockKafka()
    try:
        payload = "x" * 2000
        kafka.produce("full", [f'{{"n": {i}, "pad": "{payload}"}}'.encode() for i in range(COUNT)])
        ends = kafka.ends("full")
        spec = tmp_path / "full.yaml"
        spec.write_text(PIPELINE.format(bootstrap=kafka.bootstrap))
        ballast = small_disk / "ballast"
        ballast.write_bytes(b"\0" * (40 << 20))  # 8 MB left: less than the records take twice
        run_dir = small_disk / "run"
        args = ("run", str(spec), "--run-dir", str(run_dir), "--no-metrics", "--no-live")
        first = tidal(*args, start_new_session=True)
        try:
            out, _ = first.communicate(timeout=600)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(first.pid, signal.SIGKILL)
        flat = " ".join(out.split())
        assert first.returncode == 1, (first.returncode, out[-3000:])
        assert "the disk is full" in flat and "--run-dir" in flat, out[-3000:]
        assert "Traceback" not in out, out[-5000:]
        stored = ids_of(delivered(run_dir / "out.jsonl"))
        committed = sum(kafka.committed("full", "tidal").values())
        assert len(stored) < COUNT and committed < COUNT, (len(stored), committed)

        ballast.unlink()  # room again: the same run directory resumes
        expected = {f"work:in:full/{p}/{o}" for p, end in ends.items() for o in range(end)}
        last = tidal(*args, start_new_session=True)

        def every_record_once() -> None:
            ids = ids_of(delivered(run_dir / "out.jsonl"))
            assert len(ids) == len(set(ids)), ("duplicated", len(ids) - len(set(ids)))
            missing = expected - set(ids)
            assert not missing, (len(missing), sorted(missing)[:5])

        try:
            eventually(every_record_once, 600, "every record in the sink after the resume", proc=last, poll=1)
        finally:
            last.send_signal(signal.SIGTERM)
            out, _ = last.communicate(timeout=120)
        assert "Traceback" not in out, out[-5000:]
        every_record_once()
        assert sum(kafka.committed("full", "tidal").values()) == COUNT
    finally:
        kafka.stop()

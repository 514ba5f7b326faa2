"""freeze_imports: the objects alive at the first call leave the collector's reach, once per process."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import gc, os
import pyarrow, tidal.spark.query.datasource  # what a worker holds after its first task
from tidal.spark.batch.heap import freeze_imports

before = gc.get_freeze_count()
freeze_imports()
frozen = gc.get_freeze_count()
kept = [[] for _ in range(1000)]  # a task's objects, created after the freeze
freeze_imports()
again = gc.get_freeze_count()
pid = os.fork()
if pid == 0:  # a forked worker freezes what it holds now, its own task's objects included
    freeze_imports()
    os._exit(0 if gc.get_freeze_count() >= frozen + 1000 else 1)
_, status = os.waitpid(pid, 0)
print(before, frozen, again, os.waitstatus_to_exitcode(status))
"""


def test_freezes_once_per_process_and_again_in_a_forked_child():
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True).stdout
    before, frozen, again, child = (int(x) for x in out.split())
    assert before == 0
    assert frozen > 10_000  # pyarrow's and Tidal's modules, classes and functions
    assert again == frozen  # the second call in the same process leaves later objects alone
    assert child == 0

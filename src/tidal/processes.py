"""Whether a process is still there, by PID: one home for the check every part that starts or
watches processes needs (the standalone cluster's daemons, a buffer's temporary files)."""

from __future__ import annotations

import contextlib
import os

__all__ = ["alive"]


def alive(pid: int, *, reap_child: bool = False) -> bool:
    """``pid`` exists (owned by anyone: another user's process counts). With ``reap_child``, a
    zombie child of this process counts as gone and is reaped; leave it off for a PID whose
    parent may be waiting for its status (``multiprocessing`` joins its own children)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by another user
    if reap_child:
        with contextlib.suppress(ChildProcessError):
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return False
    return True

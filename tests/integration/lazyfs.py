"""A power-cut file system for crash tests: a FUSE pass-through that loses every unsynced byte on demand.

Why: SIGKILL cannot show a durability bug, because the kernel's page cache keeps what a killed
process wrote. A power cut loses everything no fsync made durable. Like Jepsen's LazyFS, this mounts
``mount_dir`` over ``backing_dir`` and keeps written file data in the daemon's memory until it is
synced, so that ``cut()`` drops exactly what a power loss would.

Model (LazyFS's default: the worst case POSIX allows for data, with journaled metadata):

* File data is lazy. A write() lands in an in-memory overlay of the file's inode: a map of 4 KiB
  pages keyed by the backing file's (st_dev, st_ino), so it follows the file through renames and is
  shared by all handles and processes. Reads see the overlay over the backing file: read-your-writes
  for every process, since all go through this one daemon. st_size is the larger of the backing
  size and the end of the furthest unsynced write. A closed file keeps its overlay.
* fsync(2) or fdatasync(2) on any handle of a file (msync and O_SYNC/O_DSYNC writes too: the kernel
  turns them into fsync) writes the file's whole overlay into the backing file and fsyncs it. Only
  that makes data durable: close(2), sync(2) and syncfs(2) persist nothing.
* Metadata is eager: create, mkdir, rmdir, unlink, rename, truncate/ftruncate/O_TRUNC, chmod, chown
  and utimens reach the backing directory at once and survive a cut. A directory fsync is passed
  on (and counted) but changes nothing here, so a *missing* directory fsync is NOT caught.
* So after a cut, a file created and written but never synced exists with its last synced size and
  bytes (empty if none); a file grown by truncate keeps its size, as zeros. A rename moves the inode,
  not data: ``write(tmp); rename(tmp, final)`` with no fsync(tmp) leaves ``final`` empty (or with
  tmp's last synced bytes) and the old ``final`` gone: the ext4 zero-length-file hazard.
* cut() drops every overlay (the daemon refuses all further operations, then is SIGKILLed) and
  unmounts; the backing directory then holds exactly what was synced. close() is a clean unmount:
  it syncs everything first, as unmounting a real disk would. Nothing is written back under memory
  pressure: a test that writes gigabytes without fsync holds them in the daemon's memory.

Kernel side: no direct_io and no writeback cache, so every write(2) reaches the daemon at once; reads
may come from the kernel's page cache (coherent: every change passes through this mount); shared
writable mmap works (SQLite's -shm): the kernel writes dirty mapped pages back into the overlay.
POSIX and flock locks are the kernel's own, right across the processes of this host. hard_remove:
unlinking an open file leaves no .fuse_hidden file behind; use_ino: st_ino is the backing inode
(SQLite identifies files by it). New files belong to the daemon's user (root). Not supported:
symlink, mknod, xattrs, fallocate, RENAME_EXCHANGE (EINVAL). Hard links and RENAME_NOREPLACE are
supported (delta-rs commits a table version with either).

The daemon is ``python lazyfs.py BACKING MOUNT``. Its control channel is its stdin and stdout: one
command a line (``stats``, ``sync``, ``cut``), one JSON reply a line. At EOF (its owner died) it
cuts and unmounts itself, so a crashed test run leaves nothing mounted.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import errno
import functools
import importlib.util
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

PAGE = 4096
_RENAME_NOREPLACE = 1  # renameat2(2): fail with EEXIST rather than replace the target
_UTIME_NOW, _UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2  # libfuse passes them as the whole ns value
_STAT_KEYS = ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks", "st_blksize")
_F = TypeVar("_F", bound=Callable[..., Any])


def skip_reason() -> str | None:
    """Why LazyFS cannot run on this machine, or None when it can (tests skip with this reason)."""
    if os.geteuid() != 0:
        return "LazyFS needs root (it mounts FUSE with allow_other, for every user's processes)"
    if not os.path.exists("/dev/fuse"):
        return "LazyFS needs /dev/fuse"
    if shutil.which("fusermount3") is None or ctypes.util.find_library("fuse3") is None:
        return "LazyFS needs libfuse 3: apt-get install -y fuse3"
    if importlib.util.find_spec("mfusepy") is None:
        return "LazyFS needs mfusepy: pip install mfusepy==3.1.1"
    return None


@dataclass(eq=False)
class _Node:
    """One backing inode: an open fd (which also keeps its inode number from reuse) and its overlay."""

    fd: int
    key: tuple[int, int]  # (st_dev, st_ino)
    opens: int = 0  # FUSE handles open on it
    pages: dict[int, bytearray] = field(default_factory=dict)  # page index -> its unsynced bytes
    end: int = 0  # the end of the furthest unsynced write
    mtime_ns: int = 0  # the time of the last unsynced write

    def size(self) -> int:
        return max(os.fstat(self.fd).st_size, self.end)


def _op(fn: _F) -> _F:
    """One lock around every operation (simple and correct), and nothing at all after the cut."""

    @functools.wraps(fn)
    def wrapper(self: _LazyOps, *args: Any) -> Any:
        with self.mutex:
            if self.dead:
                raise OSError(errno.EIO, "lazyfs: the power was cut")
            return fn(self, *args)

    return cast(_F, wrapper)


def _eager(call: Callable[..., None]) -> Callable[..., None]:
    """A metadata operation: done on the backing path at once (durable, as if journaled)."""
    return _op(lambda self, path, *args: call(self._real(path), *args))


class _LazyOps:
    """The FUSE operations: mfusepy calls them by name, with paths below the mount (from '/')."""

    use_ns = True  # times in integer nanoseconds

    def __init__(self, backing: str, on_init: Callable[[], None]) -> None:
        self.root, self.on_init = os.path.realpath(backing), on_init
        self.mutex = threading.Lock()
        self.dead = False
        self.nodes: dict[tuple[int, int], _Node] = {}
        self.handles: dict[int, _Node] = {}
        self.next_fh = 1  # FUSE passes 0 for directories
        self.counters = {"bytes_written": 0, "bytes_synced": 0, "fsyncs": 0, "dir_fsyncs": 0}

    def _real(self, path: str | None) -> str:
        if path is None:  # a file unlinked while open: only its handle reaches it
            raise OSError(errno.ENOENT, "unlinked")
        return self.root + path

    def _node(self, path: str | None, fh: int | None) -> tuple[os.stat_result, _Node | None]:
        """The backing file's stat, and its node if it has one (an open handle or unsynced data)."""
        if fh and fh in self.handles:
            return os.fstat(self.handles[fh].fd), self.handles[fh]
        st = os.lstat(self._real(path))
        return st, self.nodes.get((st.st_dev, st.st_ino))

    def _open(self, path: str, flags: int, mode: int) -> int:
        # Read-write whatever the caller asked (the kernel checks its rights): one fd per inode serves
        # every handle, and a sync writes through it. Never O_APPEND: pwrite would ignore the offset.
        fd = os.open(self._real(path), os.O_RDWR | (flags & (os.O_CREAT | os.O_EXCL)), mode)
        st = os.fstat(fd)
        node = self.nodes.get((st.st_dev, st.st_ino))
        if node is None:
            node = self.nodes[st.st_dev, st.st_ino] = _Node(fd, (st.st_dev, st.st_ino))
        else:
            os.close(fd)
        node.opens += 1
        fh, self.next_fh = self.next_fh, self.next_fh + 1
        self.handles[fh] = node
        if flags & os.O_TRUNC:
            self._truncate(node, 0)
        return fh

    def _forget(self, key: tuple[int, int]) -> None:
        """Drops a node nobody has open once it has nothing unsynced or its inode has no name left."""
        node = self.nodes.get(key)
        if node and node.opens == 0 and (not node.pages or os.fstat(node.fd).st_nlink == 0):
            os.close(node.fd)
            del self.nodes[key]

    def _truncate(self, node: _Node, length: int) -> None:
        """Eager like all metadata: the backing file takes the new size now; the overlay is clipped."""
        os.ftruncate(node.fd, length)
        for idx in [i for i in node.pages if i * PAGE >= length]:
            del node.pages[idx]
        last, cut_at = divmod(length, PAGE)
        if cut_at and last in node.pages:
            node.pages[last][cut_at:] = bytes(PAGE - cut_at)
        node.end = min(node.end, length)

    def _sync(self, node: _Node, datasync: int) -> None:
        size = node.size()
        for idx in sorted(node.pages):
            chunk = memoryview(node.pages[idx])[: min(PAGE, size - idx * PAGE)]
            done = 0
            while done < len(chunk):
                done += os.pwrite(node.fd, chunk[done:], idx * PAGE + done)
            self.counters["bytes_synced"] += len(chunk)
        node.pages.clear()
        node.end = 0
        (os.fdatasync if datasync else os.fsync)(node.fd)
        self.counters["fsyncs"] += 1

    def control(self, command: str) -> dict[str, int]:
        """The control channel: ``stats``; ``sync`` (everything, as a clean shutdown would); ``cut``
        (waits for the operation under way, then refuses all: no byte reaches the disk after it)."""
        with self.mutex:
            if command == "sync" and not self.dead:
                for node in [n for n in self.nodes.values() if n.pages]:
                    self._sync(node, 0)
            self.dead = self.dead or command == "cut"
            dirty = [n for n in self.nodes.values() if n.pages]
            pages = sum(len(n.pages) for n in dirty)
            return {**self.counters, "dirty_bytes": pages * PAGE, "dirty_files": len(dirty)}

    # The FUSE operations.
    def init(self, path: str) -> None:
        self.on_init()

    mkdir, rmdir, chmod, chown = _eager(os.mkdir), _eager(os.rmdir), _eager(os.chmod), _eager(os.lchown)

    @_op
    def create(self, path: str, mode: int, flags: int) -> int:
        return self._open(path, flags | os.O_CREAT, mode)

    @_op
    def open(self, path: str, flags: int) -> int:
        return self._open(path, flags & ~os.O_CREAT, 0)

    @_op
    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, int]:
        st, node = self._node(path, fh)
        attrs = {key: getattr(st, key) for key in _STAT_KEYS}
        attrs.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        if node is not None:
            attrs["st_size"] = max(st.st_size, node.end)
            attrs["st_blocks"] = max(st.st_blocks, -(-attrs["st_size"] // 512))
            attrs["st_mtime"] = max(st.st_mtime_ns, node.mtime_ns)
        return attrs

    @_op
    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        node = self.handles[fh]
        end = min(offset + size, node.size())
        if not node.pages:
            return os.pread(node.fd, max(0, end - offset), offset)
        out, pos = bytearray(), offset
        while pos < end:
            idx, start = divmod(pos, PAGE)
            n = min(PAGE - start, end - pos)
            if idx in node.pages:
                out += node.pages[idx][start : start + n]
            else:
                chunk = os.pread(node.fd, n, pos)
                out += chunk + bytes(n - len(chunk))  # a hole below a later unsynced write
            pos += n
        return bytes(out)

    @_op
    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        node, view, pos, end = self.handles[fh], memoryview(data), offset, offset + len(data)
        while pos < end:
            idx, start = divmod(pos, PAGE)
            n = min(PAGE - start, end - pos)
            page = node.pages.get(idx)
            if page is None:  # a page's first write: the rest of it is what the disk holds
                page = node.pages[idx] = bytearray(os.pread(node.fd, PAGE, idx * PAGE).ljust(PAGE, b"\0"))
            page[start : start + n] = view[pos - offset : pos - offset + n]
            pos += n
        node.end, node.mtime_ns = max(node.end, end), time.time_ns()
        self.counters["bytes_written"] += len(data)
        return len(data)

    @_op
    def truncate(self, path: str | None, length: int, fh: int | None = None) -> None:
        _, node = self._node(path, fh)
        if node is None:
            os.truncate(self._real(path), length)
        else:
            self._truncate(node, length)

    @_op
    def fsync(self, path: str | None, datasync: int, fh: int) -> None:
        self._sync(self.handles[fh], datasync)

    @_op
    def fsyncdir(self, path: str, datasync: int, fh: int) -> None:
        fd = os.open(self._real(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.counters["dir_fsyncs"] += 1

    @_op
    def release(self, path: str | None, fh: int) -> None:
        node = self.handles.pop(fh, None)
        if node is not None:
            node.opens -= 1
            self._forget(node.key)

    @_op
    def unlink(self, path: str) -> None:
        st = os.lstat(self._real(path))
        os.unlink(self._real(path))
        self._forget((st.st_dev, st.st_ino))

    @_op
    def link(self, target: str, source: str) -> None:
        """A second name for an inode (delta-rs commits a version with link-then-unlink): the
        overlay is keyed by inode, so both names share its unsynced data. Eager, like a rename."""
        os.link(self._real(source), self._real(target))

    @_op
    def rename(self, old: str, new: str, flags: int = 0) -> None:
        if flags & ~_RENAME_NOREPLACE:
            raise OSError(errno.EINVAL, "lazyfs: only the RENAME_NOREPLACE flag is supported")
        try:
            replaced: os.stat_result | None = os.lstat(self._real(new))
        except FileNotFoundError:
            replaced = None
        if flags & _RENAME_NOREPLACE and replaced is not None:
            raise OSError(errno.EEXIST, "lazyfs: the target exists (RENAME_NOREPLACE)")
        os.rename(self._real(old), self._real(new))
        if replaced is not None:  # the replaced inode may have lost its last name
            self._forget((replaced.st_dev, replaced.st_ino))

    @_op
    def readdir(self, path: str, fh: int) -> list[tuple[str, dict[str, int], int]]:
        real = self._real(path)  # with use_ino every entry needs its inode: readdir(3) hides d_ino 0
        with os.scandir(real) as it:
            named = [(e.name, e.stat(follow_symlinks=False)) for e in it]
        named += [(".", os.lstat(real)), ("..", os.lstat(real + "/.."))]
        return [(name, {"st_ino": st.st_ino, "st_mode": st.st_mode}, 0) for name, st in named]

    @_op
    def utimens(self, path: str | None, times: tuple[int, int] | None = None) -> None:
        st, node = self._node(path, None)
        now, (atime, mtime) = time.time_ns(), times or (_UTIME_NOW, _UTIME_NOW)

        def pick(value: int, old: int) -> int:
            return now if value == _UTIME_NOW else old if value == _UTIME_OMIT else value

        os.utime(self._real(path), ns=(pick(atime, st.st_atime_ns), pick(mtime, st.st_mtime_ns)))
        if node is not None:
            node.mtime_ns = 0  # the time set wins over that of the unsynced writes

    @_op
    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self.root)
        keys = ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree", "f_namemax")
        return {key: getattr(sv, key) for key in keys}


def _serve(backing: str, mount: str) -> None:
    """The daemon: mounts, answers the control channel on stdin/stdout, serves FUSE until unmounted."""
    os.environ.setdefault("FUSE_LIBRARY_NAME", "fuse3")  # never libfuse 2, even where it is installed
    import logging
    import resource

    import mfusepy

    # Each file with unsynced data keeps an fd open here (its inode must not be reused): allow many.
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard := resource.getrlimit(resource.RLIMIT_NOFILE)[1], hard))
    logging.basicConfig(level=logging.WARNING, format="lazyfs: %(levelname)s %(message)s")
    ctl, ctl_lock = os.fdopen(os.dup(1), "w", buffering=1), threading.Lock()
    os.dup2(2, 1)  # stdout is the control channel: nothing else may print on it

    def reply(obj: dict[str, Any]) -> None:
        with ctl_lock:
            ctl.write(json.dumps(obj) + "\n")

    ops = _LazyOps(backing, lambda: reply({"ready": True}))

    def control() -> None:
        for line in sys.stdin:
            reply(ops.control(line.strip()))
        ops.control("cut")  # EOF: the owner is gone; lose what a cut would, and leave nothing mounted
        subprocess.run(["fusermount3", "-u", "-z", mount], check=False, capture_output=True)
        os._exit(0)

    threading.Thread(target=control, name="lazyfs-control", daemon=True).start()

    class _Fuse(mfusepy.FUSE):  # type: ignore[misc]
        """mfusepy's libfuse-3 wrappers drop rename's flags and ftruncate's handle: pass them on."""

        def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> None:
            ops.rename(os.fsdecode(old), os.fsdecode(new), flags)

        def truncate_fuse_3(self, path: bytes | None, size: int, fip: Any) -> None:
            ops.truncate(None if path is None else os.fsdecode(path), size, fip.contents.fh if fip else None)

    # max_idle_threads: else libfuse 3.14 warns of an "invalid max threads value" (its own default).
    options = {"allow_other": True, "default_permissions": True, "hard_remove": True, "use_ino": True}
    _Fuse(ops, mount, foreground=True, fsname="lazyfs", max_idle_threads=10, **options)


def _mounted(path: Path) -> bool:
    with open("/proc/self/mounts", encoding="utf-8", errors="surrogateescape") as mounts:
        points = (line.split()[1] for line in mounts)
        return any(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), p) == str(path) for p in points)


class LazyFS:
    """A mounted LazyFS daemon (see the module docstring): ``with LazyFS(disk, mnt) as fs: ...``."""

    def __init__(self, backing_dir: str | Path, mount_dir: str | Path, start_timeout: float = 20.0) -> None:
        self.backing, self.mount = Path(backing_dir).resolve(), Path(mount_dir).resolve()
        if self.backing.is_relative_to(self.mount) or self.mount.is_relative_to(self.backing):
            raise ValueError("the mount and the backing directory must not contain each other")
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self.remount()

    def remount(self) -> LazyFS:
        """Starts a daemon on the backing directory as it is now (after a cut: what was synced)."""
        if self.proc is not None or _mounted(self.mount):
            raise RuntimeError(f"{self.mount} is already mounted")
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mount.mkdir(parents=True, exist_ok=True)
        # Its own session: a Ctrl-C to the tests does not unmount it under their teardown.
        daemon, pipe = [sys.executable, __file__, str(self.backing), str(self.mount)], subprocess.PIPE
        self.proc = subprocess.Popen(daemon, stdin=pipe, stdout=pipe, bufsize=0, start_new_session=True)
        try:
            self._send("", self.start_timeout)  # its first line, once mounted: {"ready": true}
        except BaseException:
            self._stop(kill=True)
            raise
        return self

    def _send(self, command: str, timeout: float) -> dict[str, int]:
        """One command to the daemon and its reply (no command: the next line it says)."""
        with self._lock:
            if self.proc is None or self.proc.stdin is None or self.proc.stdout is None:
                raise RuntimeError("lazyfs is not mounted")
            if command:
                self.proc.stdin.write(command.encode() + b"\n")
            if not select.select([self.proc.stdout], [], [], timeout)[0]:
                raise TimeoutError(f"lazyfs: no answer from the daemon in {timeout} s")
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"lazyfs: the daemon exited (code {self.proc.wait()}); see its stderr")
            return cast(dict[str, int], json.loads(line))

    def stats(self) -> dict[str, int]:
        """bytes_written, bytes_synced, fsyncs, dir_fsyncs; dirty_bytes (whole pages) and dirty_files."""
        return self._send("stats", 30.0)

    def sync(self) -> dict[str, int]:
        """Makes everything written so far durable (what a clean shutdown does); returns stats()."""
        return self._send("sync", 120.0)

    def cut(self) -> dict[str, int]:
        """The power cut. Kill your own processes first (SIGKILL); then every unsynced byte is dropped,
        the daemon is SIGKILLed and the mount removed. Returns the stats just before the cut, whose
        dirty_bytes were lost ({} if the daemon no longer answered)."""
        stats: dict[str, int] = {}
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            stats = self._send("cut", 30.0)
        self._stop(kill=True)
        return stats

    def close(self) -> None:
        """A clean unmount: syncs everything first, like unmounting a real disk."""
        if self.proc is not None:
            try:
                self.sync()
            finally:
                self._stop(kill=False)

    def _stop(self, kill: bool) -> None:
        """Stops the daemon by PID and leaves nothing mounted, whatever state it is in."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if not kill:  # the daemon's loop ends when its mount goes; a busy mount: kill it instead
            umount = subprocess.run(["fusermount3", "-u", self.mount], check=False, capture_output=True)
            kill = umount.returncode != 0
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        if _mounted(self.mount):  # a killed daemon leaves a dead mount: detach it
            subprocess.run(["fusermount3", "-u", "-z", self.mount], check=False, capture_output=True)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()

    def __enter__(self) -> LazyFS:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        """A failing block gets a cut (fast: nothing can hang on a sync); a passing one a clean close."""
        if exc_type is None:
            self.close()
        else:
            self.cut()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python lazyfs.py BACKING_DIR MOUNT_DIR")
    _serve(sys.argv[1], sys.argv[2])

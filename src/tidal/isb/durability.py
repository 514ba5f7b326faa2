"""What "stored" means: the one home of ``buffers.durability`` and the syncs it asks for.

Tidal acknowledges upstream once a batch is stored: a Kafka source commits its group's offsets,
the HTTP source answers 2xx, a user source acks, and a vertex's commit lets the buffer before it
trim what the vertex read. A process kill keeps every byte the kernel was handed, so "handed to
the kernel" is enough for that; a power cut or a kernel crash loses every byte written but not yet
synced to the disk. So there are two settings, as SQLite (``synchronous``), Kafka (``acks``) and
PostgreSQL (``synchronous_commit``) have:

``sync`` (the default)
    Nothing is acknowledged upstream before the bytes that hold it are on the disk: a segment file
    is fsynced before its row is committed, the rename that names it is made durable by an fsync
    of its directory, SQLite commits with ``synchronous=FULL`` (its WAL is fsynced at every
    commit), the embedded nats-server runs with ``sync_interval: always``, and Spark's offset log
    of a batch is fsynced before the batch's sink commit and input trim depend on it. One fsync
    per batch (a batch is hundreds of messages): group commit, not a sync per message.
``os``
    Stored means handed to the operating system. Survives any process crash, SIGKILL included;
    a power cut or an OS crash may lose the last second or so of acknowledged messages (JetStream:
    up to its two-minute flush), which the upstream no longer holds.

Where Tidal runs on a file system that cannot keep a promise (``tmpfs`` keeps nothing through a
power cut, whatever is synced), :func:`check_location` says so at start.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tidal import errors

if TYPE_CHECKING:
    from tidal.spec.model import BuffersSpec

__all__ = [
    "DEFAULT",
    "Durability",
    "check_jetstream",
    "check_location",
    "disk_full",
    "filesystem_of",
    "replace_durably",
    "start_warnings",
    "sync_dir",
    "sync_file",
    "sync_paths",
    "write_durably",
]

# The spec's field (tidal.spec.model.BuffersSpec.durability) spells the same two values: the spec
# sits below this layer and cannot import it.
Durability = Literal["sync", "os"]
DEFAULT: Durability = "sync"

# File systems whose contents do not outlive the machine's power: a sync there promises nothing.
_VOLATILE = frozenset({"tmpfs", "ramfs", "devtmpfs"})


def sync_file(fd: int) -> None:
    """Flush a file's data and size to the disk (``fdatasync`` where there is one: the size is
    part of what it writes, the mtime is not needed)."""
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # pragma: no cover - macOS
        os.fsync(fd)


def _fsync_path(path: str | Path, flags: int = 0) -> None:
    fd = os.open(path, os.O_RDONLY | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_dir(path: str | Path) -> None:
    """Make the names in directory ``path`` durable: a file created or renamed there survives a
    power cut only once its directory is synced (ext4, XFS and btrfs agree on this)."""
    _fsync_path(path, getattr(os, "O_DIRECTORY", 0))


def replace_durably(source: str | Path, target: str | Path, durability: Durability) -> None:
    """``os.replace(source, target)``; under ``sync`` also durable once it returns (the caller
    has synced ``source``'s data: a rename of unsynced data may leave an empty file after a cut)."""
    os.replace(source, target)
    if durability == "sync":
        sync_dir(Path(target).parent)


def filesystem_of(path: str | Path) -> str | None:
    """The type of the file system that holds ``path`` (``ext4``, ``tmpfs``, ``fuse.…``), from
    ``/proc/self/mountinfo``; None where that cannot be read (not Linux)."""
    target = Path(path).resolve()
    while not target.exists() and target != target.parent:
        target = target.parent
    best: tuple[int, str] | None = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            if "-" not in fields:
                continue
            mount_point = fields[4].replace("\\040", " ")
            fs_type = fields[fields.index("-") + 1]
            holds = target == Path(mount_point) or Path(mount_point) in target.parents
            if holds and (best is None or len(mount_point) >= best[0]):
                best = (len(mount_point), fs_type)
    return None if best is None else best[1]


def check_location(path: str | Path, durability: Durability) -> str | None:
    """A warning for the run's log and console when ``path``'s file system cannot give what
    ``durability`` promises, else None."""
    if durability != "sync":
        return None
    fs_type = filesystem_of(path)
    if fs_type in _VOLATILE:
        return (
            f"buffers.durability is sync, but {path} is on {fs_type}, which keeps nothing through a "
            "power cut or an OS crash: put the run directory on a disk (--run-dir) for the "
            "guarantee, or set buffers.durability: os to say that a crash may lose messages"
        )
    return None


def check_jetstream(url: str, monitor_url: str | None, replicas: int) -> str | None:
    """Under ``sync``, whether the JetStream servers at ``url`` (not started by Tidal) sync every
    write before they acknowledge it. Refused when their monitoring port says they do not (the
    error names the fix); a warning when it cannot be asked (no ``buffers.monitorUrl``); None
    when they do."""
    from tidal.isb.natsd import check_server_sync

    if monitor_url is None:
        return (
            f"buffers.durability is sync, but Tidal cannot tell whether the JetStream servers at {url}"
            " sync every write before they acknowledge it (nats-server's default flushes every two"
            " minutes): set sync_interval: always in their jetstream block, and buffers.monitorUrl"
            " to their monitoring address so that Tidal checks it"
        )
    if not check_server_sync(monitor_url):
        copies = (
            "one copy (replicas: 1), so a power cut of that server loses what it acknowledged"
            if replicas == 1
            else f"{replicas} copies, each flushed lazily, so a power cut of the hosts loses it"
        )
        raise errors.SpecError(
            "buffers.durability",
            f"sync asks that nothing be acknowledged before it is on the disk, but the nats-server at"
            f" {monitor_url} acknowledges before it syncs (its sync_interval is not 'always'), and each"
            f" buffer keeps {copies}",
            "set sync_interval: always in the server's jetstream block, or buffers.durability: os",
        )
    return None


def start_warnings(buffers: BuffersSpec, run_dir: Path, external_url: str | None) -> list[str]:
    """What a run says at start about ``buffers.durability``: the run directory's file system,
    and JetStream servers Tidal did not start (``external_url``; refused when they say they do
    not sync every write)."""
    warnings = [check_location(run_dir, buffers.durability)]
    if buffers.backend == "jetstream" and buffers.durability == "sync" and external_url is not None:
        warnings.append(check_jetstream(external_url, buffers.monitor_url, buffers.replicas))
    return [w for w in warnings if w is not None]


def sync_paths(files: list[Path]) -> None:
    """Sync every file in ``files`` (written by someone else: pyarrow, delta-rs), then every
    directory that holds one, so their data and their names survive a power cut."""
    folders: dict[Path, None] = {}
    for path in files:
        _fsync_path(path)
        folders[path.parent] = None
    for folder in folders:
        sync_dir(folder)


def write_durably(path: str | Path, text: str) -> None:
    """Write a small file whole or not at all, and on the disk when this returns: a temporary
    file synced, renamed over ``path``, its folder synced. For what a run cannot lose whatever
    ``buffers.durability`` says (a run directory's identity: its sinks name their files by it)."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        sync_file(out.fileno())
    replace_durably(tmp, target, "sync")


_DISK_FULL = ("No space left on device", "[Errno 28]", "database or disk is full")


def disk_full(text: str) -> bool:
    """Whether an error's text says a disk is full (``ENOSPC`` from a file, SQLite's own words)."""
    return any(words in text for words in _DISK_FULL)

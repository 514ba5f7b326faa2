"""Terminal sinks (``log``, ``file``, ``blackhole``, ``user``) and the dead letter.

A sink has two halves, like a Spark writer: :meth:`Sink.write` runs in each task with that task's
messages (Arrow arrays of ids and payloads: ``blackhole`` never converts them) and returns
something small for the driver; :meth:`Sink.commit` runs once per micro-batch in the driver
after every task succeeded.

Delivery, per kind:

- ``file`` is **exactly once**, also across a crash: each task encodes its lines and returns
  them in its commit message (a task writes nothing to disk, so executors on other hosts need no
  shared filesystem); the commit, in the driver, appends them to the JSON-lines file. Before
  appending batch ``B`` it records ``(B, size)`` next to the file (in the run directory); a
  replay of ``B`` after a crash cuts the file back to ``size`` and appends again.
  Lines are ``{"id": ..., "payload": ...}`` (payloads that are not UTF-8 go as
  ``payload_b64``); a dead letter line adds ``"error"``. A relative ``path`` is under the run
  directory. A micro-batch's lines pass through the driver's memory once (a batch is at most
  replicas × ``readBatchSize`` messages).
- ``log`` and ``user`` are **at least once**: a micro-batch replayed after a crash is written
  again. A user sink gets the message ids, so its ``write`` can be idempotent.
- ``blackhole`` drops everything (benchmarks, tests).

A user sink is ``module:Class`` built once per worker process with ``options`` as keyword
arguments; its ``write(messages)`` gets a list of ``(id, payload)`` pairs.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tidal import contracts
from tidal.isb.durability import replace_durably, sync_dir, sync_paths
from tidal.spark.sinks.connector import Sink, SinkPlace
from tidal.spec.model import SinkSpec
from tidal.spec.validate import resolve

__all__ = ["BlackholeSink", "FileSink", "LogSink", "UserSink", "read_file_sink"]

log = logging.getLogger("tidal.sink")


def _pylist(values: Any) -> list[Any]:
    return values.to_pylist() if hasattr(values, "to_pylist") else list(values)


def _text(payload: bytes) -> dict[str, str]:
    try:
        return {"payload": payload.decode()}
    except UnicodeDecodeError:
        return {"payload_b64": base64.b64encode(payload).decode("ascii")}


class BlackholeSink:
    def write(self, ids: Any, payloads: Any, errors: Sequence[str] = ()) -> None:
        return None

    def commit(self, batch_id: int, parts: Sequence[Any]) -> None:
        return None


class LogSink:
    """One log line per message on the ``tidal.sink.<vertex>`` logger (at least once)."""

    def __init__(self, vertex: str, limit: int = 200) -> None:
        self._log = logging.getLogger(f"tidal.sink.{vertex}")
        self._limit = limit  # a payload is cut to this many characters in the line

    def write(self, ids: Any, payloads: Any, errors: Sequence[str] = ()) -> None:
        if not self._log.handlers and not logging.getLogger("tidal").handlers:
            from tidal import log as tidal_log

            tidal_log.configure()
        for i, (message_id, payload) in enumerate(zip(_pylist(ids), _pylist(payloads), strict=True)):
            text = payload[: self._limit].decode(errors="replace")
            if errors:
                self._log.warning("id=%s error=%r payload=%r", message_id, errors[i], text)
            else:
                self._log.info("id=%s payload=%r", message_id, text)

    def commit(self, batch_id: int, parts: Sequence[Any]) -> None:
        return None


class UserSink:
    """The user's class; ``write([(id, payload), ...])`` (at least once)."""

    def __init__(self, spec: Any, at: str) -> None:
        cls = resolve(spec.class_, at, "class")
        self._sink: contracts.Sink = contracts.check_sink(cls(**spec.options), at)

    def write(self, ids: Any, payloads: Any, errors: Sequence[str] = ()) -> None:
        ids, payloads = _pylist(ids), _pylist(payloads)
        if errors and isinstance(self._sink, contracts.DeadLetterSink):
            self._sink.write_dead(list(zip(ids, payloads, errors, strict=True)))
        elif ids:
            self._sink.write(list(zip(ids, payloads, strict=True)))

    def commit(self, batch_id: int, parts: Sequence[Any]) -> None:
        if isinstance(self._sink, contracts.CommittingSink):
            self._sink.commit(batch_id)


def read_file_sink(path: str | Path) -> list[dict[str, Any]]:
    """The records a ``file`` sink committed (JSON lines), in order; ``[]`` before the first.

    Every record the sink writes ends with a newline; read while a commit is being appended,
    the file can end in part of a line (a CI run failed on one), which is not a record yet."""
    p = Path(path)
    if not p.exists():
        return []
    complete = p.read_text().rpartition("\n")[0]
    return [json.loads(line) for line in complete.splitlines() if line.strip()]


class FileSink:
    """JSON lines, exactly once (see the module docstring for the protocol)."""

    def __init__(self, path: str | Path, state_dir: str | Path) -> None:
        # The state is the run's (under the run directory), not the file's: a new run appending
        # to the same file starts its batch ids at 0 again.
        self.path = Path(path)
        self.state = Path(state_dir) / "state.json"

    def write(self, ids: Any, payloads: Any, errors: Sequence[str] = ()) -> bytes | None:
        """The task's lines, encoded; the commit appends them (the task touches no file)."""
        ids, payloads = _pylist(ids), _pylist(payloads)
        if not ids:
            return None
        lines = []
        for i, (message_id, payload) in enumerate(zip(ids, payloads, strict=True)):
            record: dict[str, str] = {"id": message_id, **_text(payload)}
            if errors:
                record["error"] = errors[i]
            lines.append(json.dumps(record))
        return ("\n".join(lines) + "\n").encode()

    def _read_state(self) -> tuple[int, int, bool] | None:
        try:
            batch, size, done = json.loads(self.state.read_text())
        except (FileNotFoundError, ValueError):
            return None
        return int(batch), int(size), bool(done)

    def _write_state(self, batch: int, size: int, done: bool) -> None:
        tmp = self.state.with_suffix(".tmp")
        with tmp.open("w") as f:
            json.dump([batch, size, done], f)
            f.flush()
            os.fsync(f.fileno())
        replace_durably(tmp, self.state, "sync")

    def commit(self, batch_id: int, parts: Sequence[Any]) -> None:
        chunks = [p for p in parts if p]
        state = self._read_state()
        if state is not None and (state[0] > batch_id or (state[0] == batch_id and state[2])):
            return  # this batch is in the file already (a replay)
        if not self.path.exists() or not self.state.parent.is_dir():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.state.parent.mkdir(parents=True, exist_ok=True)
            self.path.touch()
            sync_paths([self.path])  # the new names, before anything is committed in them
            sync_dir(self.state.parent.parent)
        if state is not None and state[0] == batch_id:
            size = state[1]  # a crash mid-append: cut back to where this batch began
        else:
            size = self.path.stat().st_size
            self._write_state(batch_id, size, False)
        with self.path.open("r+b") as out:
            out.truncate(size)
            out.seek(size)
            for chunk in chunks:
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
            end = out.tell()
        self._write_state(batch_id, end, True)


def blackhole(spec: SinkSpec, place: SinkPlace) -> Sink:
    return BlackholeSink()


def log_sink(spec: SinkSpec, place: SinkPlace) -> Sink:
    return LogSink(place.vertex)


def file_sink(spec: SinkSpec, place: SinkPlace) -> Sink:
    assert spec.file is not None
    return FileSink(place.path(spec.file["path"]), place.state_dir())


def user_sink(spec: SinkSpec, place: SinkPlace) -> Sink:
    assert spec.user is not None
    return UserSink(spec.user, f"{place.at}.user.class")

"""What the controller knew, kept across a driver restart: its windows, cooldowns and learning.

A driver killed mid-run (a SIGKILL, a lost host, an upgrade) is started again with ``tidal run``
on the same run directory. The replica counts survive in the control record, but a controller
built afresh would start blind: empty rate windows (Numaflow's rules hold on "no data" until the
lookback fills, ~2 minutes by default), no cooldown (a scale-down 5 s after a scale-up that the
killed driver made), a first scale-down held for a whole cooldown from the new start, and a
``policy: tidal`` vertex re-learning its start-ups and per-replica capacity. Knative's HA tests
keep the autoscaler out of their chaos for exactly this reason: a new autoscaler "needs time to
build the metrics status". Tidal's does not.

**What is kept** (:func:`snapshot`, written by the runtime after every tick, atomically): per
vertex, its rater (the samples of its lookback window, so the rates and averaged pending come
back as they were: processed counts are cumulative over the run, so the gap the restart made
counts as time with what was processed in it), its last scaling
time, the first time the controller saw it, its adapted lookback and when it adapted, its stuck
watch, its last decision, and its policy's learnt state.

**What is not carried over** (:func:`restore`, which says all of it in the note it returns):
- a vertex not in the snapshot (a new one) starts fresh;
- a vertex whose kind, policy kind or ``scale:`` block changed keeps its windows and cooldowns
  but gets a fresh policy (what the old one learnt was for other settings);
- a policy attribute that cannot be pickled (a live request path's load) stays the new policy's;
- a damaged snapshot (truncated, half-written, another version, not a snapshot at all) is ignored
  as a whole: the controller starts with defaults, and the note says why. No message depends on
  it: the snapshot holds decisions' inputs, never data.

The format is pickle: the rater and the policies are plain Python objects whose layout is the
code's own, and a snapshot is only ever read by the same run directory's next driver. A snapshot
of another Tidal version is refused by its version line, not misread.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidal.controller.state import VertexState
from tidal.scaling import Decision, Rule

__all__ = ["FORMAT", "Restored", "StateFile", "restore", "restore_notes", "snapshot"]

log = logging.getLogger("tidal.controller")

# A first line that names the layout: another is refused. 2: the arrivals' samples say when
# each count was true (tidal.controller.arrivals), and a layout-1 policy would not read them.
# 3: the rise watch keeps each rise's high phase and rate (tidal.scaling.periodic).
FORMAT = b"tidal-controller-state 3\n"

# The VertexState fields a restart carries over (the policy and the rater are handled apart).
_KEPT = (
    "last_scaled_at",
    "last",  # as its event-log record
    "rate",
    "pending",
    "lookback_seconds",
    "lookback_adapted_at",
    "started_at",
    "processed",
    "progress_at",
    "stuck_since",
    "active_at",
    "outage_since",
    "numbers_back_at",
    "hole",
)


@dataclass
class Restored:
    """What :func:`restore` did, per vertex: ``restored`` (what came back) and ``fresh`` (what
    did not, with why); ``ignored`` is set when the whole snapshot was not usable."""

    restored: dict[str, str] = field(default_factory=dict)
    fresh: dict[str, str] = field(default_factory=dict)
    ignored: str = ""
    taken_at: float | None = None


def _policy_state(policy: object) -> dict[str, bytes]:
    """The policy's attributes that pickle, each apart (one that does not is left out)."""
    out: dict[str, bytes] = {}
    for name, value in vars(policy).items():
        try:
            out[name] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # a live object (a request path's load, a lock): the new policy's stays
            continue
    return out


def snapshot(vertices: Mapping[str, VertexState], fingerprints: Mapping[str, str], at: float) -> bytes:
    """The controller's state at ``at``: every vertex's kept fields, its rater's samples and its
    policy's picklable attributes, with the fingerprint of the settings they were learnt under."""
    body: dict[str, Any] = {"at": at, "vertices": {}}
    for name, v in vertices.items():
        body["vertices"][name] = {
            "kind": str(v.kind),
            "fingerprint": fingerprints.get(name, ""),
            "fields": {key: getattr(v, key) for key in _KEPT if key != "last"},
            # A decision's reason may be computed when read (a closure): kept as its record.
            "last": v.last.to_dict() if v.last is not None else None,
            "rater": v.rater,
            "policy": (type(v.policy).__qualname__, _policy_state(v.policy)),
        }
    return FORMAT + pickle.dumps(body, protocol=pickle.HIGHEST_PROTOCOL)


def restore(data: bytes, vertices: Mapping[str, VertexState], fingerprints: Mapping[str, str]) -> Restored:
    """Put ``data`` (a :func:`snapshot`) back into ``vertices`` (a new controller's); what was
    restored and what was not, per vertex. A damaged snapshot changes nothing."""
    out = Restored()
    try:
        if not data.startswith(FORMAT):
            raise ValueError("not a controller snapshot of this Tidal version (its first line differs)")
        body = pickle.load(io.BytesIO(data[len(FORMAT) :]))
        if not isinstance(body, dict) or not isinstance(body.get("vertices"), dict):
            raise ValueError("its body is not a snapshot")
        saved: dict[str, Any] = body["vertices"]
        out.taken_at = float(body["at"])
    except Exception as exc:  # truncated, half-written, another layout: start with defaults
        out.ignored = f"{type(exc).__name__}: {exc}"
        return out
    for name, v in vertices.items():
        old = saved.get(name)
        if old is None:
            out.fresh[name] = "not in the snapshot (a new vertex)"
            continue
        if old["kind"] != str(v.kind):
            out.fresh[name] = f"its kind changed ({old['kind']} → {v.kind})"
            continue
        for key, value in old["fields"].items():
            setattr(v, key, value)
        v.last = Decision.from_dict(old["last"]) if old["last"] is not None else None
        v.rater = old["rater"]
        scaled = f"last scaled at {v.last_scaled_at:.3f}" if v.last_scaled_at > -math.inf else "never scaled"
        kept = f"its rate window, {scaled}"
        policy_type, attributes = old["policy"]
        if policy_type != type(v.policy).__qualname__ or old["fingerprint"] != fingerprints.get(name, ""):
            out.fresh[name] = "its policy or scale block changed: the policy starts fresh"
            out.restored[name] = kept
            continue
        for attribute, blob in attributes.items():
            setattr(v.policy, attribute, pickle.loads(blob))
        out.restored[name] = f"{kept}, {policy_type}'s learnt state"
    return out


def restore_notes(done: Restored, vertices: Mapping[str, VertexState], now: float) -> list[Decision]:
    """One event per vertex saying what :func:`restore` did for it: why did it (not) resume?"""
    notes = []
    for name, v in vertices.items():
        replicas = v.last.desired if v.last is not None else 0
        if done.ignored:
            rule, why = Rule.STATE_IGNORED, f"the controller's saved state was ignored: {done.ignored}"
        elif name in done.restored:
            rule = Rule.STATE_RESTORED
            why = f"resumed from the state saved at {done.taken_at:.3f}: {done.restored[name]}"
            why += f"; {done.fresh[name]}" if name in done.fresh else ""
        else:
            rule, why = Rule.STATE_IGNORED, done.fresh.get(name, "not restored")
        notes.append(Decision(name, now, replicas, replicas, rule, why, {"savedAt": done.taken_at}))
    return notes


class StateFile:
    """The snapshot's file in the run directory, replaced whole at every save (written beside it,
    then renamed: a crash mid-write leaves the previous snapshot, never half of one)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._failing = False

    def save(self, data: bytes) -> None:
        part = self.path.with_name(self.path.name + ".part")
        with part.open("wb") as f:
            f.write(data)
        os.replace(part, self.path)

    def keep(self, data: bytes) -> bool:
        """:meth:`save`, where a file system that refuses (a full disk) is a warning, once until it
        works again, not a failed tick: the previous snapshot stays, and a restart resumes from it."""
        try:
            self.save(data)
        except OSError as exc:
            with contextlib.suppress(OSError):
                self.path.with_name(self.path.name + ".part").unlink(missing_ok=True)
            if not self._failing:
                log.warning(
                    "the controller's state was not saved (%s); a restart resumes from the last saved", exc
                )
            self._failing = True
            return False
        self._failing = False
        return True

    def load(self) -> bytes | None:
        """The last snapshot's bytes, or ``None`` when there is none (a first start)."""
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None

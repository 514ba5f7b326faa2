"""What a crash leaves cut short in a query's checkpoint is mended before Spark reads it
(:func:`tidal.spark.batch.checkpoint_sync.repair_checkpoint`), or refused naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidal import errors
from tidal.spark.batch.checkpoint_sync import repair_checkpoint

ENTRY = 'v1\n{"batchWatermarkMs":0}\n{"in":3}\n'
ID = '{"id":"483704eb-c835-4bc8-a198-6fdadb925968"}'


def checkpoint(
    tmp_path: Path, metadata: str | None, offsets: dict[str, str], commits: dict[str, str]
) -> Path:
    root = tmp_path / "run" / "checkpoints" / "v"
    for folder, entries in (("offsets", offsets), ("commits", commits)):
        (root / folder).mkdir(parents=True)
        for name, text in entries.items():
            (root / folder / name).write_text(text)
    if metadata is not None:
        (root / "metadata").write_text(metadata)
    return root


def test_a_whole_checkpoint_is_left_as_it_is(tmp_path):
    root = checkpoint(tmp_path, ID, {"0": ENTRY, "1": ENTRY}, {"0": ENTRY})
    assert repair_checkpoint(root) == []
    assert (root / "metadata").read_text() == ID
    assert sorted(p.name for p in (root / "offsets").iterdir()) == ["0", "1"]


def test_the_newest_entry_cut_short_is_removed_so_spark_replays_its_batch(tmp_path):
    root = checkpoint(tmp_path, ID, {"0": ENTRY, "1": ""}, {"0": ENTRY})
    done = repair_checkpoint(root)
    assert len(done) == 1 and "offsets/1" in done[0]
    assert not (root / "offsets" / "1").exists() and (root / "offsets" / "0").exists()


def test_an_older_entry_cut_short_is_refused_naming_it(tmp_path):
    root = checkpoint(tmp_path, ID, {"0": "", "1": ENTRY}, {})
    with pytest.raises(errors.RunDirectoryError, match="offsets/0"):
        repair_checkpoint(root)
    assert (root / "offsets" / "0").exists()


@pytest.mark.parametrize("cut", ["", '{"id":"4837', "\x00\x00\x00", "[]"])
@pytest.mark.parametrize(
    "offsets",
    [{}, {"0": ENTRY}, {".0.5f0c.tmp": ENTRY[:5]}],
    ids=["nothing planned", "batch 0 planned", "a temporary file left"],
)
def test_a_metadata_file_cut_short_is_written_again_whatever_was_planned(tmp_path, cut, offsets):
    """The CI failure of stop 65: an empty ``metadata`` beside a planned offsets folder, which Spark
    refuses with Jackson's "No content to map"; a planned batch's offsets stay as they are."""
    root = checkpoint(tmp_path, cut, offsets, {})
    done = repair_checkpoint(root)
    assert any("metadata" in line for line in done)
    query_id = json.loads((root / "metadata").read_text())["id"]
    assert len(query_id) == 36 and query_id.count("-") == 4
    kept = sorted(name for name in offsets if name.isdigit())  # a lone temporary file goes too
    assert sorted(p.name for p in (root / "offsets").iterdir()) == kept
    assert repair_checkpoint(root) == []  # mended once: the next start finds nothing to do


def test_a_checkpoint_not_yet_written_needs_nothing(tmp_path):
    assert repair_checkpoint(tmp_path / "nowhere") == []


@pytest.mark.parametrize(
    "left",
    [
        {"offsets": [".0.5f0c2b1e.tmp"]},
        {"offsets": [".0.5f0c2b1e.tmp"], "state": ["0/_stateSchema/default/0_abc"]},
        {"commits": [".0.77aa.tmp"], "state": ["0/0/1.changelog"]},
    ],
    ids=["a temporary offsets entry", "and a state schema", "commits and state only"],
)
def test_what_a_crash_left_before_the_first_batch_is_removed_so_spark_starts_batch_0(tmp_path, left):
    """The CI failure of stop 66: after a cut, ``offsets/`` held only a temporary file, and Spark
    refused batch 0 with ``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``: it wants offsets, commits
    and state empty. The folders stay (Spark writes into them), emptied."""
    root = checkpoint(tmp_path, ID, {}, {})
    for folder, names in left.items():
        for name in names:
            (root / folder / name).parent.mkdir(parents=True, exist_ok=True)
            (root / folder / name).write_text("x")
    done = repair_checkpoint(root)
    assert len(done) == len(left)
    for folder in ("offsets", "commits", "state"):
        assert not (root / folder).exists() or list((root / folder).iterdir()) == []
    assert (root / "metadata").read_text() == ID
    assert repair_checkpoint(root) == []


def test_a_torn_first_entry_and_its_temporary_neighbour_both_go(tmp_path):
    root = checkpoint(tmp_path, ID, {"0": "", ".1.ab.tmp": "v1"}, {})
    done = repair_checkpoint(root)
    assert list((root / "offsets").iterdir()) == []
    assert any("offsets/0" in line for line in done)


def test_temporary_files_beside_a_planned_batch_are_left_to_spark(tmp_path):
    """Spark ignores them once a batch is planned: nothing to do, and nothing removed."""
    root = checkpoint(tmp_path, ID, {"0": ENTRY, ".1.ab.tmp": "v1"}, {})
    assert repair_checkpoint(root) == []
    assert (root / "offsets" / ".1.ab.tmp").exists()

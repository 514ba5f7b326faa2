"""A step's output ids: unique, deterministic, and the input id kept when there is one row."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidal.spark.query.frame_writer import number_repeats


def test_repeats_are_numbered_and_single_ids_kept():
    assert number_repeats(["a", "b", "b", "c", "c", "c"]) == ["a", "b.0", "b.1", "c.0", "c.1", "c.2"]
    assert number_repeats([]) == []


@given(st.lists(st.sampled_from(["x", "y", "z", "w"]), max_size=40))
def test_every_output_id_is_unique_and_comes_from_its_input(ids):
    ids = sorted(ids)
    out = number_repeats(ids)
    assert len(out) == len(ids) == len(set(out))
    assert [o.split(".")[0] for o in out] == ids

"""A state partitions request is refused before anything stops when it cannot or need not happen."""

from __future__ import annotations

import pytest

from tidal.api.partitions import PartitionsView, check_partitions, partitions_from_body
from tidal.errors import ApiError

VIEW = PartitionsView("p", "count", reduce=True, partitions=2, cores=4, where="master local[4]")


@pytest.mark.parametrize(
    ("view", "asked", "code", "says"),
    [
        pytest.param(VIEW, 0, 422, "at least 1 partition", id="zero"),
        pytest.param(VIEW, -3, 422, "at least 1 partition", id="negative"),
        pytest.param(
            VIEW, 5, 422, "more than the 4 cores the run can have (master local[4])", id="above-cores"
        ),
        pytest.param(VIEW, 2, 409, "already in 2 partitions", id="same-count"),
        pytest.param(
            PartitionsView("p", "map", reduce=False, partitions=0, cores=4, where="x"),
            2,
            422,
            "not a reduce vertex",
            id="not-reduce",
        ),
        pytest.param(
            PartitionsView("p", "count", True, 2, 4, "x", moving=True), 3, 409, "being moved now", id="moving"
        ),
        pytest.param(
            PartitionsView("p", "count", True, 2, 4, "x", retry_in=42.0), 3, 409, "in 42 s", id="backing-off"
        ),
    ],
)
def test_a_request_that_cannot_or_need_not_move_is_refused_naming_why(view, asked, code, says):
    with pytest.raises(ApiError) as refused:
        check_partitions(view, asked)
    assert refused.value.code == code
    assert says in refused.value.message


@pytest.mark.parametrize("asked", [1, 3, 4])
def test_a_count_within_the_cores_other_than_the_current_is_allowed(asked):
    check_partitions(VIEW, asked)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        pytest.param(b"{not json", 400, id="not-json"),
        pytest.param(b'{"spec": {}}', 422, id="missing"),
        pytest.param(b'{"spec": {"partitions": 2.5}}', 422, id="fraction"),
        pytest.param(b'{"spec": {"partitions": true}}', 422, id="boolean"),
        pytest.param(b"[1]", 422, id="not-an-object"),
    ],
)
def test_a_body_without_a_whole_count_is_refused(body, code):
    with pytest.raises(ApiError) as refused:
        partitions_from_body(body)
    assert refused.value.code == code


def test_the_count_is_read_from_the_body():
    assert partitions_from_body(b'{"spec": {"partitions": 4}}') == 4

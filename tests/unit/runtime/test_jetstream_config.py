"""A buffer's JetStream stream: several servers in one URL, replicas checked, fail-over errors."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import SimpleNamespace

import nats.errors
import pytest
from nats.js.errors import APIError, NotFoundError, ServiceUnavailableError

from tidal import errors
from tidal.isb.base import BufferLimits
from tidal.isb.jetstream_config import (
    check_replicas,
    failing_over,
    peer_offline,
    servers,
    stream_config,
    through_failover,
)


def test_a_url_lists_servers_comma_separated_and_an_empty_one_is_refused():
    assert servers("nats://a:4222, nats://b:4222,") == ["nats://a:4222", "nats://b:4222"]
    assert servers("nats://a:4222") == ["nats://a:4222"]
    with pytest.raises(errors.BufferUnavailable, match="names no server"):
        servers(" , ")


def test_the_stream_keeps_the_replicas_asked_and_fewer_is_refused_naming_the_fix():
    config = stream_config("p", "b", BufferLimits(100, 0.8), 120.0, 3)
    assert config.num_replicas == 3 and config.max_msgs == 100 and config.name == "TIDAL_p_b"
    check_replicas(SimpleNamespace(config=SimpleNamespace(num_replicas=3)), 3, "b", "nats://x:4222")
    with pytest.raises(errors.BufferUnavailable) as refused:
        check_replicas(SimpleNamespace(config=SimpleNamespace(num_replicas=1)), 3, "b", "nats://x:4222")
    text = str(refused.value)
    assert "keeps 1 replica" in text and "nats://x:4222" in text and "lower buffers.replicas" in text


def test_what_a_client_sees_while_the_cluster_fails_over_is_retried_and_nothing_else():
    assert failing_over(nats.errors.TimeoutError())
    assert failing_over(nats.errors.NoRespondersError())
    assert failing_over(ServiceUnavailableError())
    assert not failing_over(NotFoundError())  # the stream is gone: no election brings it back
    assert not failing_over(ValueError("bad"))


def test_a_stream_waits_for_an_offline_peer_but_not_for_a_cluster_too_small():
    offline = APIError(code=400, err_code=10005, description="no suitable peers for placement, peer offline")
    too_few = APIError(code=400, err_code=10005, description="no suitable peers for placement")
    not_clustered = APIError(code=500, err_code=10074, description="replicas > 1 not supported")
    assert peer_offline(offline) and failing_over(offline)  # retried through the fail-over
    assert not peer_offline(too_few) and not peer_offline(not_clustered)
    assert not failing_over(too_few) and not failing_over(not_clustered)  # refused at once
    assert not peer_offline(ValueError("peer offline"))  # only the server's own answer says so


def _answers(*outcomes: BaseException | str) -> tuple[list[int], Callable[[], Awaitable[str]]]:
    """A call that raises or returns each outcome in turn, and how many times it was made."""
    calls = [0]

    async def call() -> str:
        outcome = outcomes[min(calls[0], len(outcomes) - 1)]
        calls[0] += 1
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return calls, call


def test_an_idempotent_call_is_made_again_through_a_fail_over_and_its_answer_returned():
    calls, call = _answers(nats.errors.TimeoutError(), nats.errors.NoRespondersError(), "state")
    assert asyncio.run(through_failover(call, seconds=30)) == "state"
    assert calls[0] == 3


def test_any_other_error_is_raised_at_once_and_a_fail_over_past_its_time_is_raised():
    calls, call = _answers(NotFoundError())
    with pytest.raises(NotFoundError):
        asyncio.run(through_failover(call, seconds=30))
    assert calls[0] == 1
    calls, call = _answers(nats.errors.TimeoutError())
    with pytest.raises(nats.errors.TimeoutError):
        asyncio.run(through_failover(call, seconds=0))
    assert calls[0] == 1  # no time to fail over in: the first timeout is raised


def test_a_try_that_hangs_past_its_attempt_time_is_cancelled_and_made_again():
    calls = [0]
    cancelled = []

    async def call() -> str:
        calls[0] += 1
        if calls[0] == 1:
            try:
                await asyncio.Event().wait()  # a request that never answers
            except asyncio.CancelledError:
                cancelled.append(True)
                raise
        return "state"

    assert asyncio.run(through_failover(call, seconds=30, attempt=0.05)) == "state"
    assert calls[0] == 2 and cancelled == [True]

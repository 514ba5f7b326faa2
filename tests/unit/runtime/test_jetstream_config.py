"""A buffer's JetStream stream: several servers in one URL, replicas checked, fail-over errors."""

from __future__ import annotations

from types import SimpleNamespace

import nats.errors
import pytest
from nats.js.errors import NotFoundError, ServiceUnavailableError

from tidal import errors
from tidal.isb.base import BufferLimits
from tidal.isb.jetstream_config import check_replicas, failing_over, servers, stream_config


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

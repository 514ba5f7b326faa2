"""``buffers.durability`` against a real nats-server: the embedded one syncs every write under
``sync``, and an external one that does not is refused by name (tidal.isb.durability)."""

from __future__ import annotations

import pytest

from tidal import errors
from tidal.isb.durability import check_jetstream
from tidal.isb.natsd import NatsServer, check_server_sync

pytestmark = pytest.mark.nats


@pytest.mark.parametrize("sync", [True, False])
def test_the_embedded_server_syncs_every_write_exactly_when_asked(tmp_path, sync):
    with NatsServer(tmp_path, sync=sync, monitor=True) as server:
        assert server.monitor_url is not None
        assert check_server_sync(server.monitor_url) is sync


def test_an_external_server_that_flushes_lazily_is_refused_under_sync(tmp_path):
    with NatsServer(tmp_path / "lazy", sync=False, monitor=True) as lazy:
        assert lazy.url is not None and lazy.monitor_url is not None
        with pytest.raises(errors.SpecError) as refused:
            check_jetstream(lazy.url, lazy.monitor_url, replicas=1)
        text = str(refused.value)
        assert text.startswith("buffers.durability:"), text
        assert "replicas: 1" in text and "sync_interval: always" in text and "durability: os" in text
    with NatsServer(tmp_path / "synced", sync=True, monitor=True) as synced:
        assert synced.url is not None
        assert check_jetstream(synced.url, synced.monitor_url, replicas=1) is None


def test_a_server_tidal_cannot_ask_is_warned_about_and_a_bad_monitor_url_named(tmp_path):
    warning = check_jetstream("nats://127.0.0.1:4222", None, replicas=3)
    assert warning is not None and "buffers.monitorUrl" in warning and "sync_interval: always" in warning
    with NatsServer(tmp_path) as server, pytest.raises(errors.SpecError) as refused:
        check_jetstream(server.url or "", "http://127.0.0.1:9", replicas=1)  # nothing listens there
    assert str(refused.value).startswith("buffers.monitorUrl:")

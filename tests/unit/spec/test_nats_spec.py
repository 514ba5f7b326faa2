"""``source.nats`` as written in a spec: its fields, and what is refused naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from tidal import errors
from tidal.spec import parse_pipeline


def _source(nats: dict[str, Any]) -> Any:
    spec = parse_pipeline(
        {
            "name": "n",
            "vertices": [{"name": "in", "source": {"nats": nats}}, {"name": "out", "sink": {"log": {}}}],
            "edges": [{"from": "in", "to": "out"}],
        }
    )
    return spec.vertex("in").source


GOOD = {"url": "nats://a:4222, nats://b:4222", "subject": "orders.>", "queue": "readers"}


def test_a_nats_source_is_staged_with_its_fields_by_numaflows_names():
    auth = {"user": "${NATS_USER}", "password": "${NATS_PASSWORD}"}
    source = _source({**GOOD, **auth, "readTimeoutSeconds": 1})
    assert source.kind == "nats" and source.staged
    nats = source.nats
    assert (nats.url, nats.subject, nats.queue) == ("nats://a:4222, nats://b:4222", "orders.>", "readers")
    assert (nats.user, nats.password, nats.token) == ("${NATS_USER}", "${NATS_PASSWORD}", None)
    assert nats.read_timeout_seconds == 1.0


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"queue": None}, r"source\.nats\.queue: is required"),  # Numaflow's source needs a group
        ({"subject": "two words"}, r"source\.nats\.subject"),
        ({"queue": "a.b"}, r"source\.nats\.queue"),
        ({"url": ""}, r"source\.nats\.url"),
        ({"readTimeoutSeconds": 0}, r"source\.nats\.readTimeoutSeconds"),
        ({"stream": "s"}, r"source\.nats\.stream: unknown key"),
    ],
)
def test_a_bad_field_is_refused_naming_it(change, path):
    nats = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(errors.SpecError, match=r"vertices\[0\]\." + path):
        _source(nats)


def test_tls_is_refused_naming_the_field_and_the_way_round():
    with pytest.raises(errors.SpecError, match=r"source\.nats\.tls: TLS .* not supported.*remove tls"):
        _source({**GOOD, "tls": {"insecureSkipVerify": True}})


def test_an_nkey_is_refused_naming_the_field_without_showing_the_seed():
    with pytest.raises(errors.SpecError, match=r"source\.nats\.nkey: NKey .* not supported") as err:
        _source({**GOOD, "nkey": "SUASECRETSEED"})
    assert "SUASECRETSEED" not in str(err.value)

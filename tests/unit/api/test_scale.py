"""The scale subresource's object and the writes it takes (tidal.api.scale), and the token."""

from __future__ import annotations

import json
import os
import stat

import pytest

from tidal.api.auth import Caller, check_token, ensure_token, read_token, refuse_query_token
from tidal.api.scale import ApiError, ScaleView, check_bounds, replicas_from_body, scale_object
from tidal.spec.http import is_loopback

J, MERGE, JSON_PATCH = "application/json", "application/merge-patch+json", "application/json-patch+json"
VIEW = ScaleView("wave", "enrich", replicas=2, running=1, version=7, low=0, high=6, autoscaling=True)


def test_a_scale_is_kubernetes_autoscaling_v1_with_the_vertexs_selector_and_bounds():
    scale = scale_object(VIEW)
    assert (scale["kind"], scale["apiVersion"]) == ("Scale", "autoscaling/v1")
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 1, "selector": "tidal.dev/pipeline=wave,tidal.dev/vertex=enrich"}
    assert scale["metadata"]["resourceVersion"] == "7" and scale["metadata"]["name"] == "enrich"
    notes = scale["metadata"]["annotations"]
    assert (notes["tidal.dev/min"], notes["tidal.dev/max"], notes["tidal.dev/autoscaling"]) == (
        "0",
        "6",
        "enabled",
    )


@pytest.mark.parametrize(
    ("method", "content_type", "body", "expected"),
    [
        pytest.param("PUT", J, {"kind": "Scale", "spec": {"replicas": 3}}, (3, None), id="put"),
        pytest.param(
            "PUT", J, {"metadata": {"resourceVersion": "7"}, "spec": {"replicas": 0}}, (0, "7"),
            id="put-with-version",
        ),
        pytest.param("PATCH", MERGE, {"spec": {"replicas": 4}}, (4, None), id="merge"),
        pytest.param(
            "PATCH", "application/strategic-merge-patch+json; charset=utf-8", {"spec": {"replicas": 5}},
            (5, None),
            id="strategic",
        ),
        pytest.param(
            "PATCH", JSON_PATCH, [{"op": "replace", "path": "/spec/replicas", "value": 6}],
            (6, None), id="json-patch",
        ),
    ],
)  # fmt: skip
def test_every_way_kubernetes_clients_write_a_scale(method, content_type, body, expected):
    assert replicas_from_body(method, content_type, json.dumps(body).encode()) == expected


@pytest.mark.parametrize(
    ("method", "content_type", "body", "code", "words"),
    [
        pytest.param("PUT", J, b"not json", 400, "not JSON", id="not-json"),
        pytest.param("PUT", J, b'{"spec": {"replicas": -1}}', 422, "negative", id="negative"),
        pytest.param("PUT", J, b'{"spec": {"replicas": 2.5}}', 422, "whole number", id="fraction"),
        pytest.param("PUT", J, b'{"spec": {"replicas": "3"}}', 422, "whole number", id="string"),
        pytest.param("PUT", J, b'{"spec": {"replicas": true}}', 422, "whole number", id="bool"),
        pytest.param("PUT", J, b'{"spec": {}}', 422, "spec.replicas: missing", id="missing"),
        pytest.param("PUT", J, b"[1]", 400, "Scale object", id="a-list"),
        pytest.param("PUT", J, b'{"kind": "Deployment", "spec": {"replicas": 1}}', 400, "kind",
                     id="another-kind"),
        pytest.param("PATCH", "text/plain", b'{"spec": {"replicas": 1}}', 415, "merge-patch",
                     id="media-type"),
        pytest.param("PATCH", JSON_PATCH, b'[{"op": "remove", "path": "/spec/replicas"}]',
                     422, "only replace", id="json-patch-remove"),
        pytest.param("PATCH", JSON_PATCH, b"[]", 422, "no operation", id="json-patch-empty"),
    ],
)  # fmt: skip
def test_bad_writes_are_refused_with_the_code_and_the_field(method, content_type, body, code, words):
    with pytest.raises(ApiError) as caught:
        replicas_from_body(method, content_type, body)
    assert caught.value.code == code and words in caught.value.message


def test_bounds_name_min_and_max_and_a_chained_vertex_points_at_its_head():
    check_bounds(VIEW, 6)
    with pytest.raises(ApiError) as caught:
        check_bounds(VIEW, 7)
    assert caught.value.code == 422 and "[min 0, max 6]" in caught.value.message
    follower = ScaleView("wave", "archive", 2, 2, 7, 0, 6, True, head="enrich")
    with pytest.raises(ApiError) as caught:
        check_bounds(follower, 1)
    assert caught.value.code == 409 and "scale enrich" in caught.value.message


def test_the_token_is_made_once_readable_by_its_owner_only(tmp_path):
    token = ensure_token(tmp_path)
    assert len(token) >= 40 and ensure_token(tmp_path) == token == read_token(tmp_path)
    assert stat.S_IMODE((tmp_path / "api.token").stat().st_mode) == 0o600
    os.chmod(tmp_path / "api.token", 0o644)
    with pytest.raises(PermissionError, match="chmod 600"):
        read_token(tmp_path)


def test_writes_without_the_token_are_401_with_another_403_and_a_query_token_400():
    check_token("Bearer s3cret", "s3cret")
    check_token(None, None)  # --api-auth none
    for header, code in ((None, 401), ("Basic abc", 401), ("Bearer wrong", 403), ("bearer s3cret ", None)):
        if code is None:
            check_token(header, "s3cret")
            continue
        with pytest.raises(ApiError) as caught:
            check_token(header, "s3cret")
        assert caught.value.code == code
    with pytest.raises(ApiError) as caught:
        refuse_query_token("fieldManager=x&access_token=s3cret", Caller("127.0.0.1"))
    assert caught.value.code == 400 and "Authorization: Bearer" in caught.value.message
    refuse_query_token("fieldManager=kubectl-scale", Caller("127.0.0.1"))


def test_loopback_addresses():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.5", "example.com"))

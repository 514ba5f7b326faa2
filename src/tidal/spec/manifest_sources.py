"""Numaflow's sources in a manifest as Tidal's (:mod:`tidal.spec.manifest` converts the rest).

- ``generator``: ``rpu`` per ``duration`` becomes the rate; ``msgSize`` carries over;
- ``http``: its token secret is read from an environment variable instead;
- ``kafka``: ``brokers``, ``topic``, ``consumerGroup`` (Sarama's settings are not librdkafka's);
- ``jetstream``: ``url``, ``stream``, ``consumer``, ``deliver_policy``, ``filter_subjects``; its
  ``auth`` secrets become ``${NAME}`` environment variables, its ``tls`` is not supported;
- ``nats``: ``url``, ``subject``, ``queue``, with ``auth`` and ``tls`` as ``jetstream``'s;
- ``udsource``: the container's pynumaflow ``Sourcer`` (named as a ``udf``'s handler is).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from tidal import errors
from tidal.scaling.durations import spec_seconds
from tidal.spec.manifest_handlers import HandlerFinder

__all__ = ["Converting", "convert_source"]


class Converting(Protocol):
    """What the source conversion needs of the manifest's converter."""

    name: str
    found: HandlerFinder  # which handler a container runs as (tidal.spec.manifest_handlers)

    def skip(self, path: str, why: str) -> None: ...

    def sarama(self, kafka: Mapping[str, Any], at: str, keys: tuple[str, ...], instead: str) -> None: ...


def _secret_env(ref: Mapping[str, Any], name: str, key: str | None = None) -> str:
    """A Kubernetes secret reference as the name of the environment variable Tidal reads instead
    (``name`` and ``key``: what a reference that leaves them out stands for)."""
    return re.sub(r"[^A-Z0-9]", "_", f"{ref.get('name', name)}_{ref.get('key', key or name)}".upper())


def _jetstream(conv: Converting, js: Mapping[str, Any], at: str) -> dict[str, Any]:
    out: dict[str, Any] = {"url": js.get("url"), "stream": js.get("stream")}
    if js.get("consumer"):
        out["consumer"] = js["consumer"]
    policy = js.get("deliver_policy") or js.get("deliverPolicy")
    if policy:
        out["deliverPolicy"] = str(policy)
    subjects = js.get("filter_subjects") or js.get("filterSubjects")
    if subjects:
        out["filterSubjects"] = list(subjects)
    return _nats_auth(conv, js, at, out, "JetStream")


def _nats(conv: Converting, nats: Mapping[str, Any], at: str) -> dict[str, Any]:
    out = {key: nats.get(key) for key in ("url", "subject", "queue")}
    return _nats_auth(conv, nats, at, out, "NATS")


def _nats_auth(
    conv: Converting, src: Mapping[str, Any], at: str, out: dict[str, Any], kind: str
) -> dict[str, Any]:
    """``out`` with ``src``'s ``auth`` secrets as ``${NAME}`` environment variables; ``auth.nkey``
    and ``tls`` refused (the JetStream and NATS sources share Numaflow's ``NatsAuth`` and ``TLS``)."""
    auth = src.get("auth") or {}
    basic = auth.get("basic") or {}
    refs = (("user", basic.get("user")), ("password", basic.get("password")), ("token", auth.get("token")))
    for key, ref in refs:
        if ref:
            env = _secret_env(ref, key)
            out[key] = f"${{{env}}}"
            conv.skip(f"{at}.auth", f"a Kubernetes secret: {key} is read from ${env} instead")
    if auth.get("nkey"):
        raise errors.SpecError(
            f"{at}.auth.nkey",
            "NKey authentication is not supported by Tidal",
            "use a token or user and password",
        )
    if src.get("tls"):
        raise errors.SpecError(
            f"{at}.tls",
            f"TLS to the NATS server is not supported by Tidal's {kind} source",
            "reach the server without TLS, or read it through a pynumaflow Sourcer",
        )
    return out


def convert_source(
    conv: Converting,
    source: Mapping[str, Any],
    at: str,
    vertex: str,
    annotations: Mapping[str, Any],
) -> dict[str, Any]:
    if "generator" in source:
        g = source["generator"] or {}
        rpu, duration = (
            float(g.get("rpu", 5)),
            spec_seconds(g.get("duration", "1s"), f"{at}.generator.duration", positive=True),
        )
        for key in ("keyCount", "value", "valueBlob", "jitter"):
            if key in g:
                conv.skip(f"{at}.generator.{key}", "Tidal's generator writes its own text payloads")
        return {"generator": {"rate": rpu / duration, "msgSize": int(g.get("msgSize", 8))}}
    if "http" in source:
        http = source["http"] or {}
        # Numaflow's HTTP source takes the body, whatever its type, as one message, and its
        # clients POST to /vertices/<name> with x-numaflow-id / x-numaflow-event-time: all served.
        out: dict[str, Any] = {"bodies": "raw"}
        if "ports" in http:
            conv.skip(f"{at}.http.ports", "plain HTTP on source.http.port (a free one by default); no TLS")
        if "service" in http:
            conv.skip(f"{at}.http.service", "no Kubernetes Service: the activator listens on 127.0.0.1")
        token = ((http.get("auth") or {}).get("token")) or None
        if token:
            env = _secret_env(token, "http", "token")
            out["auth"] = {"token": {"env": env}}
            conv.skip(f"{at}.http.auth.token", f"a Kubernetes secret: the token is read from ${env} instead")
        return {"http": out}
    if "kafka" in source:
        k = source["kafka"] or {}
        conv.sarama(k, f"{at}.kafka", ("config", "tls", "sasl", "kafkaVersion"), "source.kafka.consumer")
        return {
            "kafka": {
                "bootstrapServers": ",".join(k.get("brokers") or []),
                "topic": k.get("topic"),
                "groupId": k.get("consumerGroup") or f"{conv.name}-consumer",
            }
        }
    if "udsource" in source:
        container = (source.get("udsource") or {}).get("container") or {}
        where = f"{at}.udsource.container"
        runs = ("source", "Sourcer", "module:Class (a pynumaflow Sourcer)")
        return {"pynumaflow": conv.found.container(container, where, vertex, annotations, runs)}
    if "jetstream" in source:
        return {"jetstream": _jetstream(conv, source["jetstream"] or {}, f"{at}.jetstream")}
    if "nats" in source:
        return {"nats": _nats(conv, source["nats"] or {}, f"{at}.nats")}
    known = ", ".join(sorted(source)) or "none"
    raise errors.SpecError(
        at, f"no source Tidal runs (got {known})", "use generator, http, kafka, jetstream, nats or udsource"
    )

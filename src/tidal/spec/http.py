"""``source.http`` — events POSTed over HTTP, through Knative's activator and queue-proxy.

The source's replicas are receiver processes beside Spark (``docs/http.md``); the KPA scales
them on their measured concurrency (``policy: kpa`` is the default for an HTTP source, with
Knative's ``kpa:`` keys: ``target``, ``target-burst-capacity``, ``window``, …).
"""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field, model_validator

from tidal.spec.base import Model

__all__ = ["HttpAuthSpec", "HttpSourceSpec", "TokenSpec", "host_port", "is_loopback"]


class TokenSpec(Model):
    """Where the bearer token is read from when the run starts: exactly one of ``file`` (its
    whole content, stripped) or ``env`` (an environment variable's name). Never the token itself:
    a spec is copied into run directories, logs and dashboards."""

    file: str | None = None
    env: str | None = Field(None, min_length=1)
    # Numaflow names a Kubernetes secret (``name``/``key``); there is no secret store here.
    name: str | None = None
    key: str | None = None

    @model_validator(mode="after")
    def _one_place(self) -> TokenSpec:
        if self.name is not None or self.key is not None:
            raise ValueError(
                "a Kubernetes secret (name/key) cannot be read here: put the token in a file (file: PATH, "
                "mode 0600) or an environment variable (env: NAME)"
            )
        if (self.file is None) == (self.env is None):
            raise ValueError("give exactly one of file (a path) or env (a variable's name)")
        return self


class HttpAuthSpec(Model):
    """``auth.token``: Numaflow's HTTP source auth. Every request needs ``Authorization: Bearer
    <token>``: without it 401, with another token 403, both counted (``unauthorized``)."""

    token: TokenSpec


class HttpSourceSpec(Model):
    """``host``/``port``: the activator's public address (loopback and a free port by default:
    nothing listens beyond loopback unless asked). ``containerConcurrency``: requests one receiver
    handles at once (0 = unlimited), with a queue of 10 × CC behind them. ``maxHeld`` and
    ``holdTimeoutSeconds`` bound what the activator holds while no receiver has room.
    ``maxRequestBytes`` bounds one request's body. ``timeoutSeconds`` is a request's deadline
    (Knative's revision ``timeoutSeconds``, 300 by default): a request still waiting for the
    queue-proxy's breaker when it passes gets 503. ``activators``: how many activator processes
    share the public port, each balancing over its own slice of the receivers (Knative's
    activator subsetting; 1 by default). ``receiverHosts``: the agents (``tidal agent --listen
    ADDR:PORT``) of the worker hosts the receivers run on, spread over them; none by default:
    beside the driver; ``agentToken`` (a :class:`TokenSpec`), the token the agents were started
    with (``tidal agent --token-file``). ``auth``: a bearer token every request must carry
    (:class:`HttpAuthSpec`); a source on a host other than loopback needs one, or ``auth: none``
    said on purpose. ``bodies``: ``json`` (Tidal's: a JSON value, an array as a batch, or JSON
    lines; 415 for another type) or ``raw`` (Numaflow's: the body, whatever its type, is one
    message, its bytes as they came)."""

    host: str = "127.0.0.1"
    port: int = Field(0, ge=0, le=65_535)
    container_concurrency: int = Field(0, ge=0, le=1000)
    max_held: int = Field(10_000, ge=1, le=1_000_000)
    hold_timeout_seconds: float = Field(30.0, gt=0, le=3600)
    max_request_bytes: int = Field(1 << 20, ge=1024, le=1 << 30)
    timeout_seconds: float = Field(300.0, gt=0, le=3600)
    activators: int = Field(1, ge=1, le=20)
    # json: Tidal's (a JSON value, an array as a batch, JSON lines); raw: Numaflow's (the body, any
    # Content-Type, is one message as it came); tidal convert sets raw.
    bodies: Literal["json", "raw"] = "json"
    receiver_hosts: list[str] = Field(default_factory=list)
    agent_token: TokenSpec | None = None
    # None: no token (loopback only); ``none``: no token, said on purpose (any host).
    auth: HttpAuthSpec | Literal["none"] | None = None

    @model_validator(mode="after")
    def _agents_are_addresses(self) -> HttpSourceSpec:
        for i, address in enumerate(self.receiver_hosts):
            try:
                host_port(address)
            except ValueError as exc:
                raise ValueError(f"receiverHosts[{i}]: {exc}, where `tidal agent --listen` serves") from None
        if len(set(self.receiver_hosts)) != len(self.receiver_hosts):
            raise ValueError("receiverHosts names an agent twice: list each host's agent once")
        return self

    @model_validator(mode="after")
    def _no_open_door(self) -> HttpSourceSpec:
        if self.auth is None and not is_loopback(self.host):
            raise ValueError(
                f"host {self.host} is not loopback and the source has no auth: anyone who reaches it could "
                "write into the pipeline; add auth: {token: {file: PATH}} (or {env: NAME}), or say "
                "auth: none on purpose"
            )
        return self


def host_port(text: str) -> tuple[str, int]:
    """``10.0.0.3:7171`` → ("10.0.0.3", 7171): an agent's address (``receiverHosts``, ``tidal
    agent --listen``); anything else is refused naming the form."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65_536:
        raise ValueError(f"{text!r} is not HOST:PORT (an address of the host and a port, e.g. 10.0.0.3:7171)")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost`` (the HTTP source's and the control
    API's test for "nobody else can reach this")."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

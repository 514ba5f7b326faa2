"""``source.http`` — events POSTed over HTTP, through Knative's activator and queue-proxy.

The source's replicas are receiver processes beside Spark (``docs/http.md``); the KPA scales
them on their measured concurrency (``policy: kpa`` is the default for an HTTP source, with
Knative's ``kpa:`` keys: ``target``, ``target-burst-capacity``, ``window``, …).
"""

from __future__ import annotations

from pydantic import Field

from tidal.spec.base import Model

__all__ = ["HttpSourceSpec"]


class HttpSourceSpec(Model):
    """``host``/``port``: the activator's public address (loopback and a free port by default:
    nothing listens beyond loopback unless asked). ``containerConcurrency``: requests one receiver
    handles at once (0 = unlimited), with a queue of 10 × CC behind them. ``maxHeld`` and
    ``holdTimeoutSeconds`` bound what the activator holds while no receiver has room.
    ``maxRequestBytes`` bounds one request's body. ``timeoutSeconds`` is a request's deadline
    (Knative's revision ``timeoutSeconds``, 300 by default): a request still waiting for the
    queue-proxy's breaker when it passes gets 503. ``activators``: how many activator processes
    share the public port, each balancing over its own slice of the receivers (Knative's
    activator subsetting; 1 by default)."""

    host: str = "127.0.0.1"
    port: int = Field(0, ge=0, le=65_535)
    container_concurrency: int = Field(0, ge=0, le=1000)
    max_held: int = Field(10_000, ge=1, le=1_000_000)
    hold_timeout_seconds: float = Field(30.0, gt=0, le=3600)
    max_request_bytes: int = Field(1 << 20, ge=1024, le=1 << 30)
    timeout_seconds: float = Field(300.0, gt=0, le=3600)
    activators: int = Field(1, ge=1, le=20)

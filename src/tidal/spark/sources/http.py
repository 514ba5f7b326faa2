"""An HTTP source inside a pipeline run: its request path instead of a Spark query.

A request cannot wait for a micro-batch, so an HTTP source has no query: its replicas are the
receiver processes of a :class:`~tidal.request.path.RequestPath`, which append what clients POST
to the source's output buffers; the downstream vertices are Spark queries as usual. This module
builds the path from the spec, offers the controller what it measures (a probe sample and the
KPA's load), and reports it in the run's status.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tidal import errors
from tidal.controller.faults import FAULTS_FILE, FaultLog
from tidal.controller.loop import ProbeSample
from tidal.isb.control import ControlStore
from tidal.request.activator import ActivatorConfig
from tidal.request.auth import load_token
from tidal.request.launch import launcher_for
from tidal.request.path import RequestPath
from tidal.request.receiver import ReceiverConfig
from tidal.spark.batch.config import QueryConfig
from tidal.spark.sources.connector import SourceConnector
from tidal.spec import PipelineSpec
from tidal.spec.kpa import kpa_spec
from tidal.spec.mono import HTTP_SUFFIX

__all__ = ["CONNECTOR", "probe_sample", "start_request_path"]


def start_request_path(
    spec: PipelineSpec,
    config: QueryConfig,
    control: ControlStore,
    run_dir: Path,
    on_poke: Callable[[], None],
) -> RequestPath:
    v = spec.vertex(config.vertex)
    assert v.source is not None and v.source.http is not None
    http = v.source.http
    # Where the token is (the processes read it themselves: never on a command line), checked now
    # so a missing file or variable stops the run at start, naming it.
    auth = http.auth if not isinstance(http.auth, str) else None
    token_file = token_env = None
    if auth is not None:
        token_file, token_env = auth.token.file, auth.token.env
        try:
            load_token(auth.token.file, auth.token.env)
        except ValueError as exc:
            problem = str(exc).split(": ", 1)[-1]
            raise errors.SpecError(f"vertices[{v.name}].source.http.auth.token", problem) from None
    # An HTTP MonoVertex N's receivers are the vertex N-http; Numaflow's clients POST to N.
    alias = v.name.removesuffix(HTTP_SUFFIX) if v.name.endswith(HTTP_SUFFIX) else ""
    activator = ActivatorConfig(
        vertex=v.name,
        alias=alias,
        host=http.host,
        port=http.port,
        container_concurrency=http.container_concurrency,
        max_held=http.max_held,
        hold_timeout=http.hold_timeout_seconds,
        max_request_bytes=http.max_request_bytes,
        token_file=token_file,
        token_env=token_env,
    )
    receiver = ReceiverConfig(
        vertex=v.name,
        alias=alias,
        pipeline=config.pipeline,
        outputs=config.outputs,
        backend=config.backend,
        db=config.db,
        url=config.url,
        durability=config.durability,
        container_concurrency=http.container_concurrency,
        max_request_bytes=http.max_request_bytes,
        timeout_seconds=http.timeout_seconds,
        raw=http.bodies == "raw",
        token_file=token_file,
        token_env=token_env,
    )
    field = f"vertices[{v.name}].source.http.receiverHosts"
    if http.receiver_hosts and config.backend == "sqlite":
        raise errors.SpecError(
            field,
            "receivers on other hosts write to the buffers from there, and a SQLite buffer is a file on "
            "this host: set buffers.backend: jetstream (a url every host reaches), or remove receiverHosts",
        )
    agent_token, token_field = None, f"vertices[{v.name}].source.http.agentToken"
    if http.agent_token is not None:
        try:
            agent_token = load_token(http.agent_token.file, http.agent_token.env, token_field)
        except ValueError as exc:
            raise errors.SpecError(token_field, str(exc).split(": ", 1)[-1]) from None
    launcher = launcher_for(http.receiver_hosts, run_dir / "logs", field, agent_token)  # each agent answers
    path = RequestPath(
        activator,
        receiver,
        lambda: control.replicas(v.name, default=v.replicas),
        run_dir / "logs",
        on_poke=on_poke,
        series=run_dir / "requests.jsonl",
        activators=http.activators,
        window=kpa_spec(v).stable_window,  # a receiver younger than the KPA's window is "young"
        launcher=launcher,
        faults=FaultLog(run_dir / FAULTS_FILE),  # receivers that ended unasked, with why: tidal events
    ).start()
    (run_dir / f"{v.name}.url").write_text(path.url + "\n")  # where clients send: tidal status shows it
    return path


def probe_sample(path: RequestPath, replicas: int) -> ProbeSample:
    """The source as the controller sees it: processed = messages stored, pending = requests the
    activator holds (what waits for a receiver), ready = receivers that answered the probe."""
    return ProbeSample(
        float(path.accepted()), float(path.held() or 0), replicas, path.ready(), busy_seconds=None
    )


class HttpConnector(SourceConnector):
    """Served: its replicas are receivers (:func:`start_request_path`), not Spark tasks, so it has
    neither a reader nor a task side (the defaults say so if one is asked for)."""

    kind = "http"
    guarantee = "exactly once"  # a 2xx once stored (and synced); a retried request's id is stored once


CONNECTOR = HttpConnector()

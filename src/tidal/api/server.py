"""The control API of a running pipeline, over HTTP, shaped as Kubernetes' API.

Routes (``/apis/tidal.dev/v1``; ``{p}`` the pipeline's name, ``{v}`` a vertex's):

``GET   /pipelines/{p}``                    the pipeline: ``spec.lifecycle.desiredPhase``, ``status.phase``
``PATCH /pipelines/{p}``                    ``{"spec": {"lifecycle": {"desiredPhase": "Paused"}}}``: pause
                                            (``"Running"``: resume), as Numaflow's pipelines do
``PUT   /pipelines/{p}``                    a whole pipeline spec (JSON): a live edit
                                            (:mod:`tidal.spark.run.operations`); ``?restart=true``:
                                            what needs a restart too, by a drain and a restart
``GET   /pipelines/{p}/vertices``           every vertex's ``Scale``, as a ``ScaleList``
``GET   /pipelines/{p}/vertices/{v}/scale`` the scale subresource (:mod:`tidal.api.scale`)
``PUT   /pipelines/{p}/vertices/{v}/scale`` write it: a whole ``Scale``
``PATCH /pipelines/{p}/vertices/{v}/scale`` write it: a merge patch or a JSON patch
``GET   /pipelines/{p}/vertices/{v}/partitions``  a reduce vertex's state partitions
``PATCH /pipelines/{p}/vertices/{v}/partitions``  ``{"spec": {"partitions": N}}``: move its state
                                            to N partitions (:mod:`tidal.api.partitions`); the
                                            answer comes once the vertex runs again

Every write needs the run's bearer token (:mod:`tidal.api.auth`); reads do not. Errors are
Kubernetes ``Status`` objects with the HTTP code, a ``reason`` and a message naming the field and
the fix; nothing is changed by a refused write. The server binds to 127.0.0.1 unless told
otherwise, and refuses a non-loopback address without a token. One thread per connection
(``http.server``): a pause that drains the buffers runs in its own thread, the response says
``Pausing`` at once and the phase turns ``Paused`` when it is done.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from tidal import errors
from tidal.api.auth import Caller, check_token, refuse_query_token
from tidal.api.partitions import PartitionsView, partitions_from_body, partitions_object
from tidal.api.scale import (
    API_GROUP,
    API_VERSION,
    ApiError,
    ScaleView,
    replicas_from_body,
    scale_object,
    status,
)
from tidal.spec.http import is_loopback

__all__ = ["MAX_BODY", "PREFIX", "ControlServer", "Operable"]

log = logging.getLogger("tidal.api")

PREFIX = f"/apis/{API_GROUP}/{API_VERSION}"
MAX_BODY = 1 << 20  # a pipeline spec is a few KB; anything past a megabyte is refused (413)
DRAIN_TIMEOUT = 120.0  # seconds a pause waits for the buffers (Numaflow: pauseGracePeriodSeconds)


class Operable(Protocol):
    """What the server needs of a running pipeline (:class:`tidal.spark.run.operations.RunOperations`)."""

    @property
    def pipeline(self) -> str: ...

    def phase(self) -> str: ...

    def scale(self, vertex: str) -> ScaleView: ...

    def scales(self) -> list[ScaleView]: ...

    def set_scale(
        self, vertex: str, replicas: int, version: str | None, caller: Caller
    ) -> tuple[ScaleView, str]: ...

    def partitions(self, vertex: str) -> PartitionsView: ...

    def set_partitions(self, vertex: str, partitions: int, caller: Caller) -> tuple[PartitionsView, str]: ...

    def pause(self, caller: Caller, *, drain: bool = True, timeout: float = DRAIN_TIMEOUT) -> str: ...

    def resume(self, caller: Caller) -> str: ...

    def apply(self, new: Any, caller: Caller, *, restart: bool = False) -> list[str]: ...

    def generation(self) -> tuple[int, int]: ...

    def spec_document(self) -> Mapping[str, Any]: ...


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    operable: Operable
    token: str | None


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    # -- dispatch ------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._serve("GET")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _caller(self, query: str) -> Caller:
        managers = [p.split("=", 1)[1] for p in query.split("&") if p.startswith("fieldManager=")]
        return Caller(
            self.client_address[0], self.headers.get("User-Agent", ""), managers[0] if managers else None
        )

    def _serve(self, method: str) -> None:
        path, _, query = self.path.partition("?")
        caller = self._caller(query)
        body = b""
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                raise ApiError(
                    413, "RequestEntityTooLarge", f"the body is {length:,} bytes; at most {MAX_BODY:,}"
                )
            body = self.rfile.read(length) if length else b""
            refuse_query_token(query, caller)
            if method != "GET":
                check_token(self.headers.get("Authorization"), self.server.token)
            code, answer = self._route(method, path, query, body, caller)
            self._json(code, answer)
        except ApiError as exc:
            if method != "GET" or exc.code in (400, 401, 403):
                log.warning(
                    "%s %s from %s refused (%d): %s", method, path, caller.describe(), exc.code, exc.message
                )
            self._json(exc.code, status(exc.code, exc.reason, exc.message))
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # the run keeps running; the client gets the reason
            log.exception("control API %s %s failed", method, path)
            self._json(500, status(500, "InternalError", f"{type(exc).__name__}: {exc}"))

    def _route(self, method: str, path: str, query: str, body: bytes, caller: Caller) -> tuple[int, Any]:
        operable = self.server.operable
        if not path.startswith(PREFIX + "/pipelines"):
            raise ApiError(404, "NotFound", f"no such route: {path} (the API is under {PREFIX}/pipelines)")
        parts = [p for p in path.removeprefix(PREFIX + "/pipelines").split("/") if p]
        if not parts:
            if method != "GET":
                raise ApiError(405, "MethodNotAllowed", f"{method} {path}: the pipelines can only be listed")
            return 200, {"kind": "PipelineList", "apiVersion": f"{API_GROUP}/{API_VERSION}",
                         "items": [self._pipeline(operable)]}  # fmt: skip
        if parts[0] != operable.pipeline:
            raise ApiError(404, "NotFound", f"pipeline {parts[0]!r} is not this run's ({operable.pipeline})")
        if len(parts) == 1:
            return self._on_pipeline(method, query, body, caller)
        if parts[1] == "vertices" and len(parts) == 2 and method == "GET":
            return 200, {"kind": "ScaleList", "apiVersion": "autoscaling/v1",
                         "items": [scale_object(v) for v in operable.scales()]}  # fmt: skip
        if parts[1] == "vertices" and len(parts) == 4 and parts[3] == "scale":
            return self._on_scale(method, parts[2], body, caller)
        if parts[1] == "vertices" and len(parts) == 4 and parts[3] == "partitions":
            return self._on_partitions(method, parts[2], body, caller)
        raise ApiError(404, "NotFound", f"no such route: {path}")

    # -- the pipeline: lifecycle and live edits -------------------------------------------------

    @staticmethod
    def _pipeline(operable: Operable) -> dict[str, Any]:
        phase = operable.phase()
        generation, observed = operable.generation()
        return {
            "kind": "Pipeline",
            "apiVersion": f"{API_GROUP}/{API_VERSION}",
            "metadata": {"name": operable.pipeline, "generation": generation},
            "spec": {**operable.spec_document(),
                     "lifecycle": {"desiredPhase": "Running" if phase == "Running" else "Paused"}},
            "status": {"phase": phase, "observedGeneration": observed},
        }  # fmt: skip

    def _on_pipeline(self, method: str, query: str, body: bytes, caller: Caller) -> tuple[int, Any]:
        operable = self.server.operable
        if method == "GET":
            return 200, self._pipeline(operable)
        if method == "PATCH":
            data = _json_object(body)
            lifecycle = (
                (data.get("spec") or {}).get("lifecycle") if isinstance(data.get("spec"), dict) else None
            )
            if not isinstance(lifecycle, dict) or "desiredPhase" not in lifecycle:
                raise ApiError(
                    422, "Invalid",
                    "spec.lifecycle.desiredPhase: missing; send "
                    '{"spec": {"lifecycle": {"desiredPhase": "Paused"}}} (or Running); to change anything '
                    "else, PUT the whole spec",
                )  # fmt: skip
            wanted = lifecycle["desiredPhase"]
            if wanted == "Paused":
                drain = lifecycle.get("drain", True)
                grace = lifecycle.get("pauseGracePeriodSeconds", DRAIN_TIMEOUT)
                if (
                    not isinstance(drain, bool)
                    or isinstance(grace, bool)
                    or not isinstance(grace, int | float)
                    or grace < 0
                ):
                    raise ApiError(
                        422, "Invalid",
                        "spec.lifecycle.drain must be true or false, pauseGracePeriodSeconds a number >= 0",
                    )  # fmt: skip
                if operable.phase() == "Running":
                    threading.Thread(
                        target=_pause, args=(operable, caller, drain and grace > 0, float(grace)),
                        name="tidal-pause", daemon=True,
                    ).start()  # fmt: skip
                    _wait_for_phase(operable, ("Pausing", "Paused"))
                return 200, self._pipeline(operable)
            if wanted == "Running":
                operable.resume(caller)
                return 200, self._pipeline(operable)
            raise ApiError(
                422, "Invalid", f"spec.lifecycle.desiredPhase: {wanted!r}; it is Running or Paused"
            )  # fmt: skip
        if method == "PUT":
            from tidal import errors
            from tidal.spec import parse_pipeline

            data = _json_object(body)
            spec = data.get("spec", data) if data.get("kind") == "Pipeline" else data
            if isinstance(spec, dict):
                spec = {k: v for k, v in spec.items() if k != "lifecycle"}
                spec.setdefault("name", operable.pipeline)
            try:
                new = parse_pipeline(spec)
            except errors.SpecError as exc:
                raise ApiError(422, "Invalid", str(exc)) from None
            restart = "restart=true" in query.split("&")
            changes = operable.apply(new, caller, restart=restart)
            message = "; ".join(changes) if changes else "nothing to change"
            return 200, {
                **status(200, "Applied" if changes else "Unchanged", message),
                "details": {"changes": changes},
            }
        raise ApiError(
            405, "MethodNotAllowed", f"{method} on a pipeline: GET, PATCH (lifecycle) or PUT (a live edit)"
        )

    # -- the scale subresource ------------------------------------------------------------------

    def _on_scale(self, method: str, vertex: str, body: bytes, caller: Caller) -> tuple[int, Any]:
        operable = self.server.operable
        if method == "GET":
            return 200, scale_object(operable.scale(vertex))
        if method not in ("PUT", "PATCH"):
            raise ApiError(405, "MethodNotAllowed", f"{method} on a Scale: GET, PUT or PATCH")
        operable.scale(vertex)  # 404 before parsing the body
        replicas, version = replicas_from_body(method, self.headers.get("Content-Type", ""), body)
        view, after = operable.set_scale(vertex, replicas, version, caller)
        answer = scale_object(view)
        answer["metadata"]["annotations"]["tidal.dev/after-write"] = after
        return 200, answer

    def _on_partitions(self, method: str, vertex: str, body: bytes, caller: Caller) -> tuple[int, Any]:
        operable = self.server.operable
        if method == "GET":
            return 200, partitions_object(operable.partitions(vertex))
        if method not in ("PUT", "PATCH"):
            raise ApiError(405, "MethodNotAllowed", f"{method} on partitions: GET, PUT or PATCH")
        operable.partitions(vertex)  # 404 before parsing the body
        view, done = operable.set_partitions(vertex, partitions_from_body(body), caller)
        answer = partitions_object(view)
        answer["status"]["message"] = done
        return 200, answer

    # -- answers -------------------------------------------------------------------------------

    def _json(self, code: int, value: Any) -> None:
        data = json.dumps(value, indent=1).encode()
        self.send_response(code, HTTPStatus(code).phrase if code in HTTPStatus._value2member_map_ else None)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body.decode("utf-8") if body else "")
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, "BadRequest", f"the body is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ApiError(400, "BadRequest", "the body must be a JSON object")
    return data


def _pause(operable: Operable, caller: Caller, drain: bool, timeout: float) -> None:
    try:
        operable.pause(caller, drain=drain, timeout=timeout)
    except Exception:  # the phase stays Pausing; the log says why
        log.exception("pausing %s failed", operable.pipeline)


def _wait_for_phase(operable: Operable, phases: tuple[str, ...], timeout: float = 5.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while operable.phase() not in phases and time.monotonic() < deadline:
        time.sleep(0.02)


class ControlServer:
    """``ControlServer(operable, token).start(port, host)`` … ``stop()``."""

    def __init__(self, operable: Operable, token: str | None) -> None:
        self._operable = operable
        self.token = token
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.host = "127.0.0.1"

    @property
    def operable(self) -> Operable:
        return self._operable

    @operable.setter
    def operable(self, operable: Operable) -> None:
        """The run the API answers for: a restart (``tidal apply --restart``) hands it the new one."""
        self._operable = operable
        if self._server is not None:
            self._server.operable = operable

    def start(self, port: int = 0, host: str = "127.0.0.1") -> ControlServer:
        """Listen on ``host:port`` (0: a free port). A non-loopback ``host`` without a token is
        refused: anyone who reaches the address could scale, pause or edit the pipeline."""
        if self.token is None and not is_loopback(host):
            raise errors.SpecError(
                "--api-host",
                f"{host} (not loopback) would let anyone who reaches it write to the control API",
                "keep --api-host 127.0.0.1, or leave the token on (drop --api-auth none)",
            )
        server = _Server((host, port), _Handler)
        server.operable, server.token = self.operable, self.token
        self._server, self.host = server, host
        self._thread = threading.Thread(target=server.serve_forever, name="tidal-api", daemon=True)
        self._thread.start()
        return self

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{PREFIX}/pipelines/{self.operable.pipeline}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

"""Every error Tidal raises, in one tree.

    TidalError                      base of everything below
    ├── SpecError                   fix the pipeline or scale spec (field path, value, fix)
    ├── BufferError                 inter-step buffer (ISB) problems
    │   ├── BufferFull              the batch would pass bufferMaxLength: retry later (back pressure)
    │   ├── BufferNotFound          the named buffer does not exist: create it or fix the name
    │   ├── MessageTooLarge         a message exceeds the backend's limit: shrink it
    │   └── BufferUnavailable       the backend cannot be reached (names the URL): retry or fix the URL
    ├── UdfError                    a user function raised (names the vertex and message id)
    ├── SourceError                 a user source raised
    ├── PipelineError               a vertex's query stopped with an error: fix, then start again
    ├── ClusterError                the cluster cannot run it (master, dynamic allocation, hosts)
    ├── RunDirectoryError           the run directory holds another pipeline's run: new dir or --reset
    ├── SinkError                   a message a sink cannot write (names its id and the fix)
    ├── RequestError                the request path or the API refused a request: an HTTP status
    │   ├── ApiError                the control-plane API: Kubernetes' code, reason and message
    │   ├── BadRequest              a POST refused whole: 4xx and what was wrong
    │   ├── Overloaded              more requests than the breaker or the activator holds: 503
    │   └── Backpressure            an output buffer over its usage limit: 429, retry later
    └── Unpaired                    a breaker released with no acquire: a bug in Tidal, report it

The branches group by what the caller can do: a ``SpecError`` is fixed by editing input and is
never retried; ``BufferFull`` and ``BufferUnavailable`` are transient and retried; ``UdfError``
carries the message that failed so it can go to a dead letter instead of being dropped; a
``RequestError`` is answered to the client with its status and never stops a run; a
``PipelineError`` stops the run with nothing committed past the failed micro-batch, so starting
again after the fix resumes from the same messages. ``docs/errors.md`` mirrors this tree.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ApiError",
    "Backpressure",
    "BadRequest",
    "BufferError",
    "BufferFull",
    "BufferNotFound",
    "BufferUnavailable",
    "ClusterError",
    "MessageTooLarge",
    "Overloaded",
    "PipelineError",
    "RequestError",
    "RunDirectoryError",
    "SinkError",
    "SourceError",
    "SpecError",
    "TidalError",
    "UdfError",
    "Unpaired",
    "require",
]


class TidalError(Exception):
    """Base class of every error Tidal raises on purpose."""


class SpecError(TidalError, ValueError):
    """Invalid pipeline or scale spec. ``path`` names the field (``vertices[2].scale.max``)."""

    def __init__(self, path: str, problem: str, fix: str = "", others: Sequence[SpecError] = ()) -> None:
        self.path = path
        self.problem = problem
        self.fix = fix
        self.others = tuple(others)  # further problems found in the same pass, reported together
        message = f"{path}: {problem}" if path else problem
        if fix:
            message += f" ({fix})"
        for other in self.others:
            message += f"\n{other}"
        super().__init__(message)


class BufferError(TidalError):
    """A problem with an inter-step buffer."""


class BufferFull(BufferError):
    """Appending the batch would pass the buffer's ``bufferMaxLength``; nothing was stored."""

    def __init__(self, buffer: str, length: int, batch: int, max_length: int) -> None:
        self.buffer = buffer
        self.length = length
        self.batch = batch
        self.max_length = max_length
        super().__init__(
            f"buffer {buffer!r} is full: {length} stored + {batch} new > bufferMaxLength "
            f"{max_length}; nothing of the batch was stored (retry after the reader commits)"
        )


class BufferNotFound(BufferError, KeyError):
    """The named buffer does not exist."""

    def __init__(self, buffer: str) -> None:
        self.buffer = buffer
        super().__init__(f"buffer {buffer!r} does not exist (create it first, or check the name)")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class MessageTooLarge(BufferError):
    """A message is larger than the backend accepts."""

    def __init__(self, buffer: str, size: int, limit: int) -> None:
        self.buffer = buffer
        self.size = size
        self.limit = limit
        super().__init__(
            f"message of {size} bytes is larger than {limit} bytes allowed by buffer {buffer!r} "
            "(shrink the message, or raise the server's max_payload)"
        )


class BufferUnavailable(BufferError, ConnectionError):
    """The buffer backend cannot be reached."""


class UdfError(TidalError):
    """A user-defined function raised while processing a message. The message ends with the
    user's own frames of the traceback (``File ".../my_udfs.py", line 12, in parse``), so the
    line that raised survives Spark's wrapping; Tidal's and Spark's frames are left out."""

    def __init__(
        self, vertex: str, message_id: str, cause: BaseException, attempts: int, frames: str = ""
    ) -> None:
        self.vertex = vertex
        self.message_id = message_id
        self.cause = cause
        self.attempts = attempts
        message = (
            f"vertex {vertex!r}: UDF failed on message {message_id!r} after {attempts} "
            f"attempt(s): {type(cause).__name__}: {cause}"
        )
        super().__init__(message + ("\n" + frames if frames else ""))


class SourceError(TidalError):
    """A user-defined source raised, or a source cannot be read safely as configured (a JetStream
    consumer that does not acknowledge each message explicitly)."""


class PipelineError(TidalError):
    """A vertex's query stopped with an error; the pipeline stops with it (nothing is committed
    past the failed micro-batch, so a restart after the fix resumes from the same messages)."""

    def __init__(self, vertex: str, reason: str) -> None:
        self.vertex = vertex
        self.reason = reason
        super().__init__(f"vertex {vertex!r} failed: {reason}")


class ClusterError(TidalError):
    """The cluster cannot run this pipeline as configured: the master is not reachable, Spark's
    dynamic allocation is on, or SQLite buffers meet an executor on another host. The message
    names the fix."""


class RunDirectoryError(TidalError):
    """The run directory holds a run of another pipeline (or of this one with other data)."""

    def __init__(self, run_dir: str, problem: str, fix: str) -> None:
        self.run_dir = run_dir
        self.problem = problem
        self.fix = fix
        super().__init__(f"run directory {run_dir} {problem} ({fix})")


class SinkError(TidalError):
    """A message the sink cannot write (names its id and the fix): a Parquet or Delta row that is
    not a JSON object, a partition field it lacks."""


class RequestError(TidalError):
    """The request path (HTTP source, activator) or the control-plane API refused a request; the
    client gets the HTTP status, and the run goes on."""


class ApiError(RequestError):
    """A control-plane request refused: the HTTP ``code``, Kubernetes' ``reason`` (``Invalid``,
    ``NotFound``, ``Conflict``, ``Unauthorized``, ``Forbidden``, ``BadRequest``,
    ``UnsupportedMediaType``) and a message for a person."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message


class BadRequest(RequestError):
    """A POST to the HTTP source refused whole: ``status`` (4xx) and what was wrong, for the
    response body; nothing of it was stored."""

    def __init__(self, status: int, problem: str) -> None:
        super().__init__(problem)
        self.status = status
        self.problem = problem


class Overloaded(RequestError):
    """More requests than the breaker's queue and tokens, or the activator's ``maxHeld``, can
    hold: answered 503 at once (Knative's queue-proxy's "pending request queue full")."""


class Backpressure(RequestError):
    """An output buffer of the HTTP source is over its usage limit: answered 429 with
    ``Retry-After``; nothing of the request was stored."""


class Unpaired(TidalError, RuntimeError):
    """A breaker's ``release()`` without a matching ``acquire()`` or ``reserve()``: a bug in the
    caller (Tidal), raised before anything changed."""


def require(condition: bool, path: str, problem: str, fix: str) -> None:
    """Raise ``SpecError(path, problem, fix)`` unless ``condition``: every validator's one check."""
    if not condition:
        raise SpecError(path, problem, fix)

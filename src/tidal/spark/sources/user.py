"""The ``user`` source: the user's class (Numaflow's UDSource contract), staged.

``source: {user: {class: module:Class, options: {...}}}`` builds the class with ``options`` as
keyword arguments; it implements :class:`tidal.contracts.Source` and is read through the staging
buffer (:mod:`tidal.spark.sources.staged`). A class whose constructor takes ``state_dir`` gets a
directory of its own in the run directory (``state/<vertex>``) to keep its position in, so two
runs never share one and a dry run cannot consume what the real run reads.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from tidal import contracts
from tidal.spark.batch.config import QueryConfig
from tidal.spark.sources.connector import SourceConnector
from tidal.spark.sources.staged import StagedSourceReader

__all__ = ["CONNECTOR", "UserSourceReader", "build_user_source"]


def _takes(cls: type, parameter: str) -> bool:
    try:
        return parameter in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False


def build_user_source(config: QueryConfig) -> contracts.Source:
    """The user's class, built and checked against the contract (errors name the spec field)."""
    # Here, not at the top: a task's read worker imports this module to run ``read`` and
    # should not pay for the spec package (pydantic) it never uses.
    from tidal.spec.validate import resolve

    assert config.source is not None and config.source.user is not None
    user = config.source.user
    at = f"vertices[{config.vertex}].source.user.class"
    cls = resolve(user.class_, at, "class")
    options = dict(user.options)
    if "state_dir" not in options and _takes(cls, "state_dir"):
        state = Path(config.run_dir) / "state" / config.vertex
        state.mkdir(parents=True, exist_ok=True)
        options["state_dir"] = str(state)
    return contracts.check_source(cls(**options), at)


class UserSourceReader(StagedSourceReader):
    """The user's source, made replayable through its staging buffer (``config.input``)."""

    def __init__(self, config: QueryConfig) -> None:
        super().__init__(config, build_user_source(config))


class UserSourceConnector(SourceConnector):
    kind = "user"

    def reader(self, config: QueryConfig) -> UserSourceReader:
        return UserSourceReader(config)


CONNECTOR = UserSourceConnector()

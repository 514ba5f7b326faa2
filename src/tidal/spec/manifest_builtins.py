"""Numaflow's builtins in a manifest as Tidal's ``udf.builtin`` (:mod:`tidal.spec.builtins`).

A UDF's builtins are ``cat`` and ``filter``; a source transformer's are ``filter``,
``eventTimeExtractor`` and ``timeExtractionFilter`` (Numaflow's ``pkg/udf/builtin/builtin.go`` and
``pkg/sources/transformer/builtin/builtin.go``, before 1.6): another name there is refused, as
Numaflow refuses it. The kwargs a builtin reads carry over as text; one it does not read is
listed as not honoured (Numaflow ignores it too), as are ``args`` (no builtin reads them). The
expressions and formats are checked when the spec is read.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Protocol

from tidal import errors
from tidal.spec.builtins import BUILTINS

__all__ = ["convert_builtin"]

_UDF_BUILTINS = ("cat", "filter")
_TRANSFORMER_BUILTINS = ("filter", "eventTimeExtractor", "timeExtractionFilter")


class Converting(Protocol):
    """What the builtin conversion needs of the manifest's converter."""

    def skip(self, path: str, why: str) -> None: ...


def _text(value: Any, at: str) -> str:
    """A kwarg as the text Numaflow reads (its kwargs are strings). YAML reads an unquoted
    ``2006-01-02`` as a date and ``2006-01-02 15:04:05`` as a time: their text is given back; a
    time with a zone cannot be, and is refused."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            raise errors.SpecError(at, "YAML read this as a time with a zone, not as text", "quote it")
        return str(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def convert_builtin(
    conv: Converting, builtin: Mapping[str, Any], at: str, transformer: bool
) -> dict[str, Any]:
    """``builtin`` (at ``at``, a source transformer's when ``transformer``) as ``udf.builtin``."""
    names = _TRANSFORMER_BUILTINS if transformer else _UDF_BUILTINS
    name = builtin.get("name")
    if name not in names:
        what = "source transformer" if transformer else "UDF"
        raise errors.SpecError(
            f"{at}.name",
            f"builtin {name!r} is not one of Numaflow's builtin {what}s ({', '.join(names)})",
            f"use one of {', '.join(names)}, or write the function in Python (udf.map: module:function)",
        )
    out: dict[str, Any] = {"name": name}
    required, optional = BUILTINS[str(name)]
    kwargs = {}
    for key, value in dict(builtin.get("kwargs") or {}).items():
        if key in required + optional:
            kwargs[str(key)] = _text(value, f"{at}.kwargs.{key}")
        else:
            conv.skip(f"{at}.kwargs.{key}", f"the {name} builtin does not read it (Numaflow ignores it too)")
    if kwargs:
        out["kwargs"] = kwargs
    if builtin.get("args"):
        conv.skip(f"{at}.args", "Numaflow's builtins do not read args")
    return out

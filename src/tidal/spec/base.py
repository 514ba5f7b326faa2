"""The one base of every spec model: camelCase keys as in YAML, unknown keys refused, frozen."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["Model"]


class Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        arbitrary_types_allowed=True,
        # Validators are built on first use, not at import: Spark's Python workers unpickle specs
        # (no validation) and should not pay for building every model's schema.
        defer_build=True,
        allow_inf_nan=False,  # .inf and .nan in YAML are refused, with the field's path
    )

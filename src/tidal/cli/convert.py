"""``tidal convert``: a Numaflow manifest printed as the Tidal spec it runs as (:mod:`tidal.spec.manifest`).

The output is YAML a user can keep and edit; what Tidal does not honour of the manifest is at its
top, as comments, one field per line with the reason. The spec is validated before it is printed,
so a manifest that would not run fails here with the same error ``tidal run`` gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml
from rich.console import Console
from rich.markup import escape

from tidal import errors

__all__ = ["convert_command", "read_handlers"]


class _Plain(yaml.SafeDumper):
    """YAML a person keeps and edits: a value two vertices share (a tag list) is written out at
    each place, not as an anchor (``&id001``) and its alias."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def read_handlers(path: str | Path | None) -> dict[str, str]:
    """A handlers file: YAML mapping a vertex name or an image to ``module:handler``."""
    if path is None:
        return {}
    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, Mapping) or not all(isinstance(v, str) for v in data.values()):
        raise errors.SpecError(
            str(path),
            "is not a mapping of vertex names or images to handlers",
            "write e.g. cat: mymodule:cat",
        )
    return {str(k): str(v) for k, v in data.items()}


def convert_command(path: str, handlers: str | None = None, console: Console | None = None) -> int:
    """Print the Tidal spec of the Numaflow manifest at ``path``; 2 when it cannot be converted."""
    from tidal.spec import manifest, parse_pipeline

    console = console or Console(highlight=False)
    try:
        data = yaml.safe_load(Path(path).read_text())
        if not isinstance(data, Mapping) or not manifest.is_manifest(data):
            raise errors.SpecError(
                "apiVersion", "is not Numaflow's", f"give a {manifest.API_GROUP}v1alpha1 manifest"
            )
        converted = manifest.convert(data, read_handlers(handlers))
        parse_pipeline(converted.data)  # the same checks tidal run makes
    except (OSError, yaml.YAMLError, errors.SpecError) as exc:
        console.print(f"[red]cannot convert {escape(path)}[/]:\n{escape(str(exc))}")
        return 2
    lines = [f"# Converted from {path} (Numaflow {data.get('kind')}) by tidal convert."]
    lines += [f"# Not honoured: {line}" for line in converted.ignored]
    text = yaml.dump(converted.data, Dumper=_Plain, sort_keys=False)
    print("\n".join(lines) + "\n" + text, end="")
    return 0

"""``tidal cluster up|down|status DIR``: a standalone Spark cluster on 127.0.0.1 between commands.

``up`` starts a master and workers (:class:`~tidal.spark.cluster.standalone.StandaloneCluster`), prints the
master URL to pass as ``tidal run --master``, and leaves them running; ``down`` stops them by the
PIDs recorded in ``DIR/cluster.json``; ``status`` shows the master's view.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from tidal import errors

__all__ = ["cluster_command"]


def cluster_command(action: str, directory: str, workers: int, cores: int, memory: str) -> int:
    from tidal.spark.cluster.standalone import StandaloneCluster, master_state

    console = Console()
    try:
        if action == "up":
            cluster = StandaloneCluster(directory, workers=workers, cores=cores, memory=memory)
            info = cluster.start().info
            assert info is not None
            console.print(f"cluster up: [bold]{info.master}[/] ({workers} workers × {cores} cores)")
            console.print(f"  master UI: {info.web}   stop with: tidal cluster down {escape(directory)}")
            console.print(f"  run on it: tidal run PIPELINE.yaml --master {info.master}")
            return 0
        if action == "down":
            info = StandaloneCluster.down(directory)
            console.print(f"cluster {info.master} stopped (PIDs {', '.join(map(str, info.pids))})")
            return 0
        info = StandaloneCluster.read(directory)
        state = master_state(info.web)
        console.print(
            f"{info.master}: {state.get('aliveworkers', 0)} workers alive, "
            f"{state.get('coresused', 0)}/{state.get('cores', 0)} cores used, "
            f"{len(state.get('activeapps', []))} applications"
        )
        return 0
    except (errors.TidalError, OSError) as exc:
        console.print(f"[red]cluster {action}[/]: {escape(str(exc))}")
        return 1

"""The ``tidal`` command: argument parsing and dispatch only."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tidal import __version__

# name → module under tidal.bench with a ``main() -> int`` (or ``module:function``)
BENCHMARKS = {
    "scaling": "scaling",
    "buffers": "buffers",
    "throughput": "throughput",
    "decisions": "decisions",
    "cluster": "cluster",
    "kafka": "kafka",
    "sql": "sql",
    "policies": "policies",
    "policies-defaults": "policies:main_numaflow_defaults",
    "policies-cluster": "policies:main_cluster",
    "policies-chaining": "policies:main_chaining",
    "peers": "peers",
    "peers-waves": "peers:main_waves",
    "http": "http",
    "latency": "latency",
    "reduce": "reduce",
    "reduce-elastic": "reduce_elastic",
    "reduce-pause": "reduce_pause",
    "step-shuffle": "step_shuffle",
    "hosts": "hosts",
    "receivers": "receiver_hosts",
    "flow-control": "flow_control",
    "chaos": "chaos",
    "chaos-rounds": "chaos:main_three_rounds",
    "chaos-receivers": "chaos_receivers",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidal", description="Autoscaling streaming pipelines on Spark.")
    parser.add_argument("--version", action="version", version=f"tidal {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a pipeline with a live view; writes a report when it stops")
    run.add_argument("pipeline", help="the pipeline's YAML file")
    run.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    run.add_argument(
        "--run-dir",
        default=None,
        help="where the run keeps its state: resumed if it holds this pipeline's run, refused if another's",
    )
    run.add_argument(
        "--reset", action="store_true", help="delete the run directory's state first and start over"
    )
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="run the pipeline for real (it reads its sources and writes its sinks, in its own run "
        "directory) but only recommend scaling: decisions are shown and logged, never applied",
    )
    run.add_argument(
        "--drain",
        action="store_true",
        help="at the end (duration, Ctrl-C, SIGTERM) stop the sources, let the other vertices process "
        "what is in their buffers, then stop (a second Ctrl-C stops at once)",
    )
    run.add_argument("--metrics-port", type=int, default=9464, help="Prometheus port on 127.0.0.1 (0 = any)")
    run.add_argument("--no-metrics", action="store_true", help="do not serve Prometheus metrics")
    run.add_argument("--no-live", action="store_true", help="no live table (logs only)")
    run.add_argument(
        "--master",
        default=None,
        help="Spark master: local[N], or spark://HOST:PORT of a standalone cluster, where replicas "
        "become executors (default: cluster.master in the pipeline, else local[2])",
    )
    run.add_argument(
        "--master-ui",
        default=None,
        metavar="URL",
        help="the standalone master's web UI, where its capacity and the executors that fail to start "
        "are read (default: port 8080 on the master's host, Spark's default)",
    )
    run.add_argument(
        "--cluster",
        default=None,
        metavar="local:N[xC]",
        help="start a standalone cluster of N workers (C cores each, default 2) on 127.0.0.1 for this "
        "run and stop it afterwards",
    )
    run.add_argument("--ui", action="store_true", help="serve the web dashboard of this run while it runs")
    run.add_argument("--ui-port", type=int, default=8470, help="the dashboard's port on 127.0.0.1 (0 = any)")

    run.add_argument(
        "--api-port",
        type=int,
        default=0,
        help="the control API's port (default 0: any free port; api.json says)",
    )
    run.add_argument("--api-host", default="127.0.0.1", help="the control API's address (default 127.0.0.1)")
    run.add_argument(
        "--api-auth",
        default="token",
        choices=["token", "none"],
        help="token (default): writes need the bearer token in RUN_DIR/api.token; none: loopback only",
    )
    run.add_argument("--no-api", action="store_true", help="no control API (tidal scale/pause/resume/apply)")

    run.add_argument(
        "--handlers",
        default=None,
        metavar="FILE",
        help="a Numaflow manifest's containers as pynumaflow handlers: YAML of vertex name or image → "
        "module:handler",
    )

    convert = sub.add_parser(
        "convert", help="print a Numaflow Pipeline or MonoVertex manifest as a Tidal spec"
    )
    convert.add_argument("manifest", help="the Numaflow manifest's YAML file")
    convert.add_argument("--handlers", default=None, metavar="FILE", help="as tidal run --handlers")

    scale = sub.add_parser(
        "scale",
        help="set a running vertex's replicas (its scale subresource), or a reduce vertex's state partitions",
    )
    scale.add_argument("run_dir")
    scale.add_argument("vertex")
    how = scale.add_mutually_exclusive_group(required=True)
    how.add_argument("--replicas", type=int, help="the replica count, within scale.min..max")
    how.add_argument(
        "--partitions", type=int,
        help="move a reduce vertex's state to this many partitions (its query pauses for the move)",
    )  # fmt: skip

    get = sub.add_parser("get", help="read a running pipeline's scale subresources")
    get.add_argument("what", choices=["scale"])
    get.add_argument("run_dir")
    get.add_argument("vertex", nargs="?", default=None, help="one vertex's Scale (default: a table of all)")

    pause = sub.add_parser(
        "pause", help="pause a running pipeline: sources stop, buffers drain, replicas to 0"
    )
    pause.add_argument("run_dir")
    pause.add_argument("--no-drain", action="store_true", help="do not wait for the buffers to empty")
    pause.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for the drain (default 120)"
    )

    resume = sub.add_parser("resume", help="resume a paused pipeline where it stopped")
    resume.add_argument("run_dir")

    apply = sub.add_parser("apply", help="apply a changed pipeline spec to a running pipeline (live edit)")
    apply.add_argument("pipeline", help="the pipeline's YAML file, changed")
    apply.add_argument("--run-dir", required=True, help="the run directory of the running pipeline")
    apply.add_argument(
        "--restart",
        action="store_true",
        help="also apply what needs a restart (a step's code or options, buffer limits, the trigger): "
        "the run drains and starts again with the new spec on the same run directory",
    )

    ui = sub.add_parser("ui", help="a web dashboard of runs, live or finished (read-only)")
    ui.add_argument(
        "run_dirs", nargs="+", metavar="RUN_DIR", help="one or more run directories, side by side"
    )
    ui.add_argument("--port", type=int, default=8470, help="port (default 8470; 0 = any free port)")
    ui.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)"
    )

    events = sub.add_parser("events", help="the decisions of a run, with their reasons")
    events.add_argument("run_dir")
    events.add_argument("--vertex", default=None, help="only this vertex")
    events.add_argument("--changes", action="store_true", help="only decisions that changed replicas")

    status = sub.add_parser("status", help="the state of a run (live or finished)")
    status.add_argument("run_dir")

    demo = sub.add_parser("demo", help="the autoscaling demo (Spark local mode, SQLite), 2–3 minutes")
    demo.add_argument("--duration", type=float, default=None, help="shorter or longer than the wave")
    demo.add_argument(
        "--cluster",
        action="store_true",
        help="on a standalone cluster of four two-core workers on 127.0.0.1: executors follow the wave",
    )

    cluster = sub.add_parser("cluster", help="start or stop a standalone Spark cluster on 127.0.0.1")
    cluster.add_argument("action", choices=["up", "down", "status"])
    cluster.add_argument("dir", help="where the cluster keeps its logs, work directories and cluster.json")
    cluster.add_argument("--workers", type=int, default=2, help="workers (default 2)")
    cluster.add_argument("--cores", type=int, default=2, help="cores per worker (default 2)")
    cluster.add_argument("--memory", default="2g", help="memory per worker (default 2g)")

    agent = sub.add_parser(
        "agent", help="start an HTTP source's receivers on this host for runs on others (receiverHosts)"
    )
    agent.add_argument("--listen", required=True, metavar="ADDR:PORT", help="this host's address and a port")
    agent.add_argument("--log-dir", default="tidal-agent", help="where the receivers' logs go")
    agent.add_argument("--token-file", default=None, help="require this file's token (the run's agentToken)")
    agent.add_argument("--token-env", default=None, help="require the token in this environment variable")

    from tidal.sim import POLICIES, TRACES
    from tidal.spec import DEFAULT_POLICY

    simulate = sub.add_parser(
        "simulate", help="replay a traffic trace through a policy in the simulator (seconds, no Spark)"
    )
    simulate.add_argument(
        "pipeline", nargs="?", default=None, help="a pipeline YAML (default: in → work → out)"
    )
    simulate.add_argument("--trace", default="step-x2", choices=list(TRACES), help="the traffic shape")
    simulate.add_argument(
        "--policy", default=DEFAULT_POLICY, choices=[*POLICIES, "all"], help="the scaling policy"
    )
    simulate.add_argument("--seed", type=int, default=0, help="the trace's seed")
    simulate.add_argument(
        "--capacity",
        action="append",
        default=[],
        metavar="VERTEX=MSGS",
        help="messages/s one replica of VERTEX processes (repeatable; default by kind)",
    )
    simulate.add_argument("--startup", type=float, default=8.0, help="seconds before a new replica works")
    simulate.add_argument("--out", default=None, help="where to write scores, plots and changes")

    bench = sub.add_parser("bench", help="run a benchmark; results go to runs/bench/")
    bench.add_argument("name", choices=[*BENCHMARKS, "all"], help="which benchmark")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        from tidal.cli.run import run_pipeline

        return run_pipeline(
            args.pipeline,
            duration=args.duration,
            run_dir=args.run_dir,
            dry_run=args.dry_run,
            reset=args.reset,
            drain=args.drain,
            metrics_port=None if args.no_metrics else args.metrics_port,
            live=not args.no_live,
            master=args.master,
            master_ui=args.master_ui,
            ui_port=args.ui_port if args.ui else None,
            cluster=args.cluster,
            api=None if args.no_api else (args.api_port, args.api_host, args.api_auth),
            handlers=args.handlers,
        )
    if args.command == "convert":
        from tidal.cli.convert import convert_command

        return convert_command(args.manifest, args.handlers)
    if args.command in ("scale", "get", "pause", "resume", "apply"):
        from tidal.cli import control

        if args.command == "scale" and args.partitions is not None:
            return control.partitions(args.run_dir, args.vertex, args.partitions)
        if args.command == "scale":
            return control.scale(args.run_dir, args.vertex, args.replicas)
        if args.command == "get":
            return control.get_scale(args.run_dir, args.vertex)
        if args.command == "pause":
            return control.pause(args.run_dir, drain=not args.no_drain, timeout=args.timeout)
        if args.command == "resume":
            return control.resume(args.run_dir)
        return control.apply(args.pipeline, args.run_dir, restart=args.restart)
    if args.command == "ui":
        from tidal.cli.dashboard import serve

        return serve(args.run_dirs, port=args.port, host=args.host)
    if args.command == "events":
        from tidal.cli.inspect import show_events

        return show_events(args.run_dir, args.vertex, args.changes)
    if args.command == "status":
        from tidal.cli.inspect import show_status

        return show_status(args.run_dir)
    if args.command == "demo":
        from tidal.cli import demo

        return demo.run(duration=args.duration, cluster=args.cluster)
    if args.command == "cluster":
        from tidal.cli.cluster import cluster_command

        return cluster_command(args.action, args.dir, args.workers, args.cores, args.memory)
    if args.command == "agent":
        from tidal.request.agent import serve as serve_agent

        try:
            return serve_agent(args.listen, Path(args.log_dir), args.token_file, args.token_env)
        except (OSError, ValueError) as exc:
            print(f"tidal agent: {exc}", file=sys.stderr)
            return 2
    if args.command == "simulate":
        from tidal.cli.simulate import run_simulation

        return run_simulation(
            args.pipeline,
            args.trace,
            args.policy,
            seed=args.seed,
            capacities=args.capacity,
            startup=args.startup,
            out=args.out,
        )
    if args.command == "bench":
        import importlib

        names = list(BENCHMARKS) if args.name == "all" else [args.name]
        status = 0
        for name in names:
            module_name, _, function = BENCHMARKS[name].partition(":")
            module = importlib.import_module(f"tidal.bench.{module_name}")
            status |= getattr(module, function or "main")()
        return status
    return 2


if __name__ == "__main__":
    sys.exit(main())

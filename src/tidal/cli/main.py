"""The ``tidal`` command: argument parsing and dispatch only."""

from __future__ import annotations

import argparse
import sys

from tidal import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidal", description="Autoscaling streaming pipelines on Spark.")
    parser.add_argument("--version", action="version", version=f"tidal {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the demo on the embedded defaults (Spark local mode, SQLite)")
    bench = sub.add_parser("bench", help="run a benchmark; results go to bench/results/")
    bench.add_argument("name", choices=[*BENCHMARKS, "all"], help="which benchmark")
    return parser


# name → module under tidal.bench with a ``main(out) -> int``
BENCHMARKS = {"scaling": "scaling", "buffers": "buffers"}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from tidal.cli import demo

        return demo.run()
    if args.command == "bench":
        import importlib

        names = list(BENCHMARKS) if args.name == "all" else [args.name]
        status = 0
        for name in names:
            module = importlib.import_module(f"tidal.bench.{BENCHMARKS[name]}")
            status |= module.main()
        return status
    return 2


if __name__ == "__main__":
    sys.exit(main())

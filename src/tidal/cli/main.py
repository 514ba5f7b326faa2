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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from tidal.cli import demo

        return demo.run()
    return 2


if __name__ == "__main__":
    sys.exit(main())

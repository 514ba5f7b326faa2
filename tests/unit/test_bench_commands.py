"""Every `tidal bench NAME` names a function that exists, and the policies settings are the
commands the CLI offers (a renamed function would otherwise fail only when someone runs it)."""

from __future__ import annotations

import importlib

from tidal.bench.policies import SETTINGS
from tidal.cli.main import BENCHMARKS


def test_every_benchmark_names_a_function_that_exists() -> None:
    for name, target in BENCHMARKS.items():
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(f"tidal.bench.{module}"), function or "main")), name


def test_each_policies_setting_is_a_command() -> None:
    assert {n for n in BENCHMARKS if n.startswith("policies")} == set(SETTINGS)
    assert all(name == s.name for name, s in SETTINGS.items())
    assert SETTINGS["policies-cluster"].cluster and SETTINGS["policies-cluster"].master is None

"""The run's controller, built from what the run started: its probe on the buffers, the control
record and the request paths; its policies; under ``--dry-run`` an actuator that only
recommends; paused if the run directory is; and resumed from what a killed driver saved.

One function, apart from :class:`~tidal.spark.run.pipeline.PipelineRun`, so the run's start
reads as the order things start in, and the controller's wiring has one home.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from tidal.controller import Controller, EventLog, StoreProbe
from tidal.controller.choose import spec_policies
from tidal.controller.replicas import DryRunActuator
from tidal.controller.restart import StateFile

__all__ = ["build_controller"]


def build_controller(run: Any) -> Controller:
    """The controller of ``run``, a :class:`~tidal.spark.run.pipeline.PipelineRun` whose queries and
    request paths started (typed loosely: the run imports this module), not yet ticking."""
    from tidal.spark.sources.http import probe_sample

    assert run.control is not None and run.buffers is not None
    actuator = DryRunActuator() if run.dry_run else run.control  # the readers consult it
    probe = StoreProbe(
        run.control_spec,
        run.buffers,
        run.control,
        running=run.running,
        slots=run.allocator.ready if run.allocator is not None else None,
        attainable=run.allocator.attainable if run.allocator is not None else None,
        measured={n: functools.partial(probe_sample, p) for n, p in run.requests.items()},
        source_pending=_asked_in_the_driver(run),
    )
    controller = Controller(
        run.control_spec,
        probe,
        actuator,
        EventLog(run.run_dir / "events.jsonl"),
        operator=run.control,  # a person's writes apply even under --dry-run
        policies=spec_policies(
            run.control_spec,
            time.time(),
            run.control.replicas,
            run.requests,
            starts_per_tick=run.starts_per_tick,
        ),
    )
    controller.paused = run.control.phase() != "Running"  # paused: no decisions until resumed
    # A restart resumes the killed driver's windows, cooldowns and learning (events say what).
    controller.state_file = StateFile(run.run_dir / "controller.state")
    if (saved := controller.state_file.load()) is not None:
        controller.restore(saved, time.time())
    return controller


def _asked_in_the_driver(run: Any) -> dict[str, Callable[[], float | None]]:
    """The sources whose kind says what is pending from the driver at any moment
    (:meth:`~tidal.spark.sources.connector.SourceConnector.driver_pending`): the probe asks them
    instead of reading their reader's last report, which a restarting query does not renew."""
    from tidal.spark.sources.connector import source_connector

    asked = {}
    for v in run.control_spec.vertices:
        if v.source is None or v.name in run.requests:
            continue
        pending = source_connector(v.source).driver_pending(run.query_config(v.name))
        if pending is not None:
            asked[v.name] = pending
    return asked

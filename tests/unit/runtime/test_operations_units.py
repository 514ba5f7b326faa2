"""Everyday operations that must not lose or hide anything (issue #16), without Spark: the run
directory's identity, per-call UDF time limits, the stuck condition, the controller's warm-up
gate, bounds on numbers a spec may hold, and a recurring failure logged once per kind."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from tidal import errors
from tidal.controller import Controller, EventLog, StoreProbe
from tidal.log import Repeated
from tidal.scaling import Rule
from tidal.spark.batch import rundir
from tidal.spark.query.udf import Transform, UdfTimeout
from tidal.spec import parse_pipeline
from tidal.spec.chains import folded, plan_chains
from tidal.spec.model import UdfSpec
from tidal.testing import BufferRig


def _pipeline(
    name: str = "step1", rate: float = 10.0, scale: dict[str, object] | None = None
) -> dict[str, object]:
    return {
        "name": name,
        "vertices": [
            {"name": "gen", "source": {"generator": {"rate": rate}}},
            {"name": "work", "udf": {"map": "tidal.examples.udfs:upper"}, "scale": scale or {}},
            {"name": "out", "sink": {"log": {}}},
        ],
        "edges": [{"from": "gen", "to": "work"}, {"from": "work", "to": "out"}],
    }


def test_a_run_directory_of_another_pipeline_is_refused_naming_both(tmp_path):
    assert rundir.claim(tmp_path / "run", parse_pipeline(_pipeline("step1"))) is False
    with pytest.raises(errors.RunDirectoryError) as refused:
        rundir.claim(tmp_path / "run", parse_pipeline(_pipeline("other")))
    text = str(refused.value)
    assert "'step1'" in text and "'other'" in text and "--run-dir" in text and "--reset" in text


def test_the_same_pipeline_with_other_data_is_refused_but_other_scaling_resumes(tmp_path):
    rundir.claim(tmp_path, parse_pipeline(_pipeline(rate=10)))
    assert rundir.claim(tmp_path, parse_pipeline(_pipeline(rate=10, scale={"max": 7}))) is True
    with pytest.raises(errors.RunDirectoryError, match="whose data differs"):
        rundir.claim(tmp_path, parse_pipeline(_pipeline(rate=20)))
    rundir.reset(tmp_path)
    assert rundir.claim(tmp_path, parse_pipeline(_pipeline(rate=20))) is False


def _hangs(payload: bytes) -> bytes:
    if payload == b"hang":
        time.sleep(30)
    return payload.upper()


def test_a_hanging_call_times_out_and_goes_to_the_dead_letter():
    udf = UdfSpec(map=_hangs, retries=1, timeout_seconds=0.2)
    started = time.monotonic()
    outcome = Transform("v", udf, dead_letter=True).apply(["a", "b", "c"], [b"x", b"hang", b"y"])
    assert time.monotonic() - started < 5  # two attempts of 0.2 s, not 30 s
    assert outcome.ids.to_pylist() == ["a", "c"] and outcome.payloads.to_pylist() == [b"X", b"Y"]
    ((message_id, payload, error),) = outcome.dead
    assert (message_id, payload) == ("b", b"hang") and "UdfTimeout" in error and "timeoutSeconds 0.2" in error


def test_a_hanging_call_without_dead_letter_stops_naming_the_message():
    udf = UdfSpec(map=_hangs, retries=0, timeout_seconds=0.2)
    with pytest.raises(errors.UdfError) as failed:
        Transform("v", udf, dead_letter=False).apply(["a", "b"], [b"x", b"hang"])
    assert failed.value.message_id == "b" and isinstance(failed.value.cause, UdfTimeout)
    assert "in _hangs" in str(failed.value)  # the user's frame, where it hung


def test_a_vertex_with_pending_and_no_progress_is_reported_stuck_then_unstuck_never_idle(tmp_path):
    """Stuck: pending, nothing processed. Idle (what the executor allocator reads, ``idle_for``):
    nothing pending and nothing processed, since the last time it processed something."""
    spec = parse_pipeline({**_pipeline(), "controller": {"stuckAfterSeconds": 30}})
    with BufferRig(tmp_path) as rig:
        for name in ("work", "out"):
            rig.buffer(name)
        rig.fill("work", 3000)
        controller = Controller(
            spec, StoreProbe(spec, rig.store, rig.control), rig.control, EventLog(tmp_path / "e")
        )
        assert set(controller.idle_for(999.0).values()) == {0.0}  # nothing seen yet: not idle
        for t in range(0, 45, 5):
            controller.tick(1000.0 + t)
        assert controller.stuck(1040.0)["work"] == pytest.approx(40.0)
        assert controller.stuck(1040.0)["out"] is None  # nothing pending: idle, not stuck
        assert controller.idle_for(1045.0)["work"] == pytest.approx(5.0)  # pending at the last tick
        # never had anything: `work`'s 3,000 were on their way until it was stuck (at 1030)
        assert controller.idle_for(1045.0)["out"] == pytest.approx(20.0)
        rig.control.record_batch("out", 0, tasks=1, rows=10)  # it processed something
        controller.tick(1045.0)
        assert controller.idle_for(1050.0)["out"] == pytest.approx(5.0)
        notes = [d for d in EventLog(tmp_path / "e").read() if d.rule == Rule.STUCK]
        assert [d.vertex for d in notes] == ["work"] and "3,000 messages pending" in notes[0].reason
        rig.control.record_batch("work", 0, tasks=1, rows=10)
        controller.tick(1050.0)
        assert controller.stuck(1050.0)["work"] is None
        assert any(d.rule == Rule.UNSTUCK for d in EventLog(tmp_path / "e").read())


def test_messages_pending_upstream_are_work_on_their_way_until_the_upstream_is_stuck(tmp_path):
    """A woken path's source took 13 s to its first batch from 0, and `enrich`'s executors went
    as idle 10 s after its raise with 12,232 orders pending at the source (the cluster's waves,
    2026-12-07). What waits upstream is on its way; a stuck vertex's is not."""
    spec = parse_pipeline({**_pipeline(), "controller": {"stuckAfterSeconds": 30}})
    with BufferRig(tmp_path) as rig:
        for name in ("work", "out"):
            rig.buffer(name)
        controller = Controller(
            spec, StoreProbe(spec, rig.store, rig.control), rig.control, EventLog(tmp_path / "e")
        )
        controller.tick(1000.0)
        controller.tick(1020.0)
        assert controller.idle_for(1020.0)["out"] == pytest.approx(20.0)  # nothing anywhere
        rig.fill("work", 3000)  # waiting at `out`'s upstream, not yet processed
        controller.tick(1025.0)
        assert controller.idle_for(1025.0)["out"] == 0.0
        for t in range(30, 70, 5):
            controller.tick(1000.0 + t)  # `work` processes nothing: stuck 30 s after 1020
        assert controller.stuck(1065.0)["work"] == pytest.approx(45.0)
        assert controller.idle_for(1065.0)["out"] == pytest.approx(20.0)  # on its way until 1045


def test_a_raised_vertex_is_not_idle_so_its_executors_start_with_its_replicas(tmp_path):
    """A raise asks for capacity before the messages: a pre-scale, a wake on the path, a scale
    written from outside. Counted idle, the allocator left its replicas without executors until
    messages were pending (the cluster's waves, 2026-12-06); a lowering is no work."""
    spec = parse_pipeline(_pipeline())
    with BufferRig(tmp_path) as rig:
        for name in ("work", "out"):
            rig.buffer(name)
        controller = Controller(
            spec, StoreProbe(spec, rig.store, rig.control), rig.control, EventLog(tmp_path / "e")
        )
        for t in range(0, 45, 5):
            controller.tick(1000.0 + t)
        assert controller.idle_for(1045.0)["out"] == pytest.approx(45.0)
        controller.external("out", 1, 3, 1045.0, "raised from outside")
        assert controller.idle_for(1045.0)["out"] == 0.0
        assert controller.idle_for(1052.0)["out"] == pytest.approx(7.0)  # idle again from the raise
        assert controller.idle_for(1052.0)["work"] == pytest.approx(52.0)
        controller.external("work", 1, 0, 1052.0, "lowered from outside")
        assert controller.idle_for(1052.0)["work"] == pytest.approx(52.0)


def test_a_pre_scaled_vertex_is_not_idle_until_its_rise_is_due() -> None:
    """A pre-scale asks a start-up ahead: counted idle from the ask, the executor started for
    it was let go 10 s later, just before the wave (the waves, 2026-12-07). Until the rise is
    due it counts as working; from then, idle as any vertex; any other raise, from the raise."""
    from tidal.controller.adaptive import AdaptivePolicy
    from tidal.controller.state import VertexState, due_at, scaled
    from tidal.scaling import Decision, NumaflowScale, Rater, VertexKind

    ahead = Decision("enrich", 100.0, 0, 3, Rule.PRE_SCALE, "pre-scaled", {"rise_due_at": 112.0})
    v = VertexState("enrich", VertexKind.UDF, 120.0, AdaptivePolicy(NumaflowScale(max=6)), Rater())
    scaled(v, 0, 3, 100.0, due_at(ahead))
    assert v.active_at == 112.0 and v.last_scaled_at == 100.0
    up = Decision("enrich", 120.0, 3, 4, Rule.SCALE_UP, "up", {"rise_due_at": 150.0})
    scaled(v, 3, 4, 120.0, due_at(up))
    assert v.active_at == 120.0  # not a pre-scale: from the raise
    scaled(v, 4, 1, 130.0, None)
    assert v.active_at == 120.0  # a lowering is no work
    assert due_at(Decision("enrich", 100.0, 0, 3, Rule.PRE_SCALE, "pre-scaled", {})) is None


def test_the_controller_says_what_the_last_vertices_delivered_and_what_is_pending(tmp_path):
    """``progress``: what the executor allocator measures each executor count by — messages the
    graph's last vertices processed (here ``work``, which ends in the sink ``out`` chained into
    its query), messages pending anywhere, at the last tick."""
    document = _pipeline(scale={"max": 6})
    document["vertices"][0]["scale"] = {"max": 3}  # gen scales on its own: work → out is the chain
    spec = parse_pipeline(document)
    controlled = folded(spec, plan_chains(spec))
    assert [v.name for v in controlled.vertices] == ["gen", "work"]
    with BufferRig(tmp_path) as rig:
        rig.buffer("work")
        rig.fill("work", 3000)
        controller = Controller(
            controlled, StoreProbe(controlled, rig.store, rig.control), rig.control, EventLog(tmp_path / "e")
        )
        assert controller.progress() is None  # before the first tick
        rig.control.record_batch("gen", 0, tasks=1, rows=40)  # feeds work: not delivered
        rig.control.record_batch("work", 0, tasks=1, rows=25)
        controller.tick(1000.0)
        at, delivered, pending = controller.progress() or (0.0, 0.0, 0.0)
        assert (at, delivered) == (1000.0, 25.0) and pending >= 3000


def test_the_controller_waits_for_the_queries_warm_up_before_deciding(tmp_path):
    spec = parse_pipeline({**_pipeline(), "controller": {"intervalSeconds": 0.05}})
    with BufferRig(tmp_path) as rig:
        for name in ("work", "out"):
            rig.buffer(name)
        events = EventLog(tmp_path / "e")
        warm = threading.Event()
        controller = Controller(spec, StoreProbe(spec, rig.store, rig.control), rig.control, events)
        controller.start(ready=warm.is_set)
        time.sleep(0.5)
        assert all(d is None for d in controller.decisions().values())  # no tick during warm-up
        warm.set()
        deadline = time.monotonic() + 120  # the first tick, however busy the machine
        while any(d is None for d in controller.decisions().values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        controller.stop()
        assert all(d is not None for d in controller.decisions().values())


@pytest.mark.parametrize(
    ("generator", "scale", "field"),
    [
        pytest.param({"rate": 1e300}, {}, "generator.rate", id="rate-1e300"),
        pytest.param({"rate": float("inf")}, {}, "generator.rate", id="rate-inf"),
        pytest.param({}, {"max": 99999999999999999999}, "scale.max", id="max-huge"),
        pytest.param({}, {"lookbackSeconds": float("nan")}, "scale.lookbackSeconds", id="lookback-nan"),
    ],
)
def test_numbers_out_of_any_sensible_range_are_refused(generator, scale, field):
    data = _pipeline()
    data["vertices"][0]["source"]["generator"].update(generator)  # type: ignore[index]
    data["vertices"][0]["scale"] = scale  # type: ignore[index]
    with pytest.raises(errors.SpecError, match=field.replace(".", r"\.")):
        parse_pipeline(data)


def test_a_recurring_failure_is_logged_once_per_kind_then_counted(caplog):
    repeated = Repeated(logging.getLogger("tidal.test"), every=0.2)
    with caplog.at_level(logging.WARNING, logger="tidal.test"):
        for _ in range(50):
            repeated.warning(("src", "ConnectionError"), "source %s: broker down", "src")
        repeated.warning(("src", "TimeoutError"), "source %s: slow", "src")
        time.sleep(0.25)
        repeated.warning(("src", "ConnectionError"), "source %s: broker down", "src")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "source src: broker down",
        "source src: slow",
        "source src: broker down (50 more times in the last 0.2 s)",
    ]


def test_the_generators_clock_starts_at_its_first_trigger_not_when_it_was_built(tmp_path):
    from tidal.spark.sources.generator import GeneratorReader
    from tidal.spec.model import GeneratorSpec, SourceSpec

    with BufferRig(tmp_path) as rig:
        rig.buffer("out")
        config = rig.config("gen", input=None, source=SourceSpec(generator=GeneratorSpec(rate=10_000)))
        reader = GeneratorReader(config)
        time.sleep(1.0)  # Spark's warm-up between building the reader and its first trigger
        first = reader.latestOffset({"n": 0})
        assert first["n"] < 2_000  # not the 10,000 a clock started at build time would owe


def test_the_driver_knows_a_generators_pending_while_its_query_runs_no_trigger(tmp_path):
    """A restarting query makes no report for seconds; the driver's count goes on growing."""
    from tidal.spark.sources.generator import CONNECTOR, GeneratorReader
    from tidal.spec.model import GeneratorSpec, SourceSpec

    with BufferRig(tmp_path) as rig:
        rig.buffer("out")
        config = rig.config("gen", input=None, source=SourceSpec(generator=GeneratorSpec(rate=10_000)))
        pending = CONNECTOR.driver_pending(config)
        assert pending() is None  # the shape's clock starts at the first trigger
        reader = GeneratorReader(config)
        end = reader.latestOffset({"n": 0})["n"]
        reported = rig.control.source_report("gen")
        assert reported is not None and reported.pending is not None
        rig.control.record_batch("gen", 0, 1, end)  # the first batch committed
        time.sleep(0.5)  # no trigger meanwhile: the report stays as it was
        start = float(rig.control.meta("generator.gen.start") or "nan")
        before, now, after = time.time(), pending(), time.time()
        assert now is not None  # what the shape made due meanwhile, less the committed batch
        assert 10_000 * (before - start) - end - 1 <= now <= 10_000 * (after - start) - end + 1
        assert now > reported.pending - end + 4_000  # half a second of 10,000/s more than reported


def test_the_status_shows_a_sources_pending_as_the_controller_reads_it(tmp_path):
    """The live status and the dashboard name the number the decisions are made on: the
    generator's pending asked in the driver, not its reader's last report."""
    from types import SimpleNamespace

    from tidal.spark.run.status import _source_pending
    from tidal.spark.sources.generator import CONNECTOR, GeneratorReader
    from tidal.spec.model import GeneratorSpec, SourceSpec

    spec = parse_pipeline(_pipeline(rate=10_000))
    with BufferRig(tmp_path) as rig:
        rig.buffer("out")
        config = rig.config("gen", input=None, source=SourceSpec(generator=GeneratorSpec(rate=10_000)))
        probe = StoreProbe(spec, rig.store, rig.control, {"gen": CONNECTOR.driver_pending(config)})
        GeneratorReader(config).latestOffset({"n": 0})  # the first trigger: its report
        reported = rig.control.source_report("gen")
        assert reported is not None and reported.pending is not None
        time.sleep(0.5)  # no trigger meanwhile: the report stays as it was
        run = SimpleNamespace(controller=SimpleNamespace(probe=probe))
        shown = _source_pending(run, "gen")
        assert shown is not None and shown > reported.pending + 4_000  # half a second of 10,000/s


def test_status_and_events_fit_80_columns():
    from rich.console import Console

    from tidal.observe.live import status_table
    from tidal.spark.run.pipeline import VertexStatus

    row = VertexStatus(
        "enrich-orders", "udf", True, 4, 6, 27716.0, 1234.5, 0.93, 1_234_567, "scale-up",
        "avg pending 10866 at 600/s over 4 replicas, target 5 s → 10 (clamped to [0, 6]) (step +2 of 6)",
        dead=3, stuck_for=75.0,
    )  # fmt: skip
    console = Console(width=80, record=True, color_system=None)
    console.print(status_table([row, row], "orders — 120 s", width=console.width))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "[0, 6]" in text and "STUCK" in text and "enrich-orders [scale-up] avg pending" in text


def test_spark_output_and_py4j_root_logging_go_to_the_run_log_not_the_terminal(tmp_path):
    """What py4j logs through the root logger when a Ctrl-C interrupts a call, and whatever
    Spark's processes write to fd 2, land in spark.log; Tidal's own lines still reach the terminal."""
    import subprocess
    import sys

    code = (
        "import logging, os, sys\n"
        "from pathlib import Path\n"
        "from tidal import log\n"
        "from tidal.cli.spark_log import spark_output_to\n"
        "log.configure()\n"
        f"with spark_output_to(Path({str(tmp_path / 'spark.log')!r})):\n"
        "    try:\n"
        "        raise RuntimeError('reentrant call')\n"
        "    except RuntimeError:\n"
        "        logging.exception('Exception while sending command.')\n"
        "    os.write(2, b'JVM trace line\\n')\n"
        "    logging.getLogger('tidal.controller').warning('tidal line')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "tidal line" in done.stderr
    assert "Traceback" not in done.stderr and "JVM trace" not in done.stderr, done.stderr
    spark_log = (tmp_path / "spark.log").read_text()
    assert "Exception while sending command." in spark_log and "JVM trace line" in spark_log


def test_a_sigterm_that_a_jvm_call_swallowed_still_stops_the_wait() -> None:
    """A KeyboardInterrupt that something swallowed: the handler also remembered the signal, and
    the wait loop's check raises it again."""
    import contextlib
    import signal

    from tidal.cli import interrupts

    interrupts.clear()
    check = interrupts.checked(lambda: False)
    assert check() is False
    previous = interrupts.install()
    try:
        with contextlib.suppress(KeyboardInterrupt):  # as a call that swallows it
            signal.raise_signal(signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            check()
    finally:
        interrupts.restore(previous)
        interrupts.clear()
    assert interrupts.checked(lambda: True)() is True


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_stop_signal_inside_a_jvm_call_lets_the_call_finish_and_the_wait_raises_it(name: str) -> None:
    """Ctrl-C landing in a py4j call made PySpark's cancel fail with a Py4JError and a traceback
    (seen under load): inside py4j the handler only remembers the stop; outside it interrupts."""
    import signal

    from tidal.cli import interrupts

    signum = getattr(signal, name)
    in_py4j = {"__name__": "py4j.java_gateway", "signal": signal, "signum": signum}
    interrupts.clear()
    previous = interrupts.install()
    try:
        exec("signal.raise_signal(signum); finished = True", in_py4j)  # a JVM call under way
        assert in_py4j["finished"] is True  # not interrupted half-way
        with pytest.raises(KeyboardInterrupt):
            interrupts.checked(lambda: False)()
        with pytest.raises(KeyboardInterrupt):  # a second one: at once, even inside a call
            exec("signal.raise_signal(signum)", in_py4j)
        interrupts.clear()
        with pytest.raises(KeyboardInterrupt):  # outside a call: at once
            signal.raise_signal(signum)
    finally:
        interrupts.restore(previous)
        interrupts.clear()
    assert signal.getsignal(signum) is previous[signum]


def test_an_http_sources_line_says_how_many_receivers_run_on_each_host_when_they_are_elsewhere():
    from tidal.observe.live import request_line

    report = {"url": "http://10.0.0.10:8080/", "at": 1.0, "rps": 120.0, "concurrency": 3.5, "held": 0,
              "ready": 3, "refused": 2, "in_path": True}  # fmt: skip
    beside = request_line("in", report)
    assert "3 receivers," in beside and "(" not in beside.split("receivers")[0][-3:]
    spread = request_line("in", {**report, "hosts": {"10.0.0.11": 2, "10.0.0.12": 1}})
    assert "3 receivers (10.0.0.11: 2, 10.0.0.12: 1)," in spread, spread
    assert "3 receivers (no host)," in request_line("in", {**report, "hosts": {}})


def test_an_event_line_a_kill_cut_short_costs_only_itself(tmp_path):
    """A driver SIGKILLed mid-write leaves a line without its end; the restarted run appends after
    it. Reading skips the cut line, and the next decision lands on a line of its own."""
    from tidal.controller.faults import FaultLog, read_faults
    from tidal.scaling import Decision, Rule

    def decision(at: float, desired: int) -> Decision:
        return Decision(vertex="v", at=at, current=1, desired=desired, rule=Rule.SCALE_UP, reason="r")

    log = EventLog(tmp_path / "events.jsonl")
    log.record(decision(1.0, 2))
    with (tmp_path / "events.jsonl").open("a") as f:
        f.write('{"vertex": "v", "at": 2.0, "curr')  # the kill
    EventLog(tmp_path / "events.jsonl").record(decision(3.0, 3))
    assert [(d.at, d.desired) for d in EventLog(tmp_path / "events.jsonl").read()] == [(1.0, 2), (3.0, 3)]

    (tmp_path / "faults.jsonl").write_text('{"at": 1, "kind": "dri')
    FaultLog(tmp_path / "faults.jsonl").record("driver", "(run)", "restarted", at=5.0)
    assert [f["at"] for f in read_faults(tmp_path)] == [5.0]

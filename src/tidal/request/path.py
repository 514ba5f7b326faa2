"""The request path of one HTTP source, run beside Spark by the pipeline's driver.

:class:`RequestPath` starts the activators (always on, the public address; several share it
with ``SO_REUSEPORT``, each balancing over its slice of the receivers) and keeps as many
receiver processes as the controller wants for the source (``replicas()``), each on its own
port: beside the driver on loopback, or on worker hosts through their agents
(:mod:`tidal.request.launch`, ``source.http.receiverHosts``):

* **Readiness is observed**: a receiver counts once it answered Knative's queue probe
  (``GET /_tidal/ready`` → "queue"); only then does the activator learn of it.
* **Scale-down drains**: the activator forgets the receiver first, then it gets SIGTERM, fails
  its probe and finishes what is in flight. A receiver that dies is replaced.
* **Statistics every second**, as Knative's autoscaler scrapes queue-proxies and receives the
  activators' pushes (§3.3–3.5): the receivers' concurrency and RPS minus their proxied part,
  plus every activator's own, make one revision-wide sample for the KPA (:meth:`take_samples`).
  With more than three receivers it scrapes a sample of them, as Knative's scraper does
  (:mod:`tidal.scaling.scrape_sample`: older receivers first, the sums scaled up to all); a
  receiver left out keeps its last counters until it is sampled again.
* **Pokes**: an activator's datagram for a first request records its immediate one-request
  sample (Knative's concurrency reporter), and every poke calls ``on_poke`` (the controller ticks
  at once).

Every process is stopped by PID in :meth:`stop`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tidal import errors
from tidal.controller.faults import FaultLog
from tidal.request import scrape
from tidal.request.activator import CANNOT_LISTEN as ACTIVATOR_CANNOT_LISTEN
from tidal.request.activator import READY_LINE as ACTIVATOR_LINE
from tidal.request.activator import ActivatorConfig
from tidal.request.children import Child, get, ports, put
from tidal.request.launch import Launcher, LocalLauncher, exit_reason
from tidal.request.receiver import ReceiverConfig
from tidal.request.scrape import RequestSample

__all__ = ["RequestPath", "RequestSample"]

log = logging.getLogger("tidal.request")

START_TIMEOUT = 30.0  # seconds for a process to print its port
STALE_AFTER = 5.0  # seconds after which the last report no longer says what is held
DRAIN_TIMEOUT = 30.0  # seconds a stopping receiver gets to finish in flight (Knative drains 30 s)


class RequestPath:
    def __init__(
        self,
        activator: ActivatorConfig,
        receiver: ReceiverConfig,
        replicas: Callable[[], int],
        log_dir: Path,
        *,
        on_poke: Callable[[], None] | None = None,
        series: Path | None = None,
        activators: int = 1,
        window: float = 60.0,
        launcher: Launcher | None = None,
        faults: FaultLog | None = None,
    ) -> None:
        if activators < 1:
            raise ValueError(f"activators must be ≥ 1 (got {activators})")
        self._activator_count = activators
        self._window = window  # a receiver ready for less than this is young (Knative's stable window)
        self._rng = random.Random()
        self.sampled: tuple[int, int] = (0, 0)  # receivers answered of those ready, last scrape
        self.activator_config = activator
        self.receiver_config = receiver
        self._replicas = replicas
        self._on_poke = on_poke
        self._log_dir = log_dir
        self.launcher = launcher or LocalLauncher(log_dir)  # where receivers run (tidal.request.launch)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._activators: list[Child] = []
        self._names: list[str] = []  # the activators' names: each infers its index from them
        self._receivers: list[Child] = []
        self._stopping: list[Child] = []
        self._samples: list[RequestSample] = []
        self._accepted_gone = 0  # accepted by receivers that are gone
        self._refused_gone = 0
        self._unauthorized_gone = 0
        self._peak_gone = 0
        self._series = series  # one line a second: the request path's figures (requests.jsonl)
        self._faults = faults  # one line per receiver that ended unasked (faults.jsonl)
        self._pushed: tuple[tuple[str, ...], bool] | None = None
        self._lost: list[str] = []  # receivers found dead since the last push
        self.in_path = True
        self.port = 0
        self.last: RequestSample | None = None
        self._threads: list[threading.Thread] = []
        self._udp: socket.socket | None = None
        self._stopped = False

    # -- life ----------------------------------------------------------------------------------

    def _spawn(self, module: str, config_json: str, name: str) -> subprocess.Popen[str]:
        self._log_dir.mkdir(parents=True, exist_ok=True)
        with (self._log_dir / f"{name}.log").open("a") as err:
            return subprocess.Popen(
                [sys.executable, "-m", module, config_json],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                start_new_session=True,  # a Ctrl-C to the run reaches the run, which stops these by PID
            )

    def start(self) -> RequestPath:
        self._udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._udp.bind(("127.0.0.1", 0))
        self._udp.settimeout(0.2)
        poke_port = self._udp.getsockname()[1]
        config = dataclasses.replace(self.activator_config, poke_port=poke_port)
        self._names = [f"activator-{i:02d}" for i in range(self._activator_count)]
        for name in self._names:  # the first takes the port; the others share it (SO_REUSEPORT)
            config = dataclasses.replace(config, name=name, port=self.port or config.port)
            proc = self._spawn(
                "tidal.request.activator", config.to_json(), name if len(self._names) > 1 else "activator"
            )
            child = Child(proc, time.time())
            self._activators.append(child)
            try:
                child.port, self.port = ports(proc.stdout, ACTIVATOR_LINE, START_TIMEOUT)
            except RuntimeError as exc:
                self.stop()
                raise self._not_started(name, exc) from None
        # Receivers hold the same public port while the activator is out of the path.
        self.receiver_config = dataclasses.replace(
            self.receiver_config, public_host=config.host, public_port=self.port
        )
        for target in (self._listen_for_pokes, self._reconcile_loop, self._scrape_loop):
            thread = threading.Thread(target=target, name=f"tidal-{target.__name__}", daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info(
            "http source %s: %d activator(s) on %s:%d",
            self.activator_config.vertex, len(self._activators), config.host, self.port,
        )  # fmt: skip
        return self

    def _not_started(self, name: str, exc: Exception) -> Exception:
        """Why an activator did not start: its public address said plainly (the spec's field), or
        the end of its log."""
        log_name = name if len(self._names) > 1 else "activator"
        log_file = self._log_dir / f"{log_name}.log"
        lines = log_file.read_text(errors="replace").splitlines() if log_file.exists() else []
        vertex = self.activator_config.vertex
        said = [line for line in lines if line.startswith(ACTIVATOR_CANNOT_LISTEN)]
        if said:
            return errors.SpecError(
                f"vertices[{vertex}].source.http",
                f"the activator cannot listen on {said[-1].split(' ', 1)[1]}",
                "give host an address of this host (ip -br addr) and a free port, or port: 0 for any",
            )
        tail = " | ".join(lines[-3:]) or "no log"
        return RuntimeError(f"the activator {name} of {vertex} did not start: {exc} ({log_file}: {tail})")

    def stop(self) -> None:
        """Stop every process by PID (receivers finish what is in flight). Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        with self._lock:
            everyone = [*self._receivers, *self._stopping]
            self._receivers, self._stopping = [], []
        everyone.extend(self._activators)
        for p in everyone:
            if p.proc.poll() is None:
                p.proc.send_signal(signal.SIGTERM)
        for p in everyone:
            try:
                p.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.proc.kill()
                p.proc.wait(timeout=5)
            if p.proc.stdout is not None:
                p.proc.stdout.close()
        if self._udp is not None:
            self._udp.close()

    # -- what the run reads --------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.activator_config.host}:{self.port}/"

    def running(self) -> bool:
        """The activators are up (the source takes requests, whatever its receivers)."""
        alive = [a for a in self._activators if a.proc.poll() is None]
        return bool(alive) and len(alive) == len(self._activators) and not self._stop.is_set()

    def ready(self) -> int:
        with self._lock:
            return sum(1 for r in self._receivers if r.ready_at is not None)

    def accepted(self) -> int:
        """Messages the receivers stored since the run started (the source's processed count)."""
        with self._lock:
            return self._accepted_gone + sum(r.accepted for r in [*self._receivers, *self._stopping])

    def report(self) -> dict[str, Any]:
        """The last one-second figures and the public address (status, live view, metrics), and
        with receivers on other hosts, how many are ready on each."""
        last = self.last
        out = {"url": self.url, **(last.to_dict() if last is not None else {})}
        if not self.launcher.shares_port:
            with self._lock:
                hosts = [r.host for r in self._receivers if r.ready_at is not None]
            out["hosts"] = {h: hosts.count(h) for h in sorted(set(hosts))}
        return out

    def held(self) -> int | None:
        """Requests the activator held at the last report (None before the first, or when the
        last is older than ``STALE_AFTER``: the activator stopped answering)."""
        last = self.last
        return None if last is None or time.time() - last.at > STALE_AFTER else last.held

    def take_samples(self) -> list[RequestSample]:
        with self._lock:
            out, self._samples = self._samples, []
        return out

    def set_in_path(self, in_path: bool) -> None:
        self.in_path = in_path

    def receiver_urls(self) -> list[str]:
        """The ready receivers' own addresses (behind the activator; benchmarks hit them bare)."""
        with self._lock:
            return [r.url for r in self._receivers if r.ready_at is not None]

    def activator_slices(self) -> list[dict[str, Any]]:
        """Each activator's index, its slice of the receivers, its capacity and what it sent to
        each receiver (``{}`` for one that does not answer)."""
        out = []
        for a in self._activators:
            try:
                out.append(dict(get(f"http://127.0.0.1:{a.port}/_tidal/slice", timeout=5.0)))
            except (OSError, ValueError):
                out.append({})
        return out

    def activator_pids(self) -> list[int]:
        return [a.proc.pid for a in self._activators]

    def receiver_pids(self) -> list[int]:
        with self._lock:
            return [r.proc.pid for r in self._receivers]

    # -- the loops -----------------------------------------------------------------------------

    def _listen_for_pokes(self) -> None:
        assert self._udp is not None
        while not self._stop.is_set():
            try:
                data, _ = self._udp.recvfrom(1024)
                poke = json.loads(data)
            except (TimeoutError, OSError, ValueError):
                continue
            if poke.get("stat"):  # Knative's immediate {concurrency 1, count 1} of a first request
                with self._lock:
                    self._samples.append(
                        RequestSample(time.time(), 1.0, 1.0, held=int(bool(poke.get("held"))))
                    )
            if self._on_poke is not None:
                self._on_poke()

    def _reconcile_loop(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.reconcile()
            except Exception:  # keep the request path alive; the traceback goes to the log
                log.exception("http source %s: reconcile failed", self.activator_config.vertex)

    def reconcile(self) -> None:
        self._reap()
        want = max(0, self._replicas())
        with self._lock:
            have = len(self._receivers)
        if want > have:
            self._start_receivers(want - have)
        if want < have:
            with self._lock:
                going = self._receivers[want:]
                self._receivers = self._receivers[:want]
            self._push()  # the activator forgets them before they stop
            for p in going:
                p.stopping_at = time.time()
                if p.proc.poll() is None:
                    p.proc.send_signal(signal.SIGTERM)
            with self._lock:
                self._stopping.extend(going)
        self._probe()
        self._push()

    def _start_receivers(self, count: int) -> None:
        started = self.launcher.start(self.receiver_config, count)
        with self._lock:
            self._receivers.extend(started)

    def _probe(self) -> None:
        with self._lock:
            waiting = [r for r in self._receivers if r.ready_at is None]
        for r in waiting:
            with contextlib.suppress(OSError, ValueError):
                if get(r.url + "_tidal/ready", timeout=0.5) == "queue":
                    r.ready_at = time.time()
                    log.info(
                        "http source %s: receiver pid %d ready on %s:%d after %.2f s",
                        self.receiver_config.vertex, r.proc.pid, r.host, r.port, r.ready_at - r.started_at,
                    )  # fmt: skip

    def _reap(self) -> None:
        with self._lock:
            for p in [*self._receivers, *self._stopping]:
                if p.proc.poll() is None:
                    continue
                if p in self._receivers:
                    self._receivers.remove(p)
                    self._lost.append(p.url)  # the activator cuts what it has in flight there
                    self._record_exit(p)
                else:
                    self._stopping.remove(p)
                self._accepted_gone += p.accepted
                self._refused_gone += p.extra.get("refused", 0)
                self._unauthorized_gone += p.extra.get("unauthorized", 0)
                self._peak_gone = max(self._peak_gone, p.extra.get("peak_inside", 0))
                if p.proc.stdout is not None:
                    p.proc.stdout.close()
            for p in self._stopping:
                if p.stopping_at is not None and time.time() - p.stopping_at > DRAIN_TIMEOUT:
                    p.proc.kill()

    def _record_exit(self, p: Child) -> None:
        """A receiver that ended unasked: a warning, and an event with its cause (``tidal events``)."""
        why = exit_reason(p.proc)
        log.warning(
            "http source %s: receiver pid %d on %s: %s; starting another",
            self.receiver_config.vertex, p.proc.pid, p.host, why,
        )  # fmt: skip
        if self._faults is not None:
            where = f"pid {p.proc.pid} on {p.host}:{p.port}"
            self._faults.record("receiver lost", self.receiver_config.vertex, f"{where}: {why}", host=p.host)

    def _push(self) -> None:
        """Tell the activator which receivers are ready and whether it stays in the path, and the
        receivers whether to serve the public port. The order keeps someone listening: out of
        the path, the receivers open the public port before the activator closes it; back in,
        the activator opens it before the receivers close theirs."""
        with self._lock:
            ready = [r for r in self._receivers if r.ready_at is not None]
        # Receivers on other hosts cannot share the public port: the activator stays in the path.
        in_path = self.in_path or not ready or not self.launcher.shares_port
        state = (tuple(r.url for r in ready), in_path)
        if not self._activators:
            return
        if not in_path:
            self._serve(ready, True)
        if state != self._pushed or self._lost:
            with self._lock:
                lost, self._lost = self._lost, []
            update = {"receivers": list(state[0]), "in_path": in_path, "activators": self._names}
            update["lost"] = lost
            body = json.dumps(update).encode()
            for a in self._activators:
                put(f"http://127.0.0.1:{a.port}/_tidal/receivers", body)
            self._pushed = state
        if in_path:
            self._serve(ready, False)

    def _serve(self, receivers: list[Child], serve: bool) -> None:
        for r in receivers:
            if r.extra.get("serving", False) != serve:
                with contextlib.suppress(OSError, ValueError):  # gone: it is reaped next round
                    put(r.url + "_tidal/serve", json.dumps({"serve": serve}).encode())
                    r.extra["serving"] = serve

    def _scrape_loop(self) -> None:
        next_at = time.monotonic() + 1.0
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            next_at += 1.0
            try:
                self._scrape()
            except Exception:
                log.exception("http source %s: scrape failed", self.activator_config.vertex)

    def _scrape(self) -> None:
        """Knative's collector (§3.5): pod values minus their proxied part, plus the activator's."""
        with self._lock:
            targets = [*self._receivers, *self._stopping]
        receivers = scrape.scrape_receivers(targets, time.time(), self._window, self._rng)
        self.sampled = (receivers.answered, receivers.ready)
        activators = scrape.scrape_activators(self._activators)
        concurrency = receivers.concurrency + activators.concurrency
        rps = receivers.rps + activators.rps
        held, in_path, wait = activators.held, activators.in_path, activators.longest_wait
        refused, unauthorized = activators.rejected, activators.unauthorized
        with self._lock:
            alive = [*self._receivers, *self._stopping]
            refused += self._refused_gone + sum(r.extra.get("refused", 0) for r in alive)
            unauthorized += self._unauthorized_gone + sum(r.extra.get("unauthorized", 0) for r in alive)
        sample = RequestSample(
            time.time(),
            concurrency,
            rps,
            held,
            in_path,
            self.ready(),
            refused,
            wait,
            self.accepted(),
            unauthorized,
        )
        with self._lock:
            self._samples.append(sample)
            self.last = sample
        if self._series is not None:
            with self._series.open("a") as f:
                f.write(json.dumps(sample.to_dict()) + "\n")

    def peak_inside(self) -> int:
        """The most requests any receiver ever had past its breaker at once (≤ CC when CC > 0)."""
        with self._lock:
            live = [int(r.extra.get("peak_inside", 0)) for r in [*self._receivers, *self._stopping]]
        return max([self._peak_gone, *live])

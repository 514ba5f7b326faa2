"""What one replica of a vertex sustains, learnt from what the runtime measures: the capacity
``policy: tidal`` sizes with (:mod:`tidal.controller.adaptive`), never told.

What a replica *sustains* in micro-batches of ``B = readBatchSize`` is ``B / (batch cost + B /
work rate)``:

* The **work rate** comes from busy time: messages per replica-second of its tasks, an average
  that forgets with every sample. Busy time from cold replicas (ready and working for less than
  ``WARM_SECONDS``: on Spark their first batches start Python workers) only stands in until the
  first warm reading replaces it, and is ignored once one is known. The bench's sink took its
  first reading from its first, cold micro-batch, 135/s a replica where one does ~1,800/s, and
  averaged in it kept the sink at 3 replicas where Numaflow kept 1 (``tidal bench policies``).
* **At a full batch.** A task's busy time is a fixed part (reading its range from the buffer,
  writing and syncing its output) plus a part per message, so the plain ratio understates a
  replica at light load, where a task holds a few messages: on the cluster's step, ``enrich``
  read 166/s from tasks of ~18 messages and ~390/s from full ones, and ``policy: tidal`` sized
  the spike's ×10 from 159/s where replicas then did 450/s. Where the runtime counts tasks,
  ``busy = fixed × tasks + messages / rate`` is fitted over the warm ticks (:class:`TaskCost`),
  and the work rate is taken at a full batch of ``readBatchSize`` messages a task: on that step,
  340–384/s from 20 s on, where the plain ratio wandered from 140 to 330/s (replayed from the
  run's batch ledger). Until the ticks' messages per task differ enough to tell the two parts
  apart, and wherever the fit says less, the plain ratio stands. The simulator's busy time has no
  fixed part per task, so it counts no tasks.
* The **batch cost** is the fixed part of a micro-batch outside the tasks (offset log, planning,
  commit), guessed at ``batch_guess_seconds`` (0.25 s, measured on Spark) and learnt from spans
  when the vertex was saturated (more pending than its replicas admit in one micro-batch at
  both ends of each tick, warm, none still starting, nothing pushing back): there, the
  throughput per replica is what it sustains. A tick that *ends* with a backlog is not one:
  its replicas worked through what was there at its start, and on the cluster's spike the
  first tick of the ×10 taught 1.52 s a batch (a replica sustaining 181/s, where it then did
  450/s) and sized the spike from it; nor is a tick while asked-for replicas start (the query
  re-plans its partitions), which taught 122/s on the same run. A tick implying more than
  ``MAX_BATCH_COST`` is a stall (a query restarting after a replica change), which teaches
  nothing: capped at 5 s instead, the first batch after a 5 s restart on the cluster's step (42
  messages in a second) taught 1.68 s at once, a replica sustaining 159/s where one did 362/s.
  (Counting warm from the replicas' first work after a change instead of from the change also
  mends that case, but costs the simulator's step ×10 on shared cores 2 s of p99.) The cost is
  the median of the last :data:`BATCH_COST_SAMPLES` such spans' implied costs, not an average:
  on the cluster's bursts one tick that held a new executor's first batches, 3–7 s each, taught
  0.4–0.49 s a batch where the others showed 0.2 s, and ``orders`` was sized at 600–1,700/s a
  replica where one did 2,000/s. Busy time alone
  overstates a fast vertex: a generator whose tasks read 8,000/s sustains ~1,700/s at 500 a
  batch; sized from busy time, a source stayed at one replica on Spark through a wave with
  6,000–8,000 messages waiting. Without busy time, the saturated throughput is used as is.
* **What a replica did.** Busy time can also understate a replica: on shared cores a task's
  wall time includes its wait for a core (``tidal bench policies`` on 2 cores: ``archive`` did
  ~1,700/s at one replica while its busy time said 270–650/s, and the policy ran it at 3 where
  Numaflow kept 1–2). So a replica is worth at least what one was seen to do over
  ``DID_SECONDS`` lately (kept ``DID_MEMORY_SECONDS``), saturated or not.
* **From commit to commit, never over one tick.** The processed count moves when a micro-batch
  commits, a whole batch at once: on the cluster's step (2026-11-29) ``enrich``'s three replicas
  committed 1,500 every 1.27–1.36 s, and its ticks came every second, so a tick saw 0 or 1,500.
  Learnt from the ticks that saw a commit (a tick without one taught nothing), nine saturated
  ticks in a row implied 0 s a batch, where busy time and commits put it at 0.17 s; and a 4 s
  window from just before one commit to just after a fourth counted 6,000 in 4 s, "what a
  replica did" 500/s where they sustained 385/s. Sized on it, ``enrich`` went 3 → 2 and back
  six times under a steady 900/s. So both are measured from a tick that saw a commit to a
  later one that saw one, at least ``SPAN_SECONDS`` / ``DID_SECONDS`` apart, the ticks between
  them counted whatever they saw: whole micro-batches over the time they took, give or take a
  tick at each end. A saturated span does not run across a stall, commits further apart than
  twice what a batch takes and a tick (``STALL_BATCHES``): at a wave's start on the cluster
  `orders` committed every 0.2–0.5 s with a 4 s pause every few batches while executors
  started, and spans across the pauses taught 0.9–1.6 s a batch, 503/s a replica where one did
  1,600/s. Ticks without a commit between two that had one still count: they are the batch.
"""

from __future__ import annotations

import statistics
from collections import deque

from tidal.controller.policy import PolicyInput
from tidal.scaling import DEFAULT_READ_BATCH_SIZE, Pressure

__all__ = ["ReplicaCapacity", "TaskCost"]

BATCH_COST_SAMPLES = 9  # saturated spans whose median is the batch cost
MAX_BATCH_COST = 5.0  # seconds: a saturated span implying more is a stall, not a batch's cost
WARM_SECONDS = 3.0  # replicas ready and working this long before their throughput teaches anything
DID_SECONDS = 5.0  # what a replica did is measured from one commit to another this long after
SPAN_SECONDS = 5.0  # a saturated throughput is measured from one commit to another this long after
STALL_BATCHES = 2.0  # commits further apart than this many batches' time (and a tick) are a stall
STALL_TICKS_SECONDS = 1.0  # a tick either side: when the ticks saw them, give or take
DID_MEMORY_SECONDS = 300.0  # and trusted this long


class ReplicaCapacity:
    """Messages/s one replica of a vertex sustains, learnt tick by tick (:meth:`observe`)."""

    def __init__(self, batch_guess_seconds: float = 0.25, learning: float = 0.1) -> None:
        self.learning = learning
        self.work_rate: float | None = None  # messages/s of a replica's tasks (busy time)
        self._work_rate_warm = False  # learnt from warm replicas (else it only stands in)
        self.batch_cost = batch_guess_seconds  # fixed seconds per micro-batch, until learnt
        self._batch_guess = batch_guess_seconds
        self.sustained: float | None = None  # messages/s per replica seen while saturated
        self.did: tuple[float, float] | None = None  # (most messages/s a replica did, when)
        self._doing: deque[tuple[float, float]] = deque()  # (now, processed) while warm
        self.read_batch_size = DEFAULT_READ_BATCH_SIZE  # the vertex's, from its first tick
        self._last: tuple[float, float, float | None, int] | None = None  # now, processed, busy, ready
        self._working_since: float | None = None  # the same replicas ready and working since

    # Made at the first task count (absent from a snapshot taken before they were counted).
    _task_cost: TaskCost | None = None
    _last_tasks: float | None = None  # the cumulative tasks at the last tick
    _last_waiting: float | None = None  # what was pending at the last tick
    _batch_costs: deque[float] | None = None  # the last saturated spans' implied batch costs
    _batch_guess: float = 0.25  # (a snapshot from before the median kept no guess)
    # The saturated span under way: (now, processed) at its first commit, and its last commit's now.
    _span: tuple[float, float, float] | None = None

    def observe(self, view: PolicyInput) -> None:
        """Learn from one tick's counts: busy time, throughput while saturated, what was done."""
        self.read_batch_size = view.read_batch_size
        if self.did is not None and view.now - self.did[1] > DID_MEMORY_SECONDS:
            self.did = None  # what replicas did long ago, beside other work, says little now
        last = self._last
        self._last = (view.now, view.processed, view.busy_seconds, view.ready)
        if last is None or view.now <= last[0]:
            return
        done = view.processed - last[1]
        if last[3] != view.ready or (self._working_since is None and done > 0):
            self._working_since = view.now  # new replicas, or the first work: not warm yet
            self._doing.clear()
        # Warm: the same replicas ready and working for WARM_SECONDS. On Spark a replica's first
        # batches start its Python workers, and a cold replica is not a slow one.
        warm = self._working_since is not None and view.now - self._working_since >= WARM_SECONDS
        tasks = None if view.tasks is None or self._last_tasks is None else view.tasks - self._last_tasks
        self._last_tasks = view.tasks
        if view.busy_seconds is not None and last[2] is not None:
            self._learn_work_rate(view.busy_seconds - last[2], done, warm, tasks)
        # Saturated: more waiting than one micro-batch of the replicas admits, at the tick's start
        # and at its end, warm replicas, none still starting, and nothing pushing back.
        admits = view.ready * view.read_batch_size
        waited, self._last_waiting = self._last_waiting, view.pending_now
        saturated = (
            (view.pending_now or 0) > admits
            and (waited or 0) > admits
            and view.ready > 0
            and view.replicas == view.ready
            and warm
            and view.pressure.level == Pressure.NONE
        )
        committed = done > 0  # a micro-batch was committed since the last tick
        if warm and view.ready > 0 and committed:
            self._note_did(view)
        if not saturated:
            self._span = None
        elif committed:
            self._learn_saturated(view)

    def _learn_saturated(self, view: PolicyInput) -> None:
        """Throughput over a saturated span from one commit to another at least
        :data:`SPAN_SECONDS` later, the ticks without a commit between them included: what a
        replica sustains, and from it what a batch costs beside the work (the module's
        docstring says why never from one tick). A span starts again after a stall: commits
        further apart than :meth:`_stall_gap`."""
        span = self._span
        if span is not None and view.now - span[2] > self._stall_gap(view.read_batch_size):
            span = None  # a stall since the last commit: no span runs across it
        if span is None or view.now - span[0] < SPAN_SECONDS:
            self._span = (
                (view.now, view.processed, view.now) if span is None else (span[0], span[1], view.now)
            )
            return
        self._span = (view.now, view.processed, view.now)
        observed = (view.processed - span[1]) / (view.now - span[0]) / view.ready
        self.sustained = self._average(self.sustained, observed, 3 * self.learning)
        work_rate = self.full_batch_rate
        if work_rate is not None:  # what the batches cost besides the work
            size = view.read_batch_size
            implied = max(0.0, size / observed - size / work_rate)
            if implied <= MAX_BATCH_COST:  # more is a stall, not what a batch costs
                self._learn_batch_cost(implied)

    def _stall_gap(self, size: int) -> float:
        """Seconds between two commits beyond which the vertex stalled (a query restarting, a
        new executor's cold first batch, tasks waiting for a core) rather than worked: twice
        what a full batch takes by what is known, and a tick either side. On the cluster's waves
        `orders` committed 500 every 0.2–0.5 s at a wave's start with a 4 s pause every few
        batches while executors started; across them, its spans taught 0.9–1.6 s a batch and
        sized it at 503/s a replica where one did 1,600/s (2026-11-30)."""
        work_rate = self.full_batch_rate
        if work_rate is None:
            return MAX_BATCH_COST
        return STALL_BATCHES * (size / work_rate + self.batch_cost) + STALL_TICKS_SECONDS

    def _learn_batch_cost(self, implied: float) -> None:
        """The median of the last :data:`BATCH_COST_SAMPLES` saturated spans' implied costs, the
        guess standing in for the samples missing up to three: one tick in which a new executor's
        first batches landed (3–7 s each, its Python workers starting) no longer moves it."""
        if self._batch_costs is None:
            self._batch_costs = deque(maxlen=BATCH_COST_SAMPLES)
        self._batch_costs.append(implied)
        prior = [self._batch_guess] * max(0, 3 - len(self._batch_costs))
        self.batch_cost = statistics.median([*self._batch_costs, *prior])

    def _learn_work_rate(self, busy: float, done: float, warm: bool, tasks: float | None) -> None:
        """The work rate from a tick's busy time: a cold replica's stands in until the first
        warm reading replaces it, and is ignored once one is known (see the module's docstring).
        A warm tick's tasks, messages and busy time also go to the fit of a task's fixed part."""
        if busy <= 0.05 or done <= 0:
            return
        if warm and tasks is not None and tasks > 0:
            if self._task_cost is None:
                self._task_cost = TaskCost()
            self._task_cost.add(tasks, done, busy)
        if warm:
            current = self.work_rate if self._work_rate_warm else None
            self.work_rate, self._work_rate_warm = self._average(current, done / busy, self.learning), True
        elif not self._work_rate_warm:
            self.work_rate = self._average(self.work_rate, done / busy, self.learning)

    def _note_did(self, view: PolicyInput) -> None:
        """What a replica did from one commit to another at least :data:`DID_SECONDS` later,
        saturated or not: a replica can do at least that much, whatever its busy time says.
        Called at ticks that saw a commit only (the module's docstring says why)."""
        self._doing.append((view.now, view.processed))
        while len(self._doing) > 1 and self._doing[1][0] <= view.now - DID_SECONDS + 1e-9:
            self._doing.popleft()  # keep the last commit at least DID_SECONDS before this one
        then, done = self._doing[0]
        if view.now - then < DID_SECONDS - 1e-9:
            return
        rate = (view.processed - done) / (view.now - then) / view.ready
        if rate <= 0:
            return
        if self.did is None or rate >= self.did[0]:  # (forgotten in observe after the memory)
            self.did = (rate, view.now)

    @staticmethod
    def _average(current: float | None, observed: float, learning: float) -> float:
        return observed if current is None else current + learning * (observed - current)

    @property
    def capacity(self) -> float | None:
        """Messages/s one replica sustains in micro-batches: from its work rate and the batch
        cost where busy time is measured, else the throughput it managed while saturated; at
        least what a replica was seen to do lately (:meth:`_note_did`)."""
        estimate = self._estimate
        if self.did is not None and (estimate is None or self.did[0] > estimate):
            return self.did[0]
        return estimate

    @property
    def only_a_floor(self) -> bool:
        """The capacity is what a replica was seen to do, more than busy time or saturation say:
        a floor (it did what arrived), not what a replica can do."""
        estimate = self._estimate
        return self.did is not None and (estimate is None or self.did[0] > estimate)

    @property
    def full_batch_rate(self) -> float | None:
        """Messages/s of a replica's tasks when each holds a full batch: from the fit of a task's
        fixed part where it holds (never below the plain ratio), else the plain ratio."""
        if self.work_rate is None:
            return None
        fitted = self.task_fit
        if fitted is None:
            return self.work_rate
        fixed, rate = fitted
        size = self.read_batch_size
        return max(self.work_rate, size / (fixed + size / rate))

    @property
    def task_fit(self) -> tuple[float, float] | None:
        """(seconds a task costs whatever it holds, messages/s beyond it), once told apart."""
        return None if self._task_cost is None else self._task_cost.fit()

    @property
    def _estimate(self) -> float | None:
        work_rate = self.full_batch_rate
        if work_rate is not None:
            size = self.read_batch_size
            return size / (self.batch_cost + size / work_rate)
        return self.sustained

    @property
    def source(self) -> str:
        """Where :attr:`capacity` comes from, for the decisions' reasons."""
        if self.only_a_floor:
            return "what a replica did"
        if self.work_rate is not None:
            fitted = self.task_fit
            if fitted is not None:
                task, rate = fitted
                return f"busy time, {task:.2f} s a task + {rate:.0f}/s, {self.batch_cost:.2f} s a batch"
            return f"busy time, {self.batch_cost:.2f} s a batch"
        return "throughput while saturated" if self.sustained is not None else "nothing yet"

    def inputs(self) -> dict[str, float | int | str | None]:
        """What was learnt, for a decision's inputs (each event in the run's ``events.jsonl``)."""
        fit = self.task_fit
        return {
            "capacity": self.capacity,
            "learnt_from": self.source,
            "work_rate": self.work_rate,
            "batch_cost": self.batch_cost,
            "full_batch_rate": self.full_batch_rate,
            "task_seconds": None if fit is None else fit[0],
            "message_rate": None if fit is None else fit[1],
            "sustained": self.sustained,
            "did": None if self.did is None else self.did[0],
        }


class TaskCost:
    """``busy = fixed × tasks + messages / rate``, fitted by least squares over ticks, each
    tick's weight fading by ``memory`` a tick (a replica's costs drift with its host's load).

    Two unknowns from each tick's tasks, messages and busy seconds: they can be told apart only
    when the ticks' messages per task differ, so the fit is given only once they differ by at
    least ``spread`` (1 − the uncentred correlation² of tasks and messages; 0 when every task
    held as many). A negative fixed part or rate is noise, not a cost: no fit.
    """

    def __init__(self, memory: float = 0.02, spread: float = 0.02) -> None:
        self.memory = memory
        self.spread = spread
        # Fading sums of tasks², tasks × messages, messages², tasks × busy, messages × busy.
        self._tt = self._tm = self._mm = self._tb = self._mb = 0.0

    def add(self, tasks: float, messages: float, busy: float) -> None:
        keep = 1.0 - self.memory
        self._tt = keep * self._tt + tasks * tasks
        self._tm = keep * self._tm + tasks * messages
        self._mm = keep * self._mm + messages * messages
        self._tb = keep * self._tb + tasks * busy
        self._mb = keep * self._mb + messages * busy

    def fit(self) -> tuple[float, float] | None:
        """(fixed seconds a task, messages/s beyond it), or None while they cannot be told apart."""
        det = self._tt * self._mm - self._tm * self._tm
        if self._tt <= 0 or self._mm <= 0 or det <= self.spread * self._tt * self._mm:
            return None
        fixed = (self._tb * self._mm - self._mb * self._tm) / det
        per_message = (self._tt * self._mb - self._tm * self._tb) / det
        if fixed < 0 or per_message <= 0:
            return None
        return fixed, 1.0 / per_message

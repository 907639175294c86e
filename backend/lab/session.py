"""The lab as the supervisor runs it for the Lab page: started once, evented many times, read
at any moment.

`groupscope lab` (`LabRun.execute`) goes through the phases in one call and ends. The page needs
the same phases one step at a time, the groups left running between events, and a picture of
every lane whenever it asks. So one thread owns the run: it reads the changelogs, moves the
phases on and applies the event asked for (every group within the same loop turn, as the
headless run does); the API's calls only ask for an event and read the state it publishes.
"""

from __future__ import annotations

import logging
import threading
import time

import psutil

from backend.contracts.control import LabGroup, LabLane, LabState
from backend.contracts.lab import Score
from backend.errors import one_line
from backend.lab.run import WARM_LOOKBACK_MS, LabRun, busy_cores, now_ms
from backend.lab.tail import ProcessedTail
from backend.pool.processes import PoolError

log = logging.getLogger("groupscope.lab")

STARTING, WARMING, BASELINE, READY, MEASURING = (
    "starting", "warming", "baseline", "ready", "measuring")
BASELINE_KEEP_S = 30.0  # the cadence of an event is taken over at most this much before it
MIN_BASELINE_S = 3.0  # each group's normal cadence, taken before an event is taken
CPU_EVERY_S = 5.0
FORGET_EVERY_MS = 5_000  # writes older than what is looked at go in steps, not each turn


class LabRefused(PoolError):
    """An event the lab cannot apply now (HTTP 409): the message says why."""


def lanes(partitions: int, latest: dict[int, int], owner: dict[int, str],
          live: set[str], silence_ms: float, now_ms: int) -> tuple[LabLane, ...]:
    """Each partition's lane: who processed its latest batch, and whether it is idle (nothing
    within the stall limit, or its replica is no longer running)."""
    return tuple(
        LabLane(partition=p, owner=owner.get(p),
                idle=p not in latest or now_ms - latest[p] > silence_ms
                or owner.get(p) not in live)
        for p in range(partitions))


class LabSession:
    """A `LabRun` driven by one thread; `state()` and `ask()` are safe from any thread."""

    def __init__(self, run: LabRun) -> None:
        self.run = run
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._phase = STARTING
        self._asked: str | None = None
        self._error: str | None = None
        self._baseline_from = 0
        self._event_ms: int | None = None
        self._over_ms: dict[str, int] = {}  # lab → when it was first over the event
        self._quiet_since: float | None = None
        self._scores: dict[str, Score] = {}
        self._window_s: float | None = None
        self._notes: tuple[str, ...] = ()
        self._busy: float | None = None
        self._state: LabState = self._picture(None)
        self._thread = threading.Thread(target=self._loop, name="lab", daemon=True)

    # ---- from the API ----------------------------------------------------------------------

    def start(self) -> LabSession:
        self._thread.start()
        return self

    def state(self) -> LabState:
        return self._state

    def ask(self, event: str) -> LabState:
        """Apply `event` to every group on the loop's next turn, or refuse it now."""
        with self._lock:
            if self._phase != READY:
                raise LabRefused({STARTING: "the lab's replicas are still starting",
                                  WARMING: "the lab is still warming up: every group must "
                                           "process every partition first",
                                  BASELINE: "each group's normal cadence is being taken: "
                                            "a few seconds",
                                  MEASURING: "the last event is still being measured"}
                                 [self._phase])
            why = self.run.refusal(event)
            if why:
                raise LabRefused(why)
            self._asked = event
        return self._state

    def close(self, grace: float | None = None) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10.0)
        self.run.close(grace)

    # ---- the loop --------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            tail = self.run.open()
        except Exception as exc:  # the topics or the replicas could not be had
            self._fail(f"the lab could not start: {one_line(exc)}")
            return
        with self._lock:
            self._phase = WARMING
        warm_until = time.monotonic() + self.run.config.warm_timeout_s
        cpu_at, cpu = time.monotonic(), psutil.cpu_times()
        while not self._stop.is_set():
            try:
                tail.read(0.2)
                self._turn(tail, warm_until)
            except Exception as exc:  # the broker went away: say so, keep trying
                log.warning("lab: %s", one_line(exc))
                self._error = f"the lab cannot read its groups' changelogs: {one_line(exc)}"
                self._stop.wait(1.0)
            if time.monotonic() - cpu_at >= CPU_EVERY_S:
                now_cpu = psutil.cpu_times()
                self._busy = busy_cores(cpu, now_cpu)
                cpu_at, cpu = time.monotonic(), now_cpu
            self._state = self._picture(tail)

    def _turn(self, tail: ProcessedTail, warm_until: float) -> None:
        now = now_ms()
        with self._lock:
            phase, asked = self._phase, self._asked
        if phase == WARMING:
            since = now - WARM_LOOKBACK_MS
            if tail.writes and min((w[0].t_ms for w in tail.writes.values() if w),
                                   default=now) < since - FORGET_EVERY_MS:
                tail.forget(since)  # a group that never warms up costs no memory
            if all(self.run.warm_group(tail, g, now) for g in self.run.groups):
                self._ready(now)
                self._error = None
            elif time.monotonic() > warm_until and self._error is None:
                self._error = ("a group has not processed every partition after "
                               f"{self.run.config.warm_timeout_s:.0f}s: its replicas' logs "
                               "say why")
        elif phase == BASELINE:
            if self.run.baseline_taken(tail, self._baseline_from, now, MIN_BASELINE_S):
                with self._lock:
                    self._phase = READY
        elif phase == READY:
            keep_from = now - int(BASELINE_KEEP_S * 1000)
            if self._baseline_from < keep_from - FORGET_EVERY_MS:
                self._baseline_from = keep_from
                tail.forget(keep_from)
            if asked is not None:
                with self._lock:  # asked once: an event that fails half-way is not repeated
                    self._asked = None
                self.run.take_cadence(tail, self._baseline_from, now)
                try:
                    self.run.apply(tail, asked)
                except Exception:  # a replica gone under it: no event half-remembered
                    self.run.forget_event()
                    raise
                log.info("lab: %s applied to every group", asked)
                with self._lock:
                    self._phase = MEASURING
                    self._event_ms = now
                    self._over_ms, self._scores, self._window_s = {}, {}, None
                    self._quiet_since = None
        elif phase == MEASURING:
            self._measure(tail, now)

    def _measure(self, tail: ProcessedTail, now: int) -> None:
        assert self._event_ms is not None
        for g in self.run.groups:
            self.run.step_bounce(tail, g)
        over = {g.lab: self.run.done(tail, g, self._event_ms) for g in self.run.groups}
        for lab, done in over.items():
            if done:
                self._over_ms.setdefault(lab, now)
            else:
                self._over_ms.pop(lab, None)
        cfg = self.run.config
        if all(over.values()):
            self._quiet_since = self._quiet_since or time.monotonic()
            finished = time.monotonic() - self._quiet_since >= cfg.quiet_s
        else:
            self._quiet_since = None
            finished = (now - self._event_ms) / 1000 >= cfg.max_window_s
        if not finished:
            return
        try:
            scores = self.run.scores(tail, self._baseline_from, self._event_ms, now)
        except Exception as exc:
            self._error = one_line(exc)
            scores = ()
        self._notes = tuple(n for g in self.run.groups for n in self.run.notes(g))
        self.run.forget_event()
        with self._lock:
            self._scores = {s.lab: s for s in scores}
            self._window_s = round((now - self._event_ms) / 1000, 1)
        self._ready(now)

    def _ready(self, now: int) -> None:
        """Events are taken once each group's cadence has been seen for MIN_BASELINE_S."""
        with self._lock:
            self._phase = BASELINE
            self._baseline_from = now

    def _fail(self, message: str) -> None:
        log.warning("lab: %s", message)
        self._error = message
        self._state = self._picture(None)

    # ---- the picture -----------------------------------------------------------------------

    def _picture(self, tail: ProcessedTail | None) -> LabState:
        run, now = self.run, now_ms()
        event_ms = self._event_ms
        groups = []
        for g in run.groups:
            live = set(g.pool.live_names())
            score = self._scores.get(g.lab)
            if event_ms is None:
                watch = None
            elif self._phase == MEASURING:
                watch = ((self._over_ms.get(g.lab) or now) - event_ms) / 1000
            else:
                watch = score.recovered_s if score is not None else None
            groups.append(LabGroup(
                lab=g.lab, group=g.group, replicas=tuple(sorted(live)),
                lanes=() if tail is None else lanes(
                    run.partitions, tail.latest[g.group], tail.owner[g.group], live,
                    g.silence_ms, now),
                stopwatch_s=None if watch is None else round(watch, 1),
                over=g.lab in self._over_ms or (score is not None
                                                 and self._phase in (BASELINE, READY)),
                score=score))
        return LabState(
            name=run.name, topic=run.topic, phase=self._phase, partitions=run.partitions,
            rate=run.config.rate, event=run.event if event_ms is not None else None,
            since_event_s=None if event_ms is None else round((now - event_ms) / 1000, 1),
            window_s=self._window_s, groups=tuple(groups), notes=self._notes,
            error=self._error, busy_cores=self._busy, cores=psutil.cpu_count())

"""One lab run: a topic, one group per protocol, one event to all of them at once, the scores.

Every group's members are real `groupscope replica` processes (the supervisor's
`ReplicaPool`, as in the demo and the chaos run), all reading the same topic that the real
`FleetSimulator` fills. The run waits until every partition of every group is processed,
takes a baseline (each group's normal cadence), applies the event to every group within a few
milliseconds, and watches the summaries changelogs until every group processes every
partition again and has done so for a quiet spell. Then `measure.score` says what each
protocol's rebalance cost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from backend.contracts import SHARE, summaries_topic
from backend.contracts.control import MAX_PARTITIONS, ReplicaOptions
from backend.contracts.lab import (
    ADD,
    BOUNCE,
    DEFAULT_LAB_PROTOCOLS,
    KILL,
    LAB_PROTOCOLS,
    PARTITIONS,
    STOP,
    Score,
)
from backend.fleet.simulator import FleetSimulator, stream_ids
from backend.kafka.partitioner import partition_for
from backend.kafka.settings import KafkaSettings
from backend.kafka.share import ensure_share_group
from backend.kafka.topics import add_partitions, ensure_topics
from backend.lab.measure import batches, cadence, score
from backend.lab.tail import ProcessedTail
from backend.pool.processes import LaunchConfig, ReplicaPool

Progress = Callable[[str], None]
WARM_WINDOW_S = 6.0  # the start-up's rebalances are over when a window this long is calm
FLEET_FLUSH_S = 1.0  # the cars' last records: the lab's own topic, nothing waits on them
WARM_SCAN = 50_000  # the latest writes looked at for it (a few seconds' worth at most)
CADENCE_SCAN = 5_000  # the latest writes a group's recent batch interval is taken from
WARM_LOOKBACK_MS = 30_000  # the longest warm window, and how far back that interval looks


class LabError(RuntimeError):
    """The lab could not measure: the message says what did not happen in time."""


@dataclass(frozen=True)
class LabConfig:
    protocols: tuple[str, ...] = DEFAULT_LAB_PROTOCOLS
    event: str = KILL
    partitions: int = 6
    replicas: int = 3
    streams: int | None = None  # None: four a partition, at least 24
    rate: float = 300.0  # msg/s into the topic; every group reads all of it
    baseline_s: float = 8.0  # the normal cadence is measured over this before the event
    quiet_s: float = 5.0  # every partition processing for this long ends the measurement
    max_window_s: float = 120.0  # the measurement ends here even if a group never recovers
    warm_timeout_s: float = 180.0  # every replica up and every partition processed within
    batch_ms: int = 500
    added_partitions: int | None = None  # the `partitions` event grows to this (default 2×)
    name: str = ""

    @property
    def stream_count(self) -> int:
        return self.streams if self.streams is not None else max(24, 4 * self.partitions)

    @property
    def grown_partitions(self) -> int:
        """The topic's partitions after a `partitions` event."""
        return self.added_partitions or 2 * self.partitions

    def fed_partitions(self, partitions: int) -> frozenset[int]:
        """The partitions the cars' keys land on: a partition no car hashes to has no
        batches, so it is never waited for."""
        return frozenset(partition_for(s, partitions) for s in stream_ids(self.stream_count))


@dataclass
class _Group:
    lab: str
    group: str
    pool: ReplicaPool
    bounce: list[str] = field(default_factory=list)  # still to restart, in order
    bouncing: tuple[str, int, float] | None = None  # name, its restarts before, asked at
    victim: str | None = None
    added: str | None = None
    silence_ms: float = 4000.0  # a partition this long without a batch is stalled


@dataclass(frozen=True)
class LabResult:
    name: str
    topic: str
    event: str
    scores: tuple[Score, ...]
    window_s: float  # how long after the event it was measured
    notes: tuple[str, ...] = ()
    # the machine's cores busy during the baseline (everything on it: the fleet, the
    # replicas, Spark, the broker if local), and how many it has
    busy_cores: float | None = None
    cores: int | None = None


class LabRun:
    def __init__(self, settings: KafkaSettings, spark_remote: str | None, config: LabConfig,
                 log_dir: Path, kafka_config: str | None = None,
                 progress: Progress = print, env: dict[str, str] | None = None,
                 command: tuple[str, ...] | None = None) -> None:
        unknown = [p for p in config.protocols if p not in LAB_PROTOCOLS]
        if unknown or not config.protocols:
            raise ValueError(f"unknown lab protocols {unknown}; choose from "
                             f"{', '.join(LAB_PROTOCOLS)}")
        self.settings = settings
        self.config = config
        self.name = config.name or f"lab-{int(time.time())}"
        self.topic = f"{self.name}-telemetry"
        self.progress = progress
        self.fed = len(config.fed_partitions(config.partitions))
        # after a `partitions` event, the grown topic's (worked out once, at the event)
        self.fed_after: frozenset[int] | None = None
        self.groups = [
            _Group(lab, f"{self.name}-{lab}", ReplicaPool(
                LaunchConfig(group=f"{self.name}-{lab}", topic=self.topic,
                             bootstrap=settings.bootstrap, kafka_config=kafka_config,
                             spark_remote=spark_remote, log_dir=log_dir / lab,
                             env=dict(env or {}),
                             **({"command": command} if command else {}),
                             share=_share(lab),
                             extra_args=("--batch-ms", str(config.batch_ms))),
                options=None if _share(lab) else _options(lab),
                max_replicas=config.replicas + 2))
            for lab in config.protocols]
        self.tail: ProcessedTail | None = None
        self.fleet: FleetSimulator | None = None
        self._state_lock = threading.Lock()  # open() and close() from different threads
        self._closed = False
        self.event = config.event  # the last event applied (a session applies several)
        # three batches of every partition fit in it, whatever the batch interval
        self.warm_window_ms = max(int(WARM_WINDOW_S * 1000), 4 * config.batch_ms)
        self.partitions = config.partitions  # the topic's, grown by a `partitions` event

    def open(self) -> ProcessedTail:
        """The topics, the changelogs' reader, the cars and every group's replicas: what the
        phases below work on, until `close()`."""
        cfg = self.config
        for g in self.groups:
            ensure_topics(self.settings, group=g.group, topic=self.topic,
                          partitions=cfg.partitions)
            if _share(g.lab):
                ensure_share_group(self.settings, g.group)
        tail = ProcessedTail(self.settings, [g.group for g in self.groups],
                             share={g.group for g in self.groups if _share(g.lab)})
        fleet = FleetSimulator(self.settings, topic=self.topic, streams=cfg.stream_count,
                               rate=cfg.rate)
        with self._state_lock:  # a close() meanwhile (Stop pressed while starting) wins
            if self._closed:
                tail.close()
                raise LabError("the lab was stopped while it started")
            self.tail, self.fleet = tail, fleet
            fleet.start()
        for g in self.groups:
            g.pool.scale(cfg.replicas)  # a pool closed meanwhile refuses (PoolError)
        self.progress(f"lab: {len(self.groups)} groups of {cfg.replicas} replicas on "
                      f"{self.topic} ({cfg.partitions} partitions, {cfg.rate:.0f} msg/s)")
        return self.tail

    def close(self, grace: float | None = None) -> None:
        """Every replica, the cars, the reader; safe after a partial `open()`. The groups'
        replicas stop at once, not one group after the other: a supervisor stopping has a
        few seconds for all of it (`grace`: a replica's before SIGKILL)."""
        with self._state_lock:
            self._closed = True
            fleet, self.fleet = self.fleet, None
        if fleet is not None:
            fleet.stop(FLEET_FLUSH_S)
        stopping = [threading.Thread(target=g.pool.shutdown, args=(grace,), daemon=True,
                                     name=f"lab-stop-{g.lab}") for g in self.groups]
        for t in stopping:
            t.start()
        for t in stopping:
            t.join()
        with self._state_lock:
            tail, self.tail = self.tail, None
        if tail is not None:
            tail.close()

    def execute(self) -> LabResult:
        """The whole run in one call: warm up, baseline, the event, the scores."""
        cfg = self.config
        try:
            tail = self.open()
            self._warm(tail)
            baseline_from = now_ms()
            before = psutil.cpu_times()
            self._baseline(tail, baseline_from)
            busy = busy_cores(before, psutil.cpu_times())
            event_ms = now_ms()
            self.take_cadence(tail, baseline_from, event_ms)
            self.apply(tail)
            self.progress(f"lab: {cfg.event} applied to every group")
            until_ms = self._settle(tail, event_ms)
            scores = self.scores(tail, baseline_from, event_ms, until_ms)
            notes = tuple(note for g in self.groups for note in self.notes(g))
            return LabResult(self.name, self.topic, cfg.event, scores,
                             round((until_ms - event_ms) / 1000, 1), notes,
                             busy_cores=busy, cores=psutil.cpu_count())
        finally:
            self.close()

    def baseline_taken(self, tail: ProcessedTail, baseline_from: int, now: int,
                       min_s: float) -> bool:
        """Every group's cadence is known from `min_s` at least, and from three of its batch
        intervals (a loaded laptop batches every few seconds; a share group's replicas,
        slower to start, once had not processed a partition twice in 8 s): the event's
        stall limit is taken from it."""
        slowest = 0.0
        for g in self.groups:
            rhythm = cadence(batches(tail.writes[g.group]), baseline_from, now)
            if rhythm is None:
                return False
            slowest = max(slowest, rhythm.typical_ms)
        return now - baseline_from >= max(min_s * 1000, 3 * slowest)

    def _baseline(self, tail: ProcessedTail, baseline_from: int) -> None:
        """Read until `baseline_taken` (the config's baseline_s at least), or fail saying
        which groups had no cadence after as long as a warm-up may take."""
        cfg = self.config
        deadline = time.monotonic() + cfg.baseline_s + cfg.warm_timeout_s
        self._sleep_reading(tail, cfg.baseline_s)
        while not self.baseline_taken(tail, baseline_from, now_ms(), cfg.baseline_s):
            if time.monotonic() > deadline:
                slow = [g.lab for g in self.groups
                        if cadence(batches(tail.writes[g.group]), baseline_from, now_ms()) is None]
                raise LabError(f"groups {', '.join(slow) or 'all'} processed no partition "
                               f"twice in the {cfg.baseline_s + cfg.warm_timeout_s:.0f}s "
                               "before the event, so no cadence to measure stalls against "
                               "(replica logs under the lab's log directory say why)")
            self._sleep_reading(tail, 1.0)

    def take_cadence(self, tail: ProcessedTail, baseline_from: int, event_ms: int) -> None:
        """Each group's stall limit, from its batches between the two times."""
        for g in self.groups:
            found = cadence(batches(tail.writes[g.group]), baseline_from, event_ms)
            g.silence_ms = found.silence_ms if found is not None else g.silence_ms

    def scores(self, tail: ProcessedTail, baseline_from: int, event_ms: int,
               until_ms: int) -> tuple[Score, ...]:
        try:
            return tuple(score(g.lab, tail.writes[g.group], baseline_from, event_ms, until_ms,
                               victim=g.victim, stops=tail.stops[g.group])
                         for g in self.groups)
        except ValueError as exc:
            raise LabError(str(exc)) from None

    # ---- phases ------------------------------------------------------------------------

    def _warm(self, tail: ProcessedTail) -> None:
        """Until, in every group, each replica processed a batch and each partition three
        within the last warm window: the joins of the start-up are over."""
        deadline = time.monotonic() + self.config.warm_timeout_s
        next_note = time.monotonic() + 10
        while time.monotonic() < deadline:
            tail.read()
            if all(self.warm_group(tail, g, now_ms()) for g in self.groups):
                return
            if time.monotonic() >= next_note:
                next_note = time.monotonic() + 10
                self.progress("lab: warming up: " + "; ".join(
                    f"{g.lab} {self._warmth(tail, g, self.warm_since(tail, g, now_ms()))}"
                    for g in self.groups))
        cold = [g.lab for g in self.groups if not self.warm_group(tail, g, now_ms())]
        raise LabError(f"groups {', '.join(cold)} did not process every partition within "
                       f"{self.config.warm_timeout_s:.0f}s (replica logs under the lab's "
                       f"log directory say why)")

    def warm_since(self, tail: ProcessedTail, g: _Group, now: int) -> int:
        """Where the warm window starts: `warm_window_ms` ago, or four of the group's recent
        batch intervals on a machine slower than that (a loaded laptop beside the demo
        batches every few seconds, and three batches never fit in six)."""
        recent = batches(tail.writes[g.group][-CADENCE_SCAN:])
        rhythm = cadence(recent, now - WARM_LOOKBACK_MS, now)
        window = self.warm_window_ms if rhythm is None else max(self.warm_window_ms,
                                                                 4 * rhythm.typical_ms)
        return now - int(min(window, WARM_LOOKBACK_MS))

    def warm_group(self, tail: ProcessedTail, g: _Group, now: int) -> bool:
        replicas, partitions = self._warmth_counts(tail, g, self.warm_since(tail, g, now))
        return (replicas >= min(self.config.replicas, self.config.partitions)
                and partitions >= self.fed)

    def _warmth_counts(self, tail: ProcessedTail, g: _Group, since: int) -> tuple[int, int]:
        """(replicas that processed a batch, partitions with three batches) since `since`."""
        writes = [w for w in tail.writes[g.group][-WARM_SCAN:] if w.t_ms > since]
        counts: dict[int, set[int]] = {}
        for w in writes:
            counts.setdefault(w.partition, set()).add(w.t_ms)
        return (len({w.replica for w in writes}),
                sum(1 for ts in counts.values() if len(ts) >= 3))

    def _warmth(self, tail: ProcessedTail, g: _Group, since: int) -> str:
        replicas, partitions = self._warmth_counts(tail, g, since)
        return (f"{replicas}/{self.config.replicas} replicas, "
                f"{partitions}/{self.fed} partitions with cars steady")

    def apply(self, tail: ProcessedTail, event: str | None = None) -> None:
        """`event` (the config's by default) to every group, one right after the other."""
        event = event or self.config.event
        self.event = event
        if event == PARTITIONS:
            grown = (self.config.grown_partitions if self.partitions == self.config.partitions
                     else 2 * self.partitions)
            self.partitions = grown
            self.fed_after = self.config.fed_partitions(grown)
            for g in self.groups:  # the changelogs first: co-partitioned when a member sees it
                add_partitions(self.settings, summaries_topic(g.group), grown)
            add_partitions(self.settings, self.topic, grown)
            return
        for g in self.groups:
            first = g.pool.live_names()[0]
            if event == KILL:
                g.victim = g.pool.kill(first).name
            elif event == STOP:
                g.victim = g.pool.stop(first).name
            elif event == ADD:
                g.added = g.pool.start().name
            elif event == BOUNCE:
                g.bounce = list(g.pool.live_names())
                self._bounce_next(g)

    def refusal(self, event: str) -> str | None:
        """Why `event` cannot be applied to every group now; None when it can."""
        for g in self.groups:
            live = len(g.pool.live_names())
            if event in (KILL, STOP, BOUNCE) and not live:
                return f"{g.lab} has no running replica to {event}"
            if event == ADD and live >= g.pool.max_replicas:
                return f"{g.lab} already runs {live} replicas, the lab's most"
        if event == PARTITIONS and 2 * self.partitions > MAX_PARTITIONS:
            return f"the topic has {self.partitions} partitions; doubling them passes " \
                   f"{MAX_PARTITIONS}"
        return None

    def forget_event(self) -> None:
        """A measurement is over: the next event starts with no victim, nothing added."""
        for g in self.groups:
            g.victim = g.added = g.bouncing = None
            g.bounce = []

    def _bounce_next(self, g: _Group) -> None:
        name = g.bounce.pop(0)
        g.bouncing = (name, g.pool.get(name).restarts, time.time())
        g.pool.restart(name)

    def _settle(self, tail: ProcessedTail, event_ms: int) -> int:
        """Read until every group is done with the event and every measured partition has
        processed within its stall limit for `quiet_s`; the end of the measurement."""
        cfg = self.config
        deadline = time.monotonic() + cfg.max_window_s
        quiet_since: float | None = None
        next_note = time.monotonic() + 10
        while time.monotonic() < deadline:
            tail.read()
            now = time.monotonic()
            for g in self.groups:
                self.step_bounce(tail, g)
            waiting = [g.lab for g in self.groups if not self.done(tail, g, event_ms)]
            if not waiting:
                quiet_since = quiet_since or now
                if now - quiet_since >= cfg.quiet_s:
                    return now_ms()
            else:
                quiet_since = None
            if now >= next_note:
                next_note = now + 10
                self.progress(f"lab: {(now_ms() - event_ms) / 1000:4.0f}s after the event, "
                              f"waiting for {', '.join(waiting) or 'a quiet spell'}")
        self.progress(f"lab: the measurement ends at {cfg.max_window_s:.0f}s with a group "
                      "still stalled")
        return now_ms()

    def step_bounce(self, tail: ProcessedTail, g: _Group) -> None:
        """A rolling restart's next step: once the replica restarted last processes again,
        restart the next one; after the last, the group's bounce is over."""
        if g.bouncing is None:
            return
        name, restarts, asked = g.bouncing
        info = g.pool.get(name)
        if info.restarts <= restarts or not info.alive or not _wrote_since(
                tail, g.group, name, (info.started_at or asked) * 1000):
            return
        if g.bounce:
            self._bounce_next(g)
        else:
            g.bouncing = None

    def done(self, tail: ProcessedTail, g: _Group, event_ms: int) -> bool:
        """The group is over the event: what the event asked of it happened, and every
        partition processed a batch since the event, the last within the stall limit of now.
        Since the event: a victim's partitions keep their last batch from before it, which
        looks recent for a whole stall limit (17 s at a 4 s cadence on a loaded machine);
        the Lab page once ended a kill's measurement after 6 s, before any group rebalanced."""
        if g.bouncing is not None:
            return False
        if g.added is not None and not _wrote_since(tail, g.group, g.added, event_ms):
            return False
        latest = tail.latest[g.group]
        if self.fed_after is not None and not self.fed_after <= {
                p for p, t in latest.items() if t > event_ms}:
            return False
        now = now_ms()
        return bool(latest) and all(t > event_ms and now - t <= g.silence_ms
                                    for t in latest.values())

    def notes(self, g: _Group) -> list[str]:
        if g.victim:
            return [f"{g.lab}: {self.event} hit {g.victim}"]
        if g.added:
            return [f"{g.lab}: {g.added} added"]
        return []

    def _sleep_reading(self, tail: ProcessedTail, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            tail.read()


def busy_cores(before: object, after: object) -> float:
    """Cores busy between two psutil.cpu_times() readings (all but idle and iowait)."""
    def split(t: object) -> tuple[float, float]:
        total = sum(getattr(t, f) for f in t._fields)  # type: ignore[attr-defined]
        return total, getattr(t, "idle", 0.0) + getattr(t, "iowait", 0.0)

    (t0, i0), (t1, i1) = split(before), split(after)
    cores = psutil.cpu_count() or 1
    return round(cores * (1 - (i1 - i0) / max(t1 - t0, 1e-9)), 2)


def _share(lab: str) -> bool:
    return LAB_PROTOCOLS[lab].protocol == SHARE


def _options(lab: str) -> ReplicaOptions:
    p = LAB_PROTOCOLS[lab]
    return ReplicaOptions(protocol=p.protocol, assignor=p.assignor, static=p.static)


def _wrote_since(tail: ProcessedTail, group: str, replica: str, since_ms: float) -> bool:
    return tail.by_replica[group].get(replica, 0) > since_ms


def now_ms() -> int:
    return int(time.time() * 1000)

"""Carry out a chaos plan against real replica processes while the fleet produces.

The replicas are the supervisor's `ReplicaPool` children (real `groupscope replica`
processes, SIGKILL is a real crash); the load is the real `FleetSimulator`; progress is read
by the real observer. Nothing here fakes a part: the harness only decides when to hurt.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from backend.chaos.progress import RunMonitor
from backend.chaos.schedule import (
    BROKER_KILL,
    BROKER_START,
    KILL,
    SCALE,
    START,
    STOP,
    Action,
    broker_plan,
    plan,
)
from backend.chaos.verify import Verdict, judge, judge_share, read_summaries
from backend.contracts import CARELESS_COMMITS, Snapshot
from backend.contracts.control import ReplicaOptions
from backend.fleet.simulator import FleetSimulator
from backend.kafka.settings import KafkaSettings
from backend.kafka.share import ensure_share_group
from backend.kafka.topics import TopicSpec, ensure, ensure_topics
from backend.observer.observer import Observer
from backend.observer.queue_tail import QueueTail
from backend.pool.processes import LaunchConfig, PoolError, ReplicaPool

log = logging.getLogger("groupscope.chaos")


@dataclass(frozen=True)
class ChaosConfig:
    duration_s: float = 60.0
    rate: float = 500.0
    streams: int = 24
    partitions: int = 6
    start_replicas: int = 3
    min_replicas: int = 1
    max_replicas: int = 5
    every_s: tuple[float, float] = (4.0, 9.0)
    seed: int = 1
    options: ReplicaOptions = field(default_factory=ReplicaOptions)
    drain_timeout_s: float = 180.0
    batch_ms: int = 500
    name: str = ""  # group/topic suffix; default: chaos-<epoch seconds>
    broker_kills: bool = False  # also SIGKILL and restart Kafka nodes (needs `brokers`)
    share: bool = False  # share-group replicas (`replica --share`) instead of a consumer group


@dataclass
class ChaosReport:
    config: ChaosConfig
    group: str
    topic: str
    done: dict[str, int]  # action kind -> carried out
    skipped: int  # actions the pool refused (e.g. the victim was already stopping)
    rebalances: int
    longest_stall_s: float
    longest_rebalance_gap_s: float
    max_lag: int
    drain_s: float | None  # None: did not drain in time
    verdict: Verdict | None
    producer_failures: int
    error: str | None = None

    @property
    def ok(self) -> bool:
        v = self.verdict
        if self.error or v is None or self.drain_s is None or self.producer_failures:
            return False
        if v.unexpected or (v.lost and not self.careless):
            return False
        if self.config.share:  # a duplicate is a redelivery summarised twice, never more
            return v.unexplained_duplicates == 0
        return not (self.config.options.exactly_once and v.duplicates)

    @property
    def careless(self) -> bool:
        """A commit mode run to show what it loses: its losses are the lesson, not a fault."""
        return not self.config.share and self.config.options.commit in CARELESS_COMMITS


Progress = Callable[[str], None]


class BrokerNodes(Protocol):
    """The Kafka nodes a run may kill: an EmbeddedCluster in this process, or the one a
    `groupscope broker --brokers N` process runs (nodes.MailboxCluster)."""

    def node_ids(self) -> list[int]: ...

    def kill(self, node_id: int) -> object: ...

    def start_node(self, node_id: int, wait: bool = True) -> object: ...


class ChaosRun:
    def __init__(self, settings: KafkaSettings, spark_remote: str | None, config: ChaosConfig,
                 log_dir: Path, kafka_config: str | None = None,
                 progress: Progress = print, brokers: BrokerNodes | None = None) -> None:
        if config.broker_kills and brokers is None:
            raise ValueError("broker kills need the cluster's nodes (brokers=...)")
        self.brokers = brokers
        self.down: int | None = None  # the node a broker fault has down right now
        self.settings = settings
        self.config = config
        name = config.name or f"chaos-{int(time.time())}"
        self.group = f"{name}-queue" if config.share else f"{name}-group"
        self.topic = f"{name}-telemetry"
        self.progress = progress
        self.rng = random.Random(config.seed)
        self.pool = ReplicaPool(
            LaunchConfig(group=self.group, topic=self.topic, bootstrap=settings.bootstrap,
                         kafka_config=kafka_config, spark_remote=spark_remote,
                         extra_args=("--batch-ms", str(config.batch_ms)), log_dir=log_dir,
                         # started replicas come from a warm standby, as in the demo (a
                         # consumer group's: the standby speaks only that replica's order)
                         standby=not config.share, share=config.share),
            options=config.options, max_replicas=max(config.max_replicas, 1) + 4)
        self.monitor = RunMonitor()
        kinds = (KILL, STOP, START, SCALE) + ((BROKER_KILL, BROKER_START)
                                              if config.broker_kills else ())
        self.done = dict.fromkeys(kinds, 0)
        self.skipped = 0
        self._seen_ms: int | None = None  # taken_ms of the last snapshot folded in

    # ---- the run ---------------------------------------------------------------------------

    def execute(self) -> ChaosReport:
        cfg = self.config
        if cfg.share:  # the input topic, then the share group's own (before a record exists)
            ensure(self.settings, [TopicSpec(self.topic, cfg.partitions, None)])
            ensure_share_group(self.settings, self.group)
        else:
            ensure_topics(self.settings, group=self.group, topic=self.topic,
                          partitions=cfg.partitions)
        actions = plan(cfg.duration_s, cfg.seed, cfg.start_replicas, cfg.min_replicas,
                       cfg.max_replicas, cfg.every_s)
        if cfg.broker_kills:
            actions = sorted(actions + broker_plan(cfg.duration_s, cfg.seed),
                             key=lambda a: a.at_s)
        self.progress(f"chaos: group {self.group}, {len(actions)} actions planned over "
                      f"{cfg.duration_s:.0f}s at {cfg.rate:.0f} msg/s")
        fleet = FleetSimulator(self.settings, topic=self.topic, streams=cfg.streams,
                               rate=cfg.rate)
        observer = Observer(self.settings, self.group, self.topic, interval=0.5,
                            sample_every=3600, read_generation=False)
        drain_s: float | None = None
        verdict: Verdict | None = None
        error: str | None = None
        stats = None
        try:
            observer.start()
            self.pool.scale(cfg.start_replicas)
            fleet.start()
            self._play(actions, observer, time.monotonic())
            self._restore_broker()
            self._ensure_one_replica()
            # what the producer still queues gets the drain's budget, not the fleet's 15 s:
            # a node started again near the run's end may still be loading its
            # coordinators ("Coordinator load in progress"), and a message never delivered
            # fails the run as surely as one lost
            stats = fleet.stop(cfg.drain_timeout_s)
            self.progress(f"chaos: produced {stats.delivered} messages; draining")
            produced = dict(stats.next_seq)
            if cfg.share:
                drain_s, verdict = self._drain_share(produced)
            else:
                drain_s = self._drain(observer)
                if drain_s is not None:
                    verdict = self._settled_verdict(produced)
            if drain_s is None:
                error = f"the group did not catch up within {cfg.drain_timeout_s:.0f}s"
        finally:
            if stats is None:
                stats = fleet.stop()
            self.pool.shutdown()
            observer.stop()
            self._restore_broker()
        return ChaosReport(
            config=cfg, group=self.group, topic=self.topic, done=dict(self.done),
            skipped=self.skipped, rebalances=self.monitor.rebalances,
            longest_stall_s=round(self.monitor.stalls.longest_s, 2),
            longest_rebalance_gap_s=round(self.monitor.longest_rebalance_gap_ms / 1000, 2),
            max_lag=self.monitor.max_lag, drain_s=drain_s, verdict=verdict,
            producer_failures=stats.failed, error=error)

    def _play(self, actions: list[Action], observer: Observer, t0: float) -> None:
        pending = list(actions)
        next_note = 0.0
        while time.monotonic() - t0 < self.config.duration_s:
            now = time.monotonic() - t0
            self._watch(observer)
            while pending and pending[0].at_s <= now:
                self._apply(pending.pop(0))
            if now >= next_note:
                next_note = now + 10
                self.progress(f"chaos: {now:5.0f}s  active {self.pool.active_count():2d}  "
                              f"rebalances {self.monitor.rebalances:3d}  "
                              f"lag {self._lag(observer):6d}")
            time.sleep(0.25)
        # what the plan put inside the run is played even when the loop came to it late: a
        # graceful stop near the end can hold the loop past the run's last seconds
        for action in pending:
            if action.at_s < self.config.duration_s:
                self._apply(action)

    def _apply(self, action: Action) -> None:
        if action.kind in (BROKER_KILL, BROKER_START):
            self._broker_fault(action.kind)
            return
        try:
            if action.kind in (KILL, STOP):
                live = sorted(r.name for r in self.pool.replicas() if r.state == "running")
                if len(live) <= self.config.min_replicas:
                    self.skipped += 1
                    return
                victim = self.rng.choice(live)
                (self.pool.kill if action.kind == KILL else self.pool.stop)(victim)
            elif action.kind == START:
                self.pool.start()
            else:
                self.pool.scale(action.replicas)
        except PoolError as exc:
            self.skipped += 1
            log.info("chaos: %s skipped: %s", action.kind, exc)
            return
        self.done[action.kind] += 1

    def _broker_fault(self, kind: str) -> None:
        """SIGKILL a random node (any: the controller quorum's leader too), or start the one
        that is down; the node's own start waits until it answers."""
        assert self.brokers is not None
        if kind == BROKER_KILL and self.down is None:
            victim = self.rng.choice(sorted(self.brokers.node_ids()))
            self.brokers.kill(victim)
            self.down = victim
            self.progress(f"chaos: Kafka node {victim} killed")
        elif kind == BROKER_START and self.down is not None:
            self._restore_broker()
        else:
            self.skipped += 1
            return
        self.done[kind] += 1

    def _restore_broker(self) -> None:
        if self.brokers is not None and self.down is not None:
            node, self.down = self.down, None
            # not awaited: the node catches up on its own while the plan goes on
            self.brokers.start_node(node, wait=False)
            self.progress(f"chaos: Kafka node {node} started again")

    def _ensure_one_replica(self) -> None:
        if self.pool.active_count() < 1:
            self.pool.scale(1)

    def _watch(self, observer: Observer) -> Snapshot | None:
        snap = observer.latest()
        if snap is not None and snap.taken_ms != self._seen_ms:
            self._seen_ms = snap.taken_ms
            self.monitor.observe(snap.taken_ms / 1000, snap)
        return snap

    @staticmethod
    def _lag(observer: Observer) -> int:
        snap = observer.latest()
        return snap.total_lag if snap is not None else -1

    def _drain_share(self, produced: dict[str, int]) -> tuple[float | None, Verdict | None]:
        """Seconds until the share group's deltas hold every produced seq of every stream
        (a share group has no committed offset to wait for), and the verdict then; (None,
        the verdict so far) when the drain timeout passes first."""
        t0 = time.monotonic()
        tail = QueueTail(self.settings, self.group)
        next_note = 0.0
        try:
            while True:
                verdict = judge_share(produced, tail.read(budget_s=1.0))
                waited = time.monotonic() - t0
                if verdict.lost == 0:
                    return round(waited, 2), verdict
                if waited >= self.config.drain_timeout_s:
                    return None, verdict
                if waited >= next_note:
                    next_note = waited + 10
                    self.progress(f"chaos: draining, {verdict.lost} records not summarised yet")
                time.sleep(0.25)
        finally:
            tail.close()

    def _settled_verdict(self, produced: dict[str, int], within_s: float = 30.0) -> Verdict:
        """The verdict once the summaries stop changing. A careful replica commits after its
        summaries are durable, so at the drain they are final; a careless one may have
        committed what it is still summarising, so wait until two reads 2 s apart agree."""
        verdict = judge(produced, read_summaries(self.settings, self.group))
        if self.config.options.commit not in CARELESS_COMMITS:
            return verdict
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            time.sleep(2.0)
            again = judge(produced, read_summaries(self.settings, self.group))
            if (again.processed, again.lost) == (verdict.processed, verdict.lost):
                return again
            verdict = again
        return verdict

    def _drain(self, observer: Observer) -> float | None:
        """Seconds until every input partition's committed offset reaches its end, or None.

        Only snapshots taken after the fleet stopped count: their end offsets are final."""
        t0 = time.monotonic()
        stopped_ms = int(time.time() * 1000)
        next_note = 0.0
        while time.monotonic() - t0 < self.config.drain_timeout_s:
            snap = self._watch(observer)
            if snap is not None and not snap.error and snap.taken_ms > stopped_ms:
                parts = snap.partitions
                if len(parts) == self.config.partitions and all(
                        (p.committed or 0) >= p.end for p in parts):
                    return round(time.monotonic() - t0, 2)
                waited = time.monotonic() - t0
                if waited >= next_note:
                    next_note = waited + 10
                    self.progress(f"chaos: draining, lag {snap.total_lag}")
            time.sleep(0.25)
        return None

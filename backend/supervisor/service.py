"""`groupscope backend`: the supervisor process.

Ensures the topics, runs the fleet simulator in-process, owns the replica processes and
serves the control API. SIGTERM or Ctrl-C stops the API, then every replica (gracefully,
SIGKILL after a grace period), then the simulator, all within SHUTDOWN_BUDGET_S whatever
the broker and Spark are doing (a replica's commit or the simulator's flush to a broker
that is gone would otherwise wait for their own, much longer, time-outs); replicas also die
with it if it is SIGKILLed (backend/proc.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from backend.broker.nodes import ClusterError, cluster_nodes
from backend.broker.nodes import request as node_request
from backend.contracts import (
    CLASSIC,
    DEFAULT_GROUP,
    DEFAULT_PARTITIONS,
    DEFAULT_SHARE_GROUP,
    INPUT_TOPIC,
    SHARE,
    summaries_topic,
)
from backend.contracts.control import (
    MAX_REPLICAS,
    BrokerNode,
    BrokersAnswer,
    ExternalMember,
    FleetState,
    LabStartRequest,
    LabState,
    MovedStream,
    PartitionChange,
    ReplayAnswer,
    ReplayPreview,
    ReplayRequest,
    ReplicaInfo,
    ReplicaOptions,
    ShareStatus,
    Status,
)
from backend.errors import one_line
from backend.fleet import simulator
from backend.fleet.simulator import FleetSimulator
from backend.kafka import topics
from backend.kafka.groups import GroupDescription
from backend.kafka.javaadmin.reader import KafkaReader
from backend.kafka.partitioner import partition_for
from backend.kafka.settings import KafkaSettings
from backend.kafka.topics import TopicError, ensure_topics
from backend.lab.run import LabConfig, LabRun
from backend.lab.session import LabSession
from backend.pool.names import colour_for
from backend.pool.processes import (
    DEFAULT_STOP_GRACE,
    LaunchConfig,
    PoolError,
    ReplicaPool,
    UnknownBroker,
    UnknownReplica,
    default_replica_command,
)
from backend.proc import LAST_WAVE_S, STOP_BUDGET_S, StopSignals
from backend.supervisor.auth import generate_token, remove_control_files, write_control_files
from backend.supervisor.memory import DemoMemory
from backend.supervisor.replay import Replayer

log = logging.getLogger("groupscope.supervisor")

# SIGTERM to exit: within `groupscope up`'s budget, before it stops the broker and Spark
SHUTDOWN_BUDGET_S = STOP_BUDGET_S - LAST_WAVE_S
FLEET_FLUSH_MIN_S = 1.0
MEMORY_STOP_S = 1.0  # the memory's last cycle written and its lease released, or left

DESCRIBE_TIMEOUT_S = 3.0
# At start-up the first replica joins alone and the others start once it is a member of the
# group, or after this long at the most (see _start_replicas)
FIRST_JOIN_WAIT_S = 30.0
LAB_STOP_GRACE_S = 1.5  # the lab's replicas, all at once, within the shutdown's budget
LAB_RATE = 200.0  # msg/s into the lab's topic: the demo's own rate, every group reads it all


class DependencyError(Exception):
    """Kafka or another dependency failed while doing a valid request (503)."""


class Endpoint(Protocol):
    """The server that exposes a supervisor to its callers (`api.ControlServer`)."""

    @property
    def url(self) -> str: ...

    def start_background(self) -> None: ...

    def stop(self) -> None: ...


class Serve(Protocol):
    """Makes the (not yet started) server of a supervisor. Passed in by whoever runs both,
    because the API imports this module for what it drives and raises: this module importing
    the API back would be a circle."""

    def __call__(self, supervisor: SupervisorService, token: str, *, port: int) -> Endpoint: ...


@dataclass
class ServiceConfig:
    settings: KafkaSettings
    data_dir: Path
    group: str = DEFAULT_GROUP
    topic: str = INPUT_TOPIC
    partitions: int = DEFAULT_PARTITIONS
    kafka_config: str | None = None
    spark_remote: str | None = None
    replicas: int = 3
    fleet: bool = True
    streams: int = 12
    rate: float = 200.0
    port: int = 0
    options: ReplicaOptions = field(default_factory=ReplicaOptions)
    replica_command: tuple[str, ...] = field(default_factory=default_replica_command)
    replica_args: tuple[str, ...] = ()
    max_replicas: int = MAX_REPLICAS
    stop_grace: float = DEFAULT_STOP_GRACE
    standby: bool = True  # a warm standby replica, with the replica command itself only
    share_group: str = DEFAULT_SHARE_GROUP  # its replicas start only when asked
    history: bool = True  # keep the memory (<data>/history.sqlite) of every group


class SupervisorService:
    """What the control API drives; `start()` / `close()` own every resource, the server that
    `serve` makes included."""

    def __init__(self, config: ServiceConfig, serve: Serve) -> None:
        self.config = config
        self.max_replicas = config.max_replicas
        self.token = generate_token()
        self.pool: ReplicaPool | None = None
        self.share_pool: ReplicaPool | None = None
        self._serve = serve
        self.server: Endpoint | None = None
        self.fleet: Any = None
        self._reader: KafkaReader | None = None
        self._partitions: int | None = None
        self._topic_lock = threading.Lock()
        self._closing = threading.Event()
        # the start-up's other replicas are still to come (_start_replicas); a request that
        # changes the pool clears it under the lock, and they are then left to the user
        self._rest_lock = threading.Lock()
        self._rest_pending = False
        self._replay_lock = threading.Lock()
        self.memory: DemoMemory | None = None
        self.lab: LabSession | None = None  # the Lab page's groups, while they run
        self._lab_lock = threading.Lock()

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> SupervisorService:
        cfg = self.config
        try:
            layout = ensure_topics(cfg.settings, group=cfg.group, topic=cfg.topic,
                                   partitions=cfg.partitions)
            self._partitions = layout.input.partitions
            self._reader = KafkaReader.shared(cfg.settings, "groupscope-supervisor",
                                              DESCRIBE_TIMEOUT_S)
            with contextlib.suppress(Exception):  # started and connected before any status
                self._reader.cluster()
            if cfg.history:
                self.memory = DemoMemory(cfg.settings, Path(cfg.data_dir),
                                         frozenset({cfg.group, cfg.share_group}))
            if cfg.fleet:
                self.fleet = FleetSimulator(cfg.settings, topic=cfg.topic, streams=cfg.streams,
                                            rate=cfg.rate)
                self.fleet.start()
            self.pool = ReplicaPool(
                LaunchConfig(group=cfg.group, topic=cfg.topic, bootstrap=cfg.settings.bootstrap,
                             kafka_config=cfg.kafka_config, spark_remote=cfg.spark_remote,
                             command=tuple(cfg.replica_command),
                             extra_args=tuple(cfg.replica_args),
                             log_dir=Path(cfg.data_dir) / "replicas",
                             env={"GROUPSCOPE_DATA": str(Path(cfg.data_dir).resolve())},
                             stop_grace=cfg.stop_grace,
                             standby=cfg.standby
                             and tuple(cfg.replica_command) == default_replica_command()),
                options=cfg.options, max_replicas=cfg.max_replicas,
                on_event=lambda e: self._replica_event(cfg.group, "replica", e))
            self.share_pool = ReplicaPool(
                LaunchConfig(group=cfg.share_group, topic=cfg.topic,
                             bootstrap=cfg.settings.bootstrap, kafka_config=cfg.kafka_config,
                             spark_remote=cfg.spark_remote, command=tuple(cfg.replica_command),
                             log_dir=Path(cfg.data_dir) / "share-replicas",
                             env={"GROUPSCOPE_DATA": str(Path(cfg.data_dir).resolve())},
                             stop_grace=cfg.stop_grace, share=True),
                max_replicas=cfg.max_replicas,
                on_event=lambda e: self._replica_event(cfg.share_group, "share replica", e))
            self.server = self._serve(self, self.token, port=cfg.port)
            self.server.start_background()
            write_control_files(Path(cfg.data_dir), self.server.url, self.token,
                                bootstrap=cfg.settings.bootstrap, kafka_config=cfg.kafka_config)
            if cfg.replicas:
                self._start_replicas(min(cfg.replicas, cfg.max_replicas))
        except BaseException:
            self.close()
            raise
        return self

    def _replica_event(self, group: str, what: str, event: dict) -> None:
        log.info("%s %s: %s (pid %s)", what, event["replica"], event["action"], event["pid"])
        if self.memory is not None:
            self.memory.note(group, event)

    def _booted(self) -> None:
        """From now on a replica started or stopped is the presenter's doing."""
        if self.memory is not None:
            self.memory.booting = False

    def _start_replicas(self, n: int) -> None:
        """The first replica alone, the others once the broker lists it as a member (or
        FIRST_JOIN_WAIT_S has passed), unless a request changed the pool meanwhile; no
        standby until then (ReplicaPool.hold_standby).

        Why: on a fresh engine a replica's warm-up is its first Spark query, seconds of
        compiling. Alone, the first replica was ready 6.0 s after its start on 2 cores; three
        warming up at once shared the engine and each took 8.6-10.5 s. So the group is live
        (every partition owned) seconds sooner, and the others find the engine warm. Only
        for real replicas: a stand-in command may never join a group."""
        pool = self._pool()
        if n <= 1 or tuple(self.config.replica_command) != default_replica_command():
            pool.scale(n)
            self._booted()
            return
        pool.hold_standby(True)
        self._rest_pending = True
        first = pool.scale(1)["started"]
        threading.Thread(target=self._start_the_rest, args=(n, first), daemon=True,
                         name="start-replicas").start()

    def _start_the_rest(self, n: int, first: list[str]) -> None:
        deadline = time.monotonic() + FIRST_JOIN_WAIT_S
        try:
            while time.monotonic() < deadline and self._rest_pending:
                try:
                    if set(first) <= set(self.group_view().client_ids):
                        break
                except Exception:  # the broker is busy or restarting: ask again
                    pass
                if self._closing.wait(0.25):
                    return
            with self._rest_lock, contextlib.suppress(PoolError):  # PoolError: closing
                if self._rest_pending and not self._closing.is_set():
                    self._rest_pending = False
                    self._pool().scale(n)
        finally:
            self._booted()
            with contextlib.suppress(PoolError):
                self._pool().hold_standby(False)

    def _changing(self) -> ReplicaPool:
        """The pool, for a request that changes it: from then on the replica count is the
        user's, so whatever the start-up still meant to start is not started."""
        with self._rest_lock:
            self._rest_pending = False
        self._booted()
        return self._pool()

    def close(self, budget: float = SHUTDOWN_BUDGET_S) -> None:
        """Stop API, replicas, simulator within `budget` s. Idempotent; safe after a partial
        start. Replicas get what is left after the API, less a second for the simulator's
        flush; one that is still finishing its batch then is SIGKILLed (a crash the group
        survives: nothing uncommitted is lost)."""
        deadline = time.monotonic() + budget
        self._closing.set()
        remove_control_files(Path(self.config.data_dir))
        if self.memory is not None:  # first: its watcher reads through the reader closed last
            self.memory.close(timeout=MEMORY_STOP_S)
            self.memory = None
        if self.server is not None:
            self.server.stop()
            self.server = None
        self._close_lab(grace=min(self.config.stop_grace, LAB_STOP_GRACE_S))
        for pool in (self.pool, self.share_pool):
            if pool is not None:
                left = deadline - time.monotonic() - FLEET_FLUSH_MIN_S
                pool.shutdown(grace=max(0.5, min(self.config.stop_grace, left)))
        if self.fleet is not None:
            try:
                self.fleet.stop(max(FLEET_FLUSH_MIN_S, deadline - time.monotonic()))
            except Exception as exc:
                log.warning("fleet simulator did not stop cleanly: %s", exc)
            self.fleet = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    def run_foreground(self) -> int:
        """Until SIGTERM / SIGINT / SIGHUP; then stop everything. Main thread only."""
        with StopSignals() as signals:
            try:
                self.start()
                log.info("supervisor ready at %s (pid %d, group %s, topic %s)", self.url,
                         os.getpid(), self.config.group, self.config.topic)
                signals.wait()
                log.info("stopping: replicas first, then the simulator")
            finally:
                self.close()
        return 0

    # ---- reads -----------------------------------------------------------------------------

    def _pool(self) -> ReplicaPool:
        if self.pool is None:
            raise PoolError("the supervisor is not running")
        return self.pool

    def group_view(self) -> GroupDescription:
        """The group as the Kafka reader describes it (a JVM child: a broker dying
        mid-request costs this answer, never this process and the replicas it started).
        A group not created yet is Dead with no members, as Kafka reports it."""
        assert self._reader is not None
        group = self.config.group
        answer = self._reader.describe([group]).get(group, "GROUP_ID_NOT_FOUND")
        if isinstance(answer, str):
            if "GROUP_ID_NOT_FOUND" in answer:
                return GroupDescription(group, "Dead", CLASSIC, None, ())
            raise RuntimeError(answer)
        return answer

    def status(self) -> Status:
        pool = self._pool()
        replicas = pool.replicas()
        view: GroupDescription | None = None
        error = None
        try:
            view = self.group_view()
        except Exception as exc:
            error = f"cannot describe group {self.config.group}: {one_line(exc)}"
        external: list[ExternalMember] = []
        if view is not None:
            ours = {r.name for r in replicas}
            by_client = {m.client_id: m for m in view.members}
            topic = self.config.topic
            annotated = []
            for r in replicas:
                m = by_client.get(r.name)
                annotated.append(_with_member(r, m is not None,
                                              m.partitions(topic) if m else ()))
            replicas = annotated
            external = [ExternalMember(client_id=m.client_id, member_id=m.member_id,
                                       host=m.host, colour=colour_for(m.client_id),
                                       partitions=m.partitions(topic))
                        for m in view.members if m.client_id not in ours]
        return Status(group=self.config.group, topic=self.config.topic,
                      partitions=self._partitions, options=pool.options,
                      replicas=tuple(replicas), external=tuple(external),
                      group_state=view.state if view else None, fleet=self._fleet_info(),
                      max_replicas=self.max_replicas, broker_error=error,
                      recent=tuple(pool.recent()[-20:]), share=self.share_status(),
                      lab=self.lab.state() if self.lab is not None else None)

    # ---- the rebalance lab (the Lab page) -------------------------------------------------

    def lab_start(self, req: LabStartRequest) -> LabState:
        """Groups of the lab's own, one protocol each, on a topic of their own that cars
        fill as the demo's do; refused while a lab runs (one at a time)."""
        cfg = self.config
        with self._lab_lock:
            if self.lab is not None:
                raise PoolError(f"a lab runs already ({self.lab.run.name}): stop it first")
            name = f"{cfg.group}-lab-{int(time.time())}"
            run = LabRun(cfg.settings, cfg.spark_remote,
                         LabConfig(protocols=tuple(req.protocols), replicas=req.replicas,
                                   partitions=req.partitions, rate=LAB_RATE, name=name),
                         Path(cfg.data_dir) / "lab" / name, kafka_config=cfg.kafka_config,
                         progress=log.info, command=tuple(cfg.replica_command),
                         env={"GROUPSCOPE_DATA": str(Path(cfg.data_dir).resolve())})
            self.lab = LabSession(run).start()
            return self.lab.state()

    def lab_event(self, event: str) -> LabState:
        lab = self.lab
        if lab is None:
            raise PoolError("no lab runs: start one first")
        return lab.ask(event)

    def lab_stop(self) -> None:
        if self.lab is None:
            raise PoolError("no lab runs")
        self._close_lab()

    def _close_lab(self, grace: float | None = None) -> None:
        with self._lab_lock:
            lab, self.lab = self.lab, None
        if lab is not None:
            lab.close(grace)

    def share_status(self) -> ShareStatus | None:
        """The share group's replicas, each marked as a member (and with the partitions it
        is assigned) as the broker reports them; a group not asked yet is not an error."""
        if self.share_pool is None:
            return None
        replicas = self.share_pool.replicas()
        group = self.config.share_group
        if not replicas:
            return ShareStatus(group=group)
        assert self._reader is not None
        try:
            answer = self._reader.describe([group], SHARE).get(group, "GROUP_ID_NOT_FOUND")
        except Exception:
            answer = "unavailable"
        if isinstance(answer, str):
            return ShareStatus(group=group, replicas=tuple(replicas))
        by_client = {m.client_id: m for m in answer.members}
        topic = self.config.topic
        marked = tuple(_with_member(r, r.name in by_client,
                                    by_client[r.name].partitions(topic)
                                    if r.name in by_client else ()) for r in replicas)
        return ShareStatus(group=group, replicas=marked, group_state=answer.state,
                           members=len(answer.members))

    # ---- the embedded Kafka cluster's nodes -------------------------------------------------

    def _broker_dir(self) -> Path:
        """Where `groupscope broker` keeps the cluster this stack runs (`cluster_nodes`
        refuses, 409, when none runs there, as with an external cluster)."""
        return Path(self.config.data_dir) / "broker"

    def brokers(self) -> BrokersAnswer:
        try:
            nodes, leader = cluster_nodes(self._broker_dir())
        except ClusterError as exc:
            raise PoolError(str(exc)) from None
        return BrokersAnswer(brokers=tuple(nodes), quorum_leader=leader)

    def broker_action(self, node_id: int, action: str) -> BrokerNode:
        """Kill, stop or start one node, done by the cluster's own process (nodes.request)."""
        where = self._broker_dir()
        try:
            nodes, _ = cluster_nodes(where)
            if node_id not in {n.id for n in nodes}:
                raise UnknownBroker(f"no Kafka node {node_id}; the cluster has nodes "
                                    f"{', '.join(str(n.id) for n in nodes)}")
            return node_request(where, action, node_id)
        except ClusterError as exc:
            raise PoolError(str(exc)) from None

    def _fleet_info(self) -> FleetState | None:
        if self.fleet is None:
            return None
        s = self.fleet.stats()
        return FleetState(running=s.running, topic=s.topic, streams=s.streams,
                          target_rate=s.target_rate, rate=round(s.rate, 1),
                          delivered=s.delivered, queued=s.queued, failed=s.failed,
                          last_error=s.last_error)

    # ---- replica actions -------------------------------------------------------------------

    def _fleet_state(self) -> FleetState:
        state = self._fleet_info()
        assert state is not None  # _fleet() refused already when there is no simulator
        return state

    def _refuse_external(self, name: str, exc: UnknownReplica) -> PoolError:
        try:
            members = {m.client_id for m in self.group_view().members}
        except Exception:
            members = set()
        if name in members:
            err = PoolError(f"{name} is an external member of {self.config.group} (not started "
                            f"by this supervisor): visible, not controllable")
            return err
        return exc

    def _replica_action(self, action: str, name: str) -> ReplicaInfo:
        try:
            return getattr(self._changing(), action)(name)
        except UnknownReplica as exc:
            raise self._refuse_external(name, exc) from None

    def start_replica(self) -> ReplicaInfo:
        return self._changing().start()

    def kill(self, name: str) -> ReplicaInfo:
        return self._replica_action("kill", name)

    def stop(self, name: str) -> ReplicaInfo:
        return self._replica_action("stop", name)

    def restart(self, name: str) -> ReplicaInfo:
        return self._replica_action("restart", name)

    def scale(self, n: int) -> dict[str, list[str]]:
        return self._changing().scale(n)

    # ---- replay: the group's committed offsets moved -------------------------------------------

    def _replayer(self) -> Replayer:
        assert self._reader is not None
        return Replayer(self.config.settings, self.config.group, self.config.topic,
                        self._reader)

    def replay_preview(self, req: ReplayRequest) -> ReplayPreview:
        self._pool()
        return self._replayer().preview(req)

    def replay(self, req: ReplayRequest) -> ReplayAnswer:
        """Stop the replicas, move the offsets, start as many again (one replay at a time)."""
        pool = self._changing()
        if not self._replay_lock.acquire(blocking=False):
            raise PoolError("a replay is already under way")
        try:
            def running() -> list[str]:
                return [r.name for r in pool.replicas() if r.alive and r.state == "running"]

            def scale(n: int) -> list[str]:
                started = pool.scale(n)["started"]
                if n == 0 and not pool.wait_for(lambda rs: not any(r.alive for r in rs),
                                                self.config.stop_grace + 10):
                    raise PoolError("the replicas did not stop in time; nothing changed")
                return started

            return self._replayer().apply(req, running, scale)
        finally:
            self._replay_lock.release()

    # ---- the share group's replicas ----------------------------------------------------------

    def _share(self) -> ReplicaPool:
        if self.share_pool is None:
            raise PoolError("the supervisor is not running")
        return self.share_pool

    def share_action(self, action: str, name: str | None = None) -> ReplicaInfo:
        """start (name None), kill, stop or restart a share replica."""
        pool = self._share()
        return pool.start() if name is None else getattr(pool, action)(name)

    def share_scale(self, n: int) -> dict[str, list[str]]:
        return self._share().scale(n)

    def set_options(self, protocol: str | None, assignor: str | None,
                    exactly_once: bool | None, static: bool | None = None,
                    commit: str | None = None) -> ReplicaOptions:
        return self._pool().set_options(protocol, assignor, exactly_once, static, commit)

    def set_capacity(self, max_rate: float | None) -> tuple[ReplicaOptions, list[str]]:
        return self._pool().set_capacity(max_rate)

    # ---- fleet and topic -------------------------------------------------------------------

    def _fleet(self) -> Any:
        if self.fleet is None:
            raise PoolError("the fleet simulator is not enabled in this supervisor "
                            "(started with --no-fleet)")
        return self.fleet

    def fleet_start(self) -> FleetState:
        fleet = self._fleet()
        if fleet.running:
            raise PoolError("the fleet simulator is already running")
        try:
            fleet.start()
        except Exception as exc:
            raise DependencyError(f"could not start the fleet simulator: {exc}") from None
        return self._fleet_state()

    def fleet_stop(self) -> FleetState:
        fleet = self._fleet()
        if not fleet.running:
            raise PoolError("the fleet simulator is not running")
        fleet.stop()
        return self._fleet_state()

    def set_rate(self, rate: float) -> FleetState:
        self._fleet().set_rate(rate)
        return self._fleet_state()

    def set_streams(self, streams: int) -> FleetState:
        try:
            self._fleet().set_streams(streams)
        except ValueError as exc:
            raise PoolError(str(exc)) from None
        return self._fleet_state()

    def stream_ids(self) -> list[str]:
        count = self.fleet.stats().streams if self.fleet is not None else self.config.streams
        return simulator.stream_ids(count)

    def add_partitions(self, partitions: int) -> PartitionChange:
        with self._topic_lock:
            before = self._current_partitions()
            if partitions < before:
                raise PoolError(f"topic {self.config.topic} has {before} partitions; Kafka can "
                                f"add partitions but never remove them")
            try:
                topics.add_partitions(self.config.settings, self.config.topic, partitions)
                # keep the summaries changelog co-partitioned with the input
                topics.add_partitions(self.config.settings, summaries_topic(self.config.group),
                                      partitions)
            except TopicError as exc:
                raise DependencyError(str(exc)) from None
            self._partitions = partitions
        streams = self.stream_ids()
        moved = []
        for sid in streams:
            old, new = partition_for(sid, before), partition_for(sid, partitions)
            if old != new:
                moved.append(MovedStream(stream=sid, was=old, now=new))
        return PartitionChange(topic=self.config.topic, before=before, after=partitions,
                               moved=tuple(moved), streams_checked=len(streams))

    def _current_partitions(self) -> int:
        assert self._reader is not None
        try:
            metas, _errors = self._reader.topics([self.config.topic])
            meta = metas.get(self.config.topic)
            if meta is None or not meta.count:
                raise DependencyError(f"topic {self.config.topic} is not available")
            return meta.count
        except DependencyError:
            raise
        except Exception as exc:
            raise DependencyError(f"cannot read topic {self.config.topic}: "
                                  f"{one_line(exc)}") from None


def _with_member(r: ReplicaInfo, member: bool, partitions: tuple[int, ...]) -> ReplicaInfo:
    return r.model_copy(update={"member": member, "partitions": tuple(partitions)})

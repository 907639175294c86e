"""Prometheus metrics of every consumer group, built from the overview at scrape time.

A custom collector rather than Gauge objects: each scrape turns `watcher.latest()` into
metric families, so a group that vanishes from the cluster vanishes from /metrics with no
per-group series to remember and leak. The rebalance counters are the memory's recorder's
(`backend/history/recorder.py`): counted when each episode ends, by cause, and continued from
the store after a restart, so Prometheus never sees them reset. The only state kept here is
the collection-error counter.

Labels follow what people already graph for consumer lag (kafka_exporter, Burrow's
exporters): `cluster`, `group`, `topic`, `partition`. Cardinality is bounded: at most
`max_groups` groups are exported (the first by name, so the exported set does not churn
between scrapes) and the dropped ones are counted; per-partition series only on request.

Lag is the overview rows' (`OverviewModel.update`), the Groups and Live pages' own: log end
minus committed offset, except a share group's partition whose broker reports its lag
(KIP-1226, read with its share-partition start offsets): that reported lag, the records not
yet acknowledged, is exported as is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from confluent_kafka import ConsumerGroupState
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
    StateSetMetricFamily,
)
from prometheus_client.registry import Collector

from backend.contracts.history import CAUSES
from backend.contracts.overview import (
    HEALTH_MEANING,
    HEALTH_WORST_FIRST,
    GroupRow,
    Overview,
    PartitionLag,
    oldest_age,
)
from backend.exporter.options import DEFAULT_MAX_GROUPS
from backend.history.recorder import MEMBERSHIP, REBALANCES, UNOWNED
from backend.history.store import CounterKey
from backend.kafka.groups import state_name
from backend.observer.overview_model import REBALANCING

PREFIX = "groupscope_"
# every state Kafka names for a group, classic and consumer protocol, so the state set is the
# same list for every group and a graph of one state is a stable series
GROUP_STATES: tuple[str, ...] = tuple(sorted(
    {state_name(s) for s in ConsumerGroupState} | REBALANCING))

CLUSTER = ("cluster",)
BROKER = ("cluster", "broker")
GROUP = ("cluster", "group")
GROUP_CAUSE = ("cluster", "group", "cause")
GROUP_CHANGE = ("cluster", "group", "change")
GROUP_TOPIC = ("cluster", "group", "topic")
GROUP_PARTITION = ("cluster", "group", "topic", "partition")
TOPIC_PARTITION = ("cluster", "topic", "partition")

_HEALTH_DOC = "; ".join(f"{h} = {HEALTH_MEANING[h]}" for h in HEALTH_WORST_FIRST)
_CAUSES_DOC = ", ".join(CAUSES)

GAUGE, COUNTER, STATE_SET, INFO = (GaugeMetricFamily, CounterMetricFamily,
                                   StateSetMetricFamily, InfoMetricFamily)

# Every family the exporter may show, by name (after PREFIX): its type, labels and help, in
# one list apart from the code that fills the families at each scrape, so that what /metrics
# offers reads in one place (and `describe` tells prometheus_client, for `name[]` scrapes).
FAMILIES: dict[str, tuple[type[Metric], tuple[str, ...], str]] = {
    # per group
    "group_lag_messages": (GAUGE, GROUP_TOPIC,
        "Messages the group has not consumed yet on a topic: the sum over its partitions "
        "of log end offset minus committed offset (from the log start when nothing is "
        "committed); a share group's partition counts the lag its broker reports (records "
        "not yet acknowledged) when it reports one, else from its share-partition start "
        "offset."),
    "group_max_lag_seconds": (GAUGE, GROUP_TOPIC,
        "Age of the oldest record the group has not consumed yet on a topic, from the "
        "broker's record timestamps; absent until it has been read."),
    "group_members": (GAUGE, GROUP, "Members of the group (consumers that joined it)."),
    "group_health": (STATE_SET, GROUP,
        f"The group's health, its worst partition's: {_HEALTH_DOC}."),
    "group_state": (STATE_SET, GROUP,
        "The group's state as Kafka names it (Stable, Empty, PreparingRebalance, ...)."),
    "group": (INFO, GROUP, "The group's type (classic, consumer, share or streams) and assignor."),
    "group_rebalances": (COUNTER, GROUP_CAUSE,
        "Rebalances of the group, one per episode (entering a rebalancing state, or a "
        "change of members, assignment or epoch between two descriptions), counted when it "
        f"ended, by its main cause: {_CAUSES_DOC}. Continues from the memory across "
        "restarts."),
    "group_membership_changes": (COUNTER, GROUP_CHANGE,
        "Members that came or went in the group's rebalances, by change: joined, left (it "
        "left the group itself), expired (its commits stopped with records waiting and the "
        "group noticed one session later), departed (left or expired, nothing told which), "
        "rejoined (a static member back within its session). Continues across restarts."),
    "group_rebalancing": (GAUGE, GROUP,
        "1 while the group is rebalancing (a rebalance began and has not ended), else 0."),
    "group_unowned_partition_seconds": (COUNTER, GROUP,
        "Partition-seconds the group's partitions spent without an owner during its "
        "rebalances: a rebalance leaving 6 partitions unowned for 2 s adds 12. Continues "
        "across restarts."),
    "group_generation": (GAUGE, GROUP,
        "The group's generation (classic protocol) or group epoch (consumer protocol), "
        "when the broker lets us read it."),
    "group_lag_rate_messages_per_second": (GAUGE, GROUP,
        "How fast the group's total lag changes, msg/s, the slope over about the last "
        "minute: above 0 it falls behind, below 0 it catches up."),
    "group_catch_up_seconds": (GAUGE, GROUP,
        "Seconds until the group's lag reaches zero at the current rate; 0 with no lag, "
        "absent when the lag is not shrinking."),
    # per partition (opt-in)
    "partition_committed_offset": (GAUGE, GROUP_PARTITION,
        "The group's committed offset on a partition; absent when it has committed none."),
    "partition_lag_messages": (GAUGE, GROUP_PARTITION,
        "Messages the group has not consumed yet on a partition (a share group's: the "
        "lag its broker reports, when it reports one)."),
    "partition_lag_seconds": (GAUGE, GROUP_PARTITION,
        "Age of the oldest record the group has not consumed yet on a partition; absent "
        "until it has been read."),
    "partition_end_offset": (GAUGE, TOPIC_PARTITION,
        "A partition's log end offset (the next offset to be written), for every "
        "partition an exported group reads."),
    # the exporter's own
    "exporter_cluster_up": (GAUGE, CLUSTER,
        "1 when the last cycle could list the cluster's groups, 0 when it could not (or "
        "before the first cycle)."),
    "exporter_groups_listed": (GAUGE, CLUSTER, "Groups the last listing of the cluster returned."),
    "exporter_groups_described": (GAUGE, CLUSTER,
        "Groups whose description and offsets have been read at least once."),
    "exporter_collection_errors": (COUNTER, CLUSTER,
        "Collection errors since the exporter started: failed listings, failed batches "
        "and groups that could not be described."),
    "exporter_dropped_groups": (COUNTER, CLUSTER,
        "Groups left out of scrapes by the --max-groups cap, summed over scrapes; "
        "rising means some groups have no series: raise the cap."),
    "exporter_cycle_duration_seconds": (GAUGE, CLUSTER,
        "How long the last complete refresh cycle of every group took."),
    "exporter_cycle_requests": (GAUGE, CLUSTER,
        "Admin API requests the last complete cycle issued (list, describe batches, offset "
        "fetches, log offsets, metadata)."),
    "exporter_last_success_timestamp_seconds": (GAUGE, CLUSTER,
        "Unix time the last complete cycle (the listing worked, every batch was tried) "
        "ended; alert on time() minus this."),
    # brokers
    "broker_up": (GAUGE, BROKER,
        "1 when the broker is in the cluster's metadata, 0 when partitions still name it "
        "as a replica but it is not (down). From metadata cached up to 30 s."),
    "broker_leader_partitions": (GAUGE, BROKER, "Partitions (every topic) the broker leads."),
    "under_replicated_partitions": (GAUGE, CLUSTER,
        "Partitions (every topic) whose in-sync replicas are fewer than their replicas."),
    "offline_partitions": (GAUGE, CLUSTER, "Partitions (every topic) without a leader."),
}

F = TypeVar("F", GaugeMetricFamily, CounterMetricFamily, StateSetMetricFamily,
            InfoMetricFamily)


def _family(kind: type[F], name: str) -> F:
    """The family `name` of FAMILIES, empty, for one scrape (a collector builds its families
    afresh at each scrape, see the module's docstring)."""
    listed, labels, doc = FAMILIES[name]
    assert listed is kind, f"{name} is a {listed.__name__} in FAMILIES"
    return kind(f"{PREFIX}{name}", doc, labels=labels)


class ErrorCounter:
    """Collection errors, a monotonic count from the overview's cycles.

    A completed cycle reports its errors (failed batches, groups that could not be
    described) in `CycleStats`, kept in the overview's history; a cycle whose listing failed
    publishes an overview with `error` set and no stats. Each cycle is counted once, by its
    start time or the failed overview's time.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0
        self._last_cycle_ms = -1
        self._last_failure_ms = -1

    def observe(self, overview: Overview) -> None:
        with self._lock:
            for cycle in overview.history:
                if cycle.started_ms > self._last_cycle_ms:
                    self.total += cycle.errors
                    self._last_cycle_ms = cycle.started_ms
            if overview.error is not None and overview.taken_ms > self._last_failure_ms:
                self.total += 1
                self._last_failure_ms = overview.taken_ms


class OverviewCollector(Collector):
    """Every group's metrics from the latest overview, computed when Prometheus scrapes.

    `latest` is the watcher's `latest` (anything returning the newest Overview or None);
    register `observe` as a watcher listener as well, so the counters see every cycle even
    when scrapes are rarer than cycles.
    """

    def __init__(self, latest: Callable[[], Overview | None], per_partition: bool = False,
                 max_groups: int = DEFAULT_MAX_GROUPS, cluster: str | None = None,
                 counters: Callable[[], Mapping[CounterKey, float]] = dict) -> None:
        self.latest = latest
        self.per_partition = per_partition
        self.max_groups = max_groups
        self.cluster = cluster
        self.counters = counters  # the recorder's: rebalances, membership, unowned time
        self.errors = ErrorCounter()
        self._dropped_lock = threading.Lock()
        self._dropped_total = 0

    def describe(self) -> Iterator[Metric]:
        """Every family this collector may fill, empty: prometheus_client's registry maps
        the names of a `name[]` scrape to collectors with it (else it calls `collect`
        once, at registration, when no overview exists yet)."""
        for name, (kind, labels, doc) in FAMILIES.items():
            if self.per_partition or not name.startswith("partition_"):
                yield kind(f"{PREFIX}{name}", doc, labels=labels)

    def observe(self, overview: Overview) -> None:
        """A watcher listener: count this cycle's errors."""
        self.errors.observe(overview)

    def collect(self) -> Iterator[Metric]:
        """Every family from the newest overview (what `name[]` scrapes and tests read; a
        full scrape serves the per-group part rendered once per cycle, see exposition.py)."""
        overview = self.latest()
        families, dropped = self.per_group(overview)
        yield from families
        yield from self.own(overview, dropped)

    def per_group(self, overview: Overview | None) -> tuple[list[Metric], int]:
        """The families with a series per group (per partition too, when asked), and how
        many groups the `max_groups` cap left out of them."""
        cluster = overview.cluster if overview is not None else (self.cluster or "")
        rows = [r for r in overview.rows if not r.pending] if overview is not None else []
        kept, dropped = rows[:self.max_groups], len(rows) - min(len(rows), self.max_groups)
        families = list(self._group_families(cluster, kept))
        if self.per_partition:
            families.extend(self._partition_families(cluster, kept))
        return families, dropped

    def own(self, overview: Overview | None, dropped: int) -> Iterator[Metric]:
        """The exporter's own families and the brokers', from `overview` (the newest), with
        `dropped` (the served groups' cap) added to the dropped-groups count: a few series,
        built afresh at every scrape."""
        if overview is not None:
            self.observe(overview)
        cluster = overview.cluster if overview is not None else (self.cluster or "")
        with self._dropped_lock:
            self._dropped_total += dropped
            dropped_total = self._dropped_total
        yield from self._own_families(cluster, overview, dropped_total)
        if overview is not None and overview.brokers:
            yield from self._broker_families(cluster, overview)

    # ---- brokers -------------------------------------------------------------------------

    def _broker_families(self, cluster: str, overview: Overview) -> Iterator[Metric]:
        """Kafka's side, from the overview's cached metadata: a down broker is one its
        partitions still name as a replica while the cluster no longer lists it."""
        up = _family(GaugeMetricFamily, "broker_up")
        leaders = _family(GaugeMetricFamily, "broker_leader_partitions")
        for b in overview.brokers:
            labels = [cluster, str(b.broker_id)]
            up.add_metric(labels, 1 if b.up else 0)
            leaders.add_metric(labels, b.leaders)
        under = _family(GaugeMetricFamily, "under_replicated_partitions")
        under.add_metric([cluster], overview.under_replicated)
        offline = _family(GaugeMetricFamily, "offline_partitions")
        offline.add_metric([cluster], overview.offline_partitions)
        yield from (up, leaders, under, offline)

    # ---- per group ---------------------------------------------------------------------

    def _group_families(self, cluster: str, rows: list[GroupRow]) -> Iterator[Metric]:
        lag = _family(GaugeMetricFamily, "group_lag_messages")
        lag_s = _family(GaugeMetricFamily, "group_max_lag_seconds")
        members = _family(GaugeMetricFamily, "group_members")
        health = _family(StateSetMetricFamily, "group_health")
        state = _family(StateSetMetricFamily, "group_state")
        info = _family(InfoMetricFamily, "group")
        rebalances = _family(CounterMetricFamily, "group_rebalances")
        changes = _family(CounterMetricFamily, "group_membership_changes")
        rebalancing = _family(GaugeMetricFamily, "group_rebalancing")
        unowned = _family(CounterMetricFamily, "group_unowned_partition_seconds")
        counted: dict[str, list[tuple[CounterKey, float]]] = {}
        for key, value in self.counters().items():
            counted.setdefault(key.group, []).append((key, value))
        generation = _family(GaugeMetricFamily, "group_generation")
        rate = _family(GaugeMetricFamily, "group_lag_rate_messages_per_second")
        catch_up = _family(GaugeMetricFamily, "group_catch_up_seconds")
        for row in rows:
            g = [cluster, row.group]
            health.add_metric(g, {h: h == row.health for h in HEALTH_WORST_FIRST})
            if row.error is not None:  # not described: its other values would be guesses
                continue
            members.add_metric(g, row.members)
            states = GROUP_STATES if row.state in GROUP_STATES else (*GROUP_STATES, row.state)
            state.add_metric(g, {s: s == row.state for s in states})
            info.add_metric(g, {"protocol": row.protocol, "assignor": row.assignor or ""})
            rebalancing.add_metric(g, 1 if row.rebalancing else 0)
            mine = sorted(counted.get(row.group, ()), key=lambda kv: kv[0].label)
            for key, value in mine:
                if key.name == REBALANCES:
                    rebalances.add_metric([*g, key.label], value)
                elif key.name == MEMBERSHIP:
                    changes.add_metric([*g, key.label], value)
            # present from the first scrape (0), so rate() has a baseline
            unowned.add_metric(g, sum(v for k, v in mine if k.name == UNOWNED))
            if row.generation is not None:
                generation.add_metric(g, row.generation)
            if row.lag_rate is not None:
                rate.add_metric(g, row.lag_rate)
            if row.catch_up_seconds is not None:
                catch_up.add_metric(g, row.catch_up_seconds)
            for topic, (messages, seconds) in _per_topic(row).items():
                lag.add_metric([*g, topic], messages)
                if seconds is not None:
                    lag_s.add_metric([*g, topic], seconds)
        yield from (lag, lag_s, members, health, state, info, rebalances, changes, rebalancing,
                    unowned, generation, rate, catch_up)

    # ---- per partition (opt-in) --------------------------------------------------------

    def _partition_families(self, cluster: str, rows: list[GroupRow]) -> Iterator[Metric]:
        committed = _family(GaugeMetricFamily, "partition_committed_offset")
        lag = _family(GaugeMetricFamily, "partition_lag_messages")
        lag_s = _family(GaugeMetricFamily, "partition_lag_seconds")
        end = _family(GaugeMetricFamily, "partition_end_offset")
        ends: dict[tuple[str, int], int] = {}
        for row in rows:
            for p in row.partitions:
                labels = [cluster, row.group, p.topic, str(p.partition)]
                if p.committed is not None:
                    committed.add_metric(labels, p.committed)
                lag.add_metric(labels, p.lag_messages)
                seconds = p.lag_seconds(row.described_ms or 0)
                if seconds is not None:
                    lag_s.add_metric(labels, seconds)
                key = (p.topic, p.partition)
                ends[key] = max(ends.get(key, p.end), p.end)  # groups read at other times
        for (topic, partition), offset in sorted(ends.items()):
            end.add_metric([cluster, topic, str(partition)], offset)
        yield from (committed, end, lag, lag_s)

    # ---- the exporter's own ------------------------------------------------------------

    def _own_families(self, cluster: str, overview: Overview | None,
                      dropped_total: int) -> Iterator[Metric]:
        c = [cluster]
        up = _family(GaugeMetricFamily, "exporter_cluster_up")
        up.add_metric(c, 1 if overview is not None and overview.error is None
                      and overview.cycle is not None else 0)
        yield up
        listed = _family(GaugeMetricFamily, "exporter_groups_listed")
        described = _family(GaugeMetricFamily, "exporter_groups_described")
        listed.add_metric(c, overview.listed if overview else 0)
        described.add_metric(c, overview.described if overview else 0)
        yield from (listed, described)
        errors = _family(CounterMetricFamily, "exporter_collection_errors")
        errors.add_metric(c, self.errors.total)
        dropped = _family(CounterMetricFamily, "exporter_dropped_groups")
        dropped.add_metric(c, dropped_total)
        yield from (errors, dropped)
        cycle = overview.cycle if overview is not None else None
        if cycle is None:
            return
        duration = _family(GaugeMetricFamily, "exporter_cycle_duration_seconds")
        duration.add_metric(c, cycle.seconds)
        requests = _family(GaugeMetricFamily, "exporter_cycle_requests")
        requests.add_metric(c, cycle.requests)
        success = _family(GaugeMetricFamily, "exporter_last_success_timestamp_seconds")
        success.add_metric(c, cycle.started_ms / 1000.0 + cycle.seconds)
        yield from (duration, requests, success)


def _per_topic(row: GroupRow) -> dict[str, tuple[int, float | None]]:
    """topic -> (lag in messages summed, oldest unconsumed record's age or None)."""
    by_topic: dict[str, list[PartitionLag]] = {}
    for p in row.partitions:
        by_topic.setdefault(p.topic, []).append(p)
    return {topic: (sum(p.lag_messages for p in parts), oldest_age(parts, row.described_ms or 0))
            for topic, parts in by_topic.items()}


"""The exporter's collector from synthetic overviews: no broker, no HTTP, fast.

Everything goes through prometheus_client: the collector's families are rendered with
`generate_latest` and read back with the text parser, as Prometheus would see them.
"""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from backend.contracts.overview import ERR, HEALTH_WORST_FIRST, STALL, CycleStats, GroupRow
from backend.exporter.metrics import GROUP_STATES, OverviewCollector
from backend.history.store import CounterKey
from tests.exporter.synthetic import CLUSTER, Latest, overview, part, row


def scrape(collector: OverviewCollector) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value, parsed from the text exposition."""
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples, name: str, **labels) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def names(samples) -> set[str]:
    return {name for name, _ in samples}


def test_group_series_lag_per_topic_health_state_and_members():
    billing = row("billing", members=3, generation=7, lag_rate=-5.0, catch_up_seconds=12.0,
                  health=STALL, partitions=(
                      part("orders", 0, 10, 25, lag_s=4.0, health=STALL),
                      part("orders", 1, 30, 30, lag_s=0.0),
                      part("refunds", 0, None, 8)))
    samples = scrape(OverviewCollector(Latest(overview(billing))))
    g = {"cluster": CLUSTER, "group": "billing"}
    assert value(samples, "groupscope_group_lag_messages", **g, topic="orders") == 15
    assert value(samples, "groupscope_group_lag_messages", **g, topic="refunds") == 8
    assert value(samples, "groupscope_group_max_lag_seconds", **g, topic="orders") == 4.0
    # no record time read for refunds yet: no series rather than a made-up 0
    assert value(samples, "groupscope_group_max_lag_seconds", **g, topic="refunds") is None
    assert value(samples, "groupscope_group_members", **g) == 3
    assert value(samples, "groupscope_group_generation", **g) == 7
    assert value(samples, "groupscope_group_lag_rate_messages_per_second", **g) == -5.0
    assert value(samples, "groupscope_group_catch_up_seconds", **g) == 12.0
    health = {h: value(samples, "groupscope_group_health", **g, groupscope_group_health=h)
              for h in HEALTH_WORST_FIRST}
    assert health == {h: float(h == STALL) for h in HEALTH_WORST_FIRST}
    state = {s: value(samples, "groupscope_group_state", **g, groupscope_group_state=s)
             for s in GROUP_STATES}
    assert state == {s: float(s == "Stable") for s in GROUP_STATES}
    assert value(samples, "groupscope_group_info", **g, protocol="classic",
                 assignor="range") == 1
    # per partition only when asked for
    assert not any(n.startswith("groupscope_partition_") for n in names(samples))


def test_unknown_values_and_pending_rows_make_no_series():
    pending = GroupRow(group="new", state="Empty", protocol="classic")
    bare = row("bare", members=0, partitions=(part("t", 0, 5, 5),))
    samples = scrape(OverviewCollector(Latest(overview(pending, bare))))
    groups = {dict(labels).get("group") for _, labels in samples}
    assert "new" not in groups  # not described yet: nothing to say about it
    g = {"cluster": CLUSTER, "group": "bare"}
    assert value(samples, "groupscope_group_members", **g) == 0
    for absent in ("groupscope_group_generation", "groupscope_group_lag_rate_messages_per_second",
                   "groupscope_group_catch_up_seconds"):
        assert value(samples, absent, **g) is None
    assert value(samples, "groupscope_exporter_groups_listed", cluster=CLUSTER) == 2
    assert value(samples, "groupscope_exporter_groups_described", cluster=CLUSTER) == 1


def test_a_state_outside_the_list_is_still_shown():
    samples = scrape(OverviewCollector(Latest(overview(row("g", state="NotReady")))))
    g = {"cluster": CLUSTER, "group": "g"}
    assert value(samples, "groupscope_group_state", **g, groupscope_group_state="NotReady") == 1
    assert value(samples, "groupscope_group_state", **g, groupscope_group_state="Stable") == 0


def test_err_group_is_health_err_without_lag_members_or_state():
    bad = row("locked", health=ERR, error="GROUP_AUTHORIZATION_FAILED", members=0,
              state="Empty")
    samples = scrape(OverviewCollector(Latest(overview(bad))))
    g = {"cluster": CLUSTER, "group": "locked"}
    assert value(samples, "groupscope_group_health", **g, groupscope_group_health=ERR) == 1
    assert value(samples, "groupscope_group_health", **g, groupscope_group_health="OK") == 0
    for unknown in ("groupscope_group_lag_messages", "groupscope_group_members",
                    "groupscope_group_state"):  # guesses would read as facts (0 members)
        assert not [k for k in samples if k[0] == unknown], unknown


def test_per_partition_series_and_end_offsets_shared_by_groups():
    a = row("a", partitions=(part("t", 0, 3, 10, lag_s=2.5), part("t", 1, None, 4)))
    b = row("b", partitions=(part("t", 0, 9, 12),))
    samples = scrape(OverviewCollector(Latest(overview(a, b)), per_partition=True))
    pa = {"cluster": CLUSTER, "group": "a", "topic": "t"}
    assert value(samples, "groupscope_partition_committed_offset", **pa, partition="0") == 3
    assert value(samples, "groupscope_partition_committed_offset", **pa, partition="1") is None
    assert value(samples, "groupscope_partition_lag_messages", **pa, partition="0") == 7
    assert value(samples, "groupscope_partition_lag_messages", **pa, partition="1") == 4
    assert value(samples, "groupscope_partition_lag_seconds", **pa, partition="0") == 2.5
    assert value(samples, "groupscope_partition_lag_seconds", **pa, partition="1") is None
    # one end offset series per partition, whichever groups read it (the newest reading)
    ends = {k: v for k, v in samples.items() if k[0] == "groupscope_partition_end_offset"}
    assert ends == {
        ("groupscope_partition_end_offset",
         (("cluster", CLUSTER), ("partition", "0"), ("topic", "t"))): 12,
        ("groupscope_partition_end_offset",
         (("cluster", CLUSTER), ("partition", "1"), ("topic", "t"))): 4,
    }


def test_max_groups_caps_series_and_counts_the_dropped():
    rows = [row(f"g{i:02d}", partitions=(part("t", 0, 0, i),)) for i in range(5)]
    collector = OverviewCollector(Latest(overview(*rows)), max_groups=2)
    samples = scrape(collector)
    exported = {dict(labels)["group"] for name, labels in samples
                if name == "groupscope_group_members"}
    assert exported == {"g00", "g01"}  # the first by name: the set does not churn
    assert value(samples, "groupscope_exporter_dropped_groups_total", cluster=CLUSTER) == 3
    samples = scrape(collector)
    assert value(samples, "groupscope_exporter_dropped_groups_total", cluster=CLUSTER) == 6


def test_rebalance_counters_are_the_recorders_by_cause_and_change():
    counts: dict[CounterKey, float] = {
        CounterKey("g", "rebalances", "expired"): 2, CounterKey("g", "rebalances", "joined"): 1,
        CounterKey("g", "membership_changes", "expired"): 2,
        CounterKey("g", "unowned_partition_seconds", ""): 7.5,
        CounterKey("gone", "rebalances", "left"): 4}
    latest = Latest(overview(row("g", rebalancing=True), row("quiet")))
    samples = scrape(OverviewCollector(latest, counters=lambda: counts))
    g = {"cluster": CLUSTER, "group": "g"}
    assert value(samples, "groupscope_group_rebalances_total", cause="expired", **g) == 2
    assert value(samples, "groupscope_group_rebalances_total", cause="joined", **g) == 1
    assert value(samples, "groupscope_group_membership_changes_total", change="expired",
                 **g) == 2
    assert value(samples, "groupscope_group_unowned_partition_seconds_total", **g) == 7.5
    assert value(samples, "groupscope_group_rebalancing", **g) == 1
    quiet = {"cluster": CLUSTER, "group": "quiet"}
    assert value(samples, "groupscope_group_rebalancing", **quiet) == 0
    assert value(samples, "groupscope_group_unowned_partition_seconds_total", **quiet) == 0
    # a group the cluster no longer lists has no series, whatever the memory counted
    assert "gone" not in {dict(labels).get("group") for _, labels in samples}


def test_group_that_vanishes_leaves_no_series():
    latest = Latest(overview(row("gone", rebalances_last_hour=1, last_rebalance_ms=5),
                             row("stays")))
    collector = OverviewCollector(latest)
    scrape(collector)
    latest.ov = overview(row("stays"), taken_ms=20_000)
    samples = scrape(collector)
    assert "gone" not in {dict(labels).get("group") for _, labels in samples}


def test_own_metrics_cycle_errors_and_last_success():
    c1 = CycleStats(started_ms=1_000, seconds=0.5, requests=7, groups_refreshed=3, errors=1)
    c2 = CycleStats(started_ms=11_000, seconds=1.25, requests=9, groups_refreshed=3, errors=2)
    latest = Latest(overview(row("g"), cycles=(c1,), taken_ms=2_000))
    collector = OverviewCollector(latest)
    c = {"cluster": CLUSTER}
    samples = scrape(collector)
    assert value(samples, "groupscope_exporter_cycle_duration_seconds", **c) == 0.5
    assert value(samples, "groupscope_exporter_cycle_requests", **c) == 7
    assert value(samples, "groupscope_exporter_collection_errors_total", **c) == 1
    assert value(samples, "groupscope_exporter_last_success_timestamp_seconds", **c) == 1.5
    assert value(samples, "groupscope_exporter_cluster_up", **c) == 1
    # scraped twice: the cycle's errors are not counted again
    latest.ov = overview(row("g"), cycles=(c1, c2), taken_ms=13_000)
    collector.observe(latest.ov)
    samples = scrape(collector)
    assert value(samples, "groupscope_exporter_collection_errors_total", **c) == 3
    assert value(samples, "groupscope_exporter_last_success_timestamp_seconds", **c) == 12.25
    # the listing fails: one more error, the cluster is down, last success stays
    latest.ov = overview(row("g"), cycles=(c1, c2), taken_ms=20_000, error="unreachable")
    samples = scrape(collector)
    samples = scrape(collector)
    assert value(samples, "groupscope_exporter_collection_errors_total", **c) == 4
    assert value(samples, "groupscope_exporter_cluster_up", **c) == 0
    assert value(samples, "groupscope_exporter_last_success_timestamp_seconds", **c) == 12.25


def test_before_the_first_overview_only_the_exporters_own_series():
    samples = scrape(OverviewCollector(Latest(None), cluster=CLUSTER))
    assert value(samples, "groupscope_exporter_cluster_up", cluster=CLUSTER) == 0
    assert not any(n.startswith("groupscope_group") for n in names(samples))


@pytest.mark.parametrize("per_partition", [False, True])
def test_every_family_has_help(per_partition):
    rows = (row("g", generation=1, lag_rate=1.0, catch_up_seconds=None,
                partitions=(part("t", 0, 1, 2, lag_s=1.0),)),)
    c = CycleStats(started_ms=0, seconds=1.0, requests=1, groups_refreshed=1, errors=0)
    collector = OverviewCollector(Latest(overview(*rows, cycles=(c,))),
                                  per_partition=per_partition)
    for family in collector.collect():
        assert family.name.startswith("groupscope_")
        assert len(family.documentation) > 20, family.name


def test_broker_up_leaders_and_under_replicated_offline_partitions():
    from dataclasses import replace

    from backend.contracts import BrokerView

    brokers = (BrokerView(1, "h:1", True, leaders=4), BrokerView(2, None, False, replicas=6,
                                                                 out_of_sync=6),
               BrokerView(3, "h:3", True, leaders=2))
    ov = replace(overview(row("g")), brokers=brokers, under_replicated=6, offline_partitions=0)
    samples = scrape(OverviewCollector(Latest(ov)))
    assert [value(samples, "groupscope_broker_up", cluster=CLUSTER, broker=b)
            for b in ("1", "2", "3")] == [1, 0, 1]
    assert value(samples, "groupscope_broker_leader_partitions", cluster=CLUSTER,
                 broker="1") == 4
    assert value(samples, "groupscope_under_replicated_partitions", cluster=CLUSTER) == 6
    assert value(samples, "groupscope_offline_partitions", cluster=CLUSTER) == 0
    # no metadata read yet (or the cluster unreadable): no broker series at all
    assert not any(n.startswith("groupscope_broker") for n in names(scrape(
        OverviewCollector(Latest(overview(row("g")))))))


def test_a_share_groups_series_carry_the_lag_its_broker_reports():
    from backend.kafka.groups import GroupDescription, GroupMember
    from backend.observer.overview_collect import GroupReading
    from backend.observer.overview_model import OverviewModel

    # the row as the overview folds a share group's reading: start offsets 40 and 70, the
    # broker reporting 25 records not yet acknowledged on partition 0 and nothing on 1
    sharers = tuple(GroupMember(m, m, "h", (("orders", 0), ("orders", 1))) for m in "ab")
    reading = GroupReading("queue", 1_000, GroupDescription("queue", "Stable", "share",
                                                            "simple", sharers),
                           {("orders", 0): 40, ("orders", 1): 70},
                           reported_lag={("orders", 0): 25})
    share = OverviewModel().update(reading, {("orders", 0): 100, ("orders", 1): 100}, {},
                                   own=False)
    samples = scrape(OverviewCollector(Latest(overview(share)), per_partition=True))
    g = {"cluster": CLUSTER, "group": "queue", "topic": "orders"}
    assert value(samples, "groupscope_partition_lag_messages", **g, partition="0") == 25
    assert value(samples, "groupscope_partition_lag_messages", **g, partition="1") == 30
    assert value(samples, "groupscope_partition_committed_offset", **g, partition="0") == 40
    assert value(samples, "groupscope_group_lag_messages", **g) == 55


@pytest.mark.parametrize("asked", ["groupscope_group_members",
                                   "groupscope_group_rebalances_total",
                                   "groupscope_broker_up"])
def test_a_scrape_for_chosen_names_finds_them(asked):
    """`/metrics?name[]=…`: prometheus_client maps names to collectors by `describe`."""
    from dataclasses import replace

    from backend.contracts import BrokerView

    ov = replace(overview(row("g")), brokers=(BrokerView(1, "h:1", True, leaders=1),))
    registry = CollectorRegistry()
    registry.register(OverviewCollector(Latest(ov),
                                        counters=lambda: {CounterKey("g", "rebalances",
                                                                     "joined"): 1}))
    text = generate_latest(registry.restricted_registry([asked])).decode()
    got = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    assert got == {asked}

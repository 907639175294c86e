"""The overview watcher against the real broker: hundreds of groups, live ones of both
protocols, lag, health, rebalances and the order rows fill in."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from backend.contracts.overview import Overview
from backend.netutil import wait_until
from backend.observer.overview import OverviewWatcher
from tests.observer.conftest import create_topic
from tests.observer.seed import seed_groups

SEEDED = 300
PARTITIONS = 4
PER_PARTITION = 50  # records produced into each partition before the groups commit


def fill(kafka, topic: str) -> None:
    producer = Producer(kafka.client_config())
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(topic, value=b"%d" % i, partition=p)
    assert producer.flush(30) == 0


@pytest.mark.timeout(240)
def test_hundreds_of_groups_fill_in_and_live_groups_of_both_protocols_are_described(
        kafka, unique, members_factory, producer_factory):
    topic, live_topic = f"ov-{unique}", f"ov-live-{unique}"
    create_topic(kafka, topic, PARTITIONS)
    create_topic(kafka, live_topic, 2)
    fill(kafka, topic)
    # seeded groups: every tenth caught up, the others committed i % 40 into each partition
    prefix = f"ov-{unique}-"
    seeded = {f"{prefix}{i:04d}": {(topic, p): PER_PARTITION if i % 10 == 0 else i % 40
                                   for p in range(PARTITIONS)} for i in range(SEEDED)}
    seed_groups(kafka, seeded)
    producer_factory(live_topic, rate=40.0)
    classic, kip848 = f"{prefix}live-classic", f"{prefix}live-consumer"
    members_factory(classic, live_topic, "classic", "cooperative-sticky").start("c1")
    members_factory(kip848, live_topic, "consumer").start("k1")

    watcher = OverviewWatcher(kafka, interval=1.0, batch=50, lag_time_budget_s=1.0)
    # the coordinator lists a freshly committed group a moment after the commit returns
    wait_until(lambda: sum(g.group.startswith(prefix) for g in watcher.collector.list_groups())
               >= SEEDED, timeout=30, interval=0.3, what="every seeded group listed")
    published: list[Overview] = []
    original = watcher._publish

    def spy(error=None):
        ov = original(error)
        published.append(ov)
        return ov

    watcher._publish = spy  # type: ignore[method-assign]
    try:
        watcher.prioritise([f"{prefix}{SEEDED - 1:04d}"])
        first = watcher.refresh_once()
        # names first: the first publication lists every group before any is described
        listing = next(ov for ov in published if ov.listed)
        mine = [r for r in listing.rows if r.group.startswith(prefix)]
        assert len(mine) >= SEEDED and all(r.pending for r in mine)
        # the prioritised row is filled in by the first batch's publication
        after_first_batch = published[published.index(listing) + 1]
        assert not after_first_batch.row(f"{prefix}{SEEDED - 1:04d}").pending
        assert first.described == first.listed and first.cycle is not None
        # many groups per describe and per OffsetFetch (KIP-709), not a request per group;
        # the first cycle also reads the metadata, the cluster and its features
        assert first.cycle.requests <= 5 * -(-first.listed // 50) + 5, first.cycle.requests

        for i in (0, 7, 123):
            row = first.row(f"{prefix}{i:04d}")
            expected = 0 if i % 10 == 0 else PARTITIONS * (PER_PARTITION - i % 40)
            assert row.state == "Empty" and row.members == 0 and row.topics == (topic,)
            assert row.lag_messages == expected, row
            assert not row.own and row.error is None
            assert row.max_lag_seconds is None or row.max_lag_seconds >= 0
        # an Empty group's description is made once, then handed out again while it stays so
        empty = [f"{prefix}{i:04d}" for i in (0, 7)]
        once, again = (watcher.collector.read_groups(empty) for _ in range(2))
        assert [r.description.state for r in again] == ["Empty", "Empty"]
        assert all(a.description is b.description for a, b in zip(once, again, strict=True))

        # lag in seconds from the record timestamps, not a guess: read within each cycle's
        # budget, cached, so every lagging row knows it after a few cycles at most
        def aged():
            ov = watcher.refresh_once()
            rows = [r for r in ov.rows if r.group.startswith(prefix) and r.lag_messages]
            return ov if all(r.max_lag_seconds is not None for r in rows) else None

        aged_ov = wait_until(aged, timeout=90, interval=0.1, what="every lagging row aged")
        assert aged_ov.row(f"{prefix}0000").max_lag_seconds == 0.0  # caught up

        def live_rows():
            ov = watcher.refresh_once()
            rows = [ov.row(classic), ov.row(kip848)]
            ok = all(r is not None and r.state == "Stable" and r.members == 1
                     and r.lag_messages is not None for r in rows)
            return rows if ok else None

        c, k = wait_until(live_rows, timeout=60, interval=0.5, what="both live groups Stable")
        assert c.protocol == "classic" and c.assignor == "cooperative-sticky"
        assert k.protocol == "consumer" and k.assignor in ("uniform", "range")
        assert c.topics == (live_topic,) and k.topics == (live_topic,)

        # a second member joins the classic group: one rebalance episode is counted
        before = c.rebalances_last_hour
        members_factory(classic, live_topic, "classic", "cooperative-sticky").start("c2")

        def rebalanced():
            row = watcher.refresh_once().row(classic)
            return row if row.members == 2 and row.rebalances_last_hour > before else None

        row = wait_until(rebalanced, timeout=60, interval=0.5, what="the join counted")
        assert row.last_rebalance_ms is not None
    finally:
        watcher.stop()


@pytest.mark.timeout(120)
def test_a_stopped_group_with_lag_is_stop_and_an_idle_caught_up_one_is_ok(kafka, unique):
    topic = f"ov-h-{unique}"
    create_topic(kafka, topic, 2)
    fill(kafka, topic)
    lagging, caught_up = f"ov-h-{unique}-lagging", f"ov-h-{unique}-done"
    seed_groups(kafka, {lagging: {(topic, 0): 10, (topic, 1): 10},
                        caught_up: {(topic, 0): PER_PARTITION, (topic, 1): PER_PARTITION}})
    watcher = OverviewWatcher(kafka, interval=1.0)
    try:
        def judged():
            ov = watcher.refresh_once()
            return ov if ov.row(lagging).health == "STOP" else None

        ov = wait_until(judged, timeout=60, interval=0.7, what="the lagging group judged STOP")
        assert ov.row(caught_up).health == "OK" and ov.row(caught_up).lag_messages == 0
        assert ov.row(lagging).lag_rate == pytest.approx(0.0, abs=0.01)
        assert ov.row(lagging).catch_up_seconds is None
    finally:
        watcher.stop()

"""The Groups page's view-model: order, filters and every cell's text, from plain rows."""

from __future__ import annotations

from dataclasses import replace

from backend.contracts.overview import ERR, CycleStats, GroupRow, Overview
from dashboard import groups_model as gm
from dashboard.theme import UNKNOWN_HEALTH_FILL, health_fill

NOW = 1_700_000_000_000


def row(group: str, lag: int | None = 0, health: str = "OK", state: str = "Stable",
        **kw) -> GroupRow:
    """A described row (pending=True for one only listed)."""
    if kw.pop("pending", False):
        return GroupRow(group=group, state=state, protocol=kw.pop("protocol", "classic"))
    return GroupRow(group=group, state=state, protocol=kw.pop("protocol", "classic"),
                    lag_messages=lag, health=health, described_ms=NOW - 1000, **kw)


ROWS = [
    row("orders", 500, "WARN", lag_rate=4.0, members=2),
    row("billing", 10, "OK", lag_rate=-2.0, catch_up_seconds=5.0, members=3),
    row("audit", 0, "OK", state="Empty"),
    row("fraud", 900, "STOP", state="Empty"),
    row("ledger", pending=True),
    replace(row("secret", 7, "OK"), error="Broker: Group authorization failed", health=ERR),
    row("archive", 900, "STALL", members=1),
]


def names(rows) -> list[str]:
    return [r.group for r in rows]


def test_health_sort_puts_err_then_worst_then_more_lag_and_pending_last():
    assert names(gm.visible(ROWS)) == ["secret", "fraud", "archive", "orders", "billing",
                                       "audit", "ledger"]


def test_numeric_sorts_put_rows_without_the_number_last_by_name():
    assert names(gm.visible(ROWS, sort="lag (messages)")) == [
        "archive", "fraud", "orders", "billing", "audit", "ledger", "secret"]
    assert names(gm.visible(ROWS, sort="falling behind fastest"))[:2] == ["orders", "billing"]
    assert names(gm.visible(ROWS, sort="name")) == sorted(names(ROWS))
    # an unknown sort name (a stale session) falls back to the default
    assert gm.visible(ROWS, sort="nonsense") == gm.visible(ROWS)


def test_filters_by_name_state_and_health_keep_empty_groups():
    assert names(gm.visible(ROWS, gm.GroupFilter(name="LEDG"))) == ["ledger"]
    empty = gm.visible(ROWS, gm.GroupFilter(states=frozenset({"Empty"})), sort="name")
    assert names(empty) == ["audit", "fraud"]  # empty groups stay listed
    bad = gm.visible(ROWS, gm.GroupFilter(health=frozenset({"STOP", "STALL", ERR})))
    assert names(bad) == ["secret", "fraud", "archive"]
    # a pending row has no health yet: no health filter keeps it
    assert "ledger" not in names(gm.visible(ROWS, gm.GroupFilter(health=frozenset({"OK"}))))
    both = gm.GroupFilter(name="a", states=frozenset({"Empty"}))
    assert names(gm.visible(ROWS, both, sort="name")) == ["audit", "fraud"]


def test_pending_rows_show_ellipses_not_zeros():
    cells = gm.line(row("ledger", pending=True), NOW)
    assert cells.health == [gm.PENDING]
    for value in (cells.members, cells.topics, cells.lag, cells.lag_seconds,
                  cells.rate, cells.catch_up, cells.rebalances, cells.rebalances_24h,
                  cells.last_cause, cells.last_rebalance):
        assert value == gm.PENDING
    assert cells.trend == [] and cells.state == "Stable" and cells.note == "not described yet"


def test_err_rows_show_their_error_instead_of_stale_numbers():
    cells = gm.line(ROWS[5], NOW)
    assert cells.health == [ERR]
    assert cells.lag == cells.members == cells.rate == cells.catch_up == gm.NONE
    assert cells.note == "Broker: Group authorization failed"


def test_rate_and_catch_up_text():
    assert gm.rate_text(row("a", 10, lag_rate=-12.5)) == "-12.5 msg/s"
    assert gm.rate_text(row("a", 10, lag_rate=1234.0)) == "+1,234.0 msg/s"
    assert gm.rate_text(row("a", 10, lag_rate=0.01)) == "0 msg/s"
    assert gm.rate_text(row("a", 10)) == gm.NONE  # fewer than two points yet
    assert gm.catch_up_text(row("a", 0, lag_rate=-3.0)) == "caught up"
    assert gm.catch_up_text(row("a", 600, lag_rate=-2.0, catch_up_seconds=300.0)) == "5 m 00 s"
    assert gm.catch_up_text(row("a", 600, lag_rate=7.25)) == "falling behind +7.2 msg/s"
    assert gm.catch_up_text(row("a", 600, lag_rate=0.0)) == "steady"  # never: no time to give
    assert gm.catch_up_text(row("a", 4, lag_rate=0.01)) == "steady"  # not "falling behind +0.0"
    assert gm.catch_up_text(row("a", 600)) == gm.NONE  # no rate yet
    assert gm.duration_text(0.4) == "0 s"
    assert gm.duration_text(3 * 3600 + 5 * 60 + 9) == "3 h 05 m"
    assert gm.duration_text(2 * 86400 + 7200) == "2 d 2 h"


def test_cells_of_a_described_row():
    r = row("orders", 12345, "WARN", protocol="consumer", assignor="uniform", members=4,
            topics=("a", "b", "c", "d", "e"), max_lag_seconds=75.0, lag_trend=(1, 5, 9),
            lag_rate=3.5, rebalances_last_hour=2, last_rebalance_ms=NOW - 90_000)
    cells = gm.line(r, NOW)
    assert cells.health == ["WARN"] and cells.protocol == "consumer / uniform"
    assert cells.lag == "12,345" and cells.lag_seconds == "1 m 15 s"
    assert cells.topics == "a, b, c +2" and cells.members == "4"
    assert cells.trend == [1, 5, 9] and cells.rebalances == "2"
    assert cells.last_rebalance == "1 m 30 s ago"
    assert gm.line(replace(r, last_rebalance_ms=None), NOW).last_rebalance == gm.NONE
    # each health pill in the colour of the Live page's lag bars; ERR and pending grey
    fills = dict(zip(gm.HEALTH_OPTIONS, gm.HEALTH_OPTION_FILLS, strict=True))
    assert fills["OK"] == health_fill("OK") and fills["STOP"] == health_fill("STOP")
    assert fills[ERR] == UNKNOWN_HEALTH_FILL and fills[gm.PENDING] == gm.PENDING_FILL


def test_table_is_columnar_and_bounded():
    rows = [row(f"g{i:05d}", i) for i in range(gm.MAX_ROWS + 10)]
    cells = gm.table(rows, NOW)
    assert list(cells) == [c for c in gm.COLUMNS if c != "note"]  # no row has a note
    assert all(len(v) == gm.MAX_ROWS for v in cells.values())
    assert cells["group"][:2] == ["g00000", "g00001"] and cells["lag"][1] == "1"
    assert gm.priority(gm.visible(ROWS), n=2) == ["secret", "fraud"]
    noted = gm.table(ROWS, NOW)
    assert list(noted) == list(gm.COLUMNS) and "Broker: Group authorization failed" in noted["note"]


def test_rebalances_of_the_day_and_the_last_cause_are_cells_and_sorts():
    calm = row("calm", 0, rebalances_last_hour=0, rebalances_24h=1, last_cause="joined")
    stormy = row("stormy", 0, rebalances_last_hour=3, rebalances_24h=4, last_cause="expired")
    busy_day = row("busy-day", 0, rebalances_last_hour=1, rebalances_24h=30)
    cells = gm.line(stormy, NOW)
    assert (cells.rebalances, cells.rebalances_24h, cells.last_cause) == ("3", "4", "expired")
    assert gm.line(busy_day, NOW).last_cause == gm.NONE  # none ended yet, or none seen
    rows = [calm, stormy, busy_day, row("ledger", pending=True)]
    assert names(gm.visible(rows, sort="rebalances last 24 h")) == [
        "busy-day", "stormy", "calm", "ledger"]
    assert names(gm.visible(rows, sort="rebalances last hour")) == [
        "stormy", "busy-day", "calm", "ledger"]
    table = gm.table(rows, NOW)
    assert table["rebalances_24h"] == ["1", "4", "30", gm.PENDING]
    assert table["last_cause"] == ["joined", "expired", gm.NONE, gm.PENDING]


def test_footer_counts_and_cycle_cost():
    ov = Overview(taken_ms=NOW - 2000, cluster="k:9092", rows=tuple(ROWS), listed=7,
                  cycle=CycleStats(started_ms=NOW - 5000, seconds=1.234, requests=42,
                                   groups_refreshed=6, errors=1))
    text = gm.footer(ov, shown=3, now_ms=NOW)
    assert text == ("7 groups listed · 6 described · 3 shown · last cycle 1.2 s, 42 requests, "
                    "1 errors · updated 2 s ago")
    old = gm.footer(replace(ov, kafka_release="3.9", lacks=(
        "share groups need Kafka 4.1 or later (this cluster runs Kafka 3.9)",)), 3, NOW)
    assert old.endswith("updated 2 s ago · Kafka 3.9 · Share groups need Kafka 4.1 or later "
                        "(this cluster runs Kafka 3.9)")
    first = gm.footer(replace(ov, cycle=None), shown=gm.MAX_ROWS + 1, now_ms=NOW)
    assert f"(first {gm.MAX_ROWS:,})" in first and "first cycle running" in first


def test_the_top_rows_are_the_first_of_the_whole_order_and_the_count_is_all_kept():
    rows = [row(f"g{i:05d}", (i * 7919) % 1000) for i in range(3000)]
    for sort in gm.SORTS:
        shown, kept = gm.top(rows, gm.GroupFilter(), sort, limit=50)
        assert shown == gm.visible(rows, sort=sort)[:50] and kept == 3000, sort
    shown, kept = gm.top(rows, gm.GroupFilter(name="g0001"), "name", limit=5)
    assert [r.group for r in shown] == [f"g{i:05d}" for i in range(10, 15)] and kept == 10

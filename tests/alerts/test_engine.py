"""The engine with synthetic rows: each kind fires once and resolves once, at the right
moment; flapping values do not re-fire; patterns choose groups; state stays bounded."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from backend.alerts.engine import FIRING, RESOLVED, AlertEngine
from backend.alerts.rules import parse_rules
from backend.contracts.overview import ERR, OK, STALL, STOP, WARN, GroupRow
from tests.alerts.conftest import overview, row


def engine(toml: str, **kw: int) -> AlertEngine:
    return AlertEngine(parse_rules(toml).rules, **kw)


def run(eng: AlertEngine, cycles: Iterable[tuple[float, list[GroupRow]]]
        ) -> list[tuple[float, str, str, str]]:
    """Feed overviews; (seconds, state, rule, group) of every transition."""
    out = []
    for t, rows in cycles:
        out += [(t, x.state, x.rule, x.group) for x in eng.observe(overview(t, *rows))]
    return out


def every_10s(value: Callable[[float], GroupRow | list[GroupRow]], start: float, end: float
              ) -> list[tuple[float, list[GroupRow]]]:
    """One cycle every 10 s from `start` to `end` inclusive, like the overview watcher."""
    cycles = []
    t = start
    while t <= end:
        got = value(t)
        cycles.append((t, got if isinstance(got, list) else [got]))
        t += 10
    return cycles


LAG_SECONDS = '[[rule]]\nname = "slow"\nkind = "lag_seconds"\nabove = 300\nfor = "1m"\n'


def test_a_threshold_fires_after_for_and_once_while_it_holds() -> None:
    eng = engine(LAG_SECONDS)
    got = run(eng, every_10s(lambda t: row(max_lag_seconds=400.0), 0, 300))
    assert got == [(60, FIRING, "slow", "g")]  # above since 0 s, held 1m at 60 s


def test_a_value_at_the_threshold_is_not_above_it() -> None:
    eng = engine(LAG_SECONDS)
    assert run(eng, every_10s(lambda t: row(max_lag_seconds=300.0), 0, 300)) == []


def test_a_value_flapping_around_the_threshold_fires_once_and_resolves_once() -> None:
    """Fire at 310 s held; then 250 / 310 alternating stays firing (250 is above the 240 s
    resolve level); 230 / 310 alternating does not resolve either (never held for 1m);
    only 230 at 490 s and 200 s from 500 s, held for 1m, resolve, once."""
    eng = engine(LAG_SECONDS)

    def lag(t: float) -> GroupRow:
        if t < 100:
            v = 310.0
        elif t < 300:
            v = 250.0 if t % 20 else 310.0
        elif t < 500:
            v = 230.0 if t % 20 else 310.0
        else:
            v = 200.0
        return row(max_lag_seconds=v)

    got = run(eng, every_10s(lag, 0, 900))
    assert got == [(60, FIRING, "slow", "g"), (550, RESOLVED, "slow", "g")]


def test_a_value_hovering_just_under_the_threshold_does_not_resolve() -> None:
    """Minutes at 290 s (under 300 but over the 240 s resolve level) between minutes at 310 s:
    without hysteresis this resolves and fires again every other minute."""
    eng = engine(LAG_SECONDS)
    got = run(eng, every_10s(
        lambda t: row(max_lag_seconds=310.0 if (t // 120) % 2 == 0 else 290.0), 0, 1200))
    assert got == [(60, FIRING, "slow", "g")]


def test_flapping_faster_than_for_never_fires() -> None:
    eng = engine(LAG_SECONDS)
    got = run(eng, every_10s(lambda t: row(max_lag_seconds=400.0 if t % 20 else 100.0), 0, 600))
    assert got == []


def test_an_unknown_value_breaks_the_streak_and_changes_nothing_else() -> None:
    eng = engine(LAG_SECONDS)
    got = run(eng, every_10s(
        lambda t: row(max_lag_seconds=None if t == 50 else 400.0), 0, 200))
    assert got == [(120, FIRING, "slow", "g")]  # above again from 60 s, held 1m at 120 s


def test_lag_messages_with_its_own_resolve_level_and_the_transition_texts() -> None:
    eng = engine('[[rule]]\nkind = "lag_messages"\nabove = 1000\nresolve_below = 10\n'
                 'for = "30s"\nresolve_after = "20s"\n')
    lag = {0: 5000, 30: 5000, 40: 500, 50: 9, 60: 0, 70: 3}
    fired = eng.observe(overview(0, row(lag_messages=lag[0])))
    assert fired == []
    fired = eng.observe(overview(30, row(lag_messages=lag[30])))
    assert [(x.state, x.rule, x.since_ms, x.at_ms) for x in fired] == [
        (FIRING, "lag_messages rule #1", 0, 30_000)]
    assert fired[0].text == "group g lags 5,000 messages (above 1,000 messages for 30s)"
    assert fired[0].cluster == "test-cluster"
    assert eng.observe(overview(40, row(lag_messages=500))) == []  # above 10: still firing
    assert eng.observe(overview(50, row(lag_messages=9))) == []  # at or below 10 from 50 s
    assert eng.observe(overview(60, row(lag_messages=0))) == []
    resolved = eng.observe(overview(70, row(lag_messages=3)))
    assert [(x.state, x.since_ms) for x in resolved] == [(RESOLVED, 30_000)]
    assert resolved[0].text == ("group g lags 3 messages (at or below 10 messages for 20s), "
                                "after 40s")
    assert resolved[0].headline.startswith("RESOLVED lag_messages rule #1: group g lags")


def test_a_zero_threshold_fires_on_any_lag_and_resolves_at_none() -> None:
    eng = engine('[[rule]]\nkind = "lag_messages"\nabove = 0\nfor = "0s"\n')
    got = run(eng, [(0, [row(lag_messages=0)]), (10, [row(lag_messages=1)]),
                    (20, [row(lag_messages=0)])])
    assert [(t, s) for t, s, _, _ in got] == [(10, FIRING), (20, RESOLVED)]


def test_health_fires_on_the_listed_states_and_resolves_after_resolve_after() -> None:
    eng = engine('[[rule]]\nkind = "health"\nfor = "20s"\nresolve_after = "30s"\n')
    series = {0: OK, 10: WARN, 20: STALL, 30: STOP, 40: OK, 50: STALL, 60: OK, 70: OK, 80: OK,
              90: OK, 100: ERR}
    got = []
    for t, health in series.items():
        r = row(health=health, error="GROUP_AUTHORIZATION_FAILED" if health == ERR else None)
        got += eng.observe(overview(t, r))
    assert [(x.at_ms // 1000, x.state) for x in got] == [(30, FIRING), (90, RESOLVED)]
    fire, resolve = got
    assert fire.since_ms == 10_000
    assert fire.text.startswith("group g is STOP (lag and no owner")
    assert resolve.text == "group g is OK (was STOP) for 30s, after 1m"


def test_health_only_alerts_on_the_states_it_lists() -> None:
    eng = engine('[[rule]]\nkind = "health"\nhealth = ["STOP"]\nfor = "0s"\n')
    got = run(eng, [(0, [row(health=WARN)]), (10, [row(health=STALL)]),
                    (20, [row(health=STOP)]), (30, [row(health=WARN)])])
    # resolves when the health leaves the list (WARN is not STOP), after one `for` (0s)
    assert [(t, s) for t, s, _, _ in got] == [(20, FIRING), (30, RESOLVED)]


def test_health_err_carries_the_rows_error() -> None:
    eng = engine('[[rule]]\nkind = "health"\nfor = "0s"\n')
    [fire] = eng.observe(overview(0, row(health=ERR, error="not authorized")))
    assert fire.text == ("group g is ERR (the group could not be described): not authorized, "
                         "for 0s")


def test_an_empty_group_with_lag() -> None:
    eng = engine('[[rule]]\nkind = "empty_lag"\nfor = "20s"\n')
    got = run(eng, [
        (0, [row("a", state="Empty", lag_messages=50), row("b", state="Empty"),
             row("c", state="Stable", lag_messages=50), row("d", state="Empty",
                                                            lag_messages=None)]),
        (10, [row("a", state="Empty", lag_messages=50), row("b", state="Empty"),
              row("c", state="Stable", lag_messages=50), row("d", state="Empty",
                                                             lag_messages=9)]),
        (20, [row("a", state="Empty", lag_messages=60), row("b", state="Empty"),
              row("c", state="Stable", lag_messages=50), row("d", state="Empty",
                                                             lag_messages=9)]),
        (30, [row("a", state="Stable", lag_messages=60), row("b", state="Empty"),
              row("c", state="Stable", lag_messages=50), row("d", state="Empty",
                                                             lag_messages=9)]),
        (50, [row("a", state="Stable", lag_messages=60), row("b", state="Empty"),
              row("c", state="Stable", lag_messages=50), row("d", state="Stable",
                                                             lag_messages=9)]),
    ])
    # a: Empty with lag 0..20 s; d: its lag unknown at 0 s, known from 10 s, fires at 30 s;
    # a has members again from 30 s and resolves after 20 s; b (no lag), c (members) never
    assert got == [(20, FIRING, "empty_lag rule #1", "a"), (30, FIRING, "empty_lag rule #1", "d"),
                   (50, RESOLVED, "empty_lag rule #1", "a")]


def storm(times_s: list[float]) -> Callable[[float], GroupRow]:
    """A group that rebalanced at `times_s`: the rows carry the starts of the last hour, as
    the overview does."""
    def at(t: float) -> GroupRow:
        done = [round(x * 1000) for x in times_s if t - 3600 < x <= t]
        return row(rebalances_last_hour=len(done), rebalance_times=tuple(done),
                   last_rebalance_ms=done[-1] if done else None)
    return at


def test_a_rebalance_storm_fires_on_the_count_and_resolves_after_a_quiet_window() -> None:
    eng = engine('[[rule]]\nkind = "rebalances"\nmore_than = 3\n')  # within 10m, for 0s
    got = run(eng, every_10s(storm([15, 25, 35, 45, 55]), 0, 1500))
    # 4th rebalance at 45 s is seen at 50 s; from 630 s only 3 of them are within 10m
    # (35, 45, 55 s), and after 10m more of that (resolve_after defaults to `within`) it ends
    assert got == [(50, FIRING, "rebalances rule #1", "g"),
                   (1230, RESOLVED, "rebalances rule #1", "g")]


def test_a_storm_counts_the_rows_rebalances_within_its_window_only() -> None:
    """Rebalances older than the rule's window do not count, however many the hour had."""
    eng = engine('[[rule]]\nkind = "rebalances"\nmore_than = 2\nwithin = "1m"\n')
    old = tuple(range(1000, 30_000, 1000))  # 29 rebalances, long before
    got = run(eng, [(t, [row(rebalance_times=(*old, *range(100_000, t * 1000, 10_000)))])
                    for t in (100, 110, 120, 130)])
    assert got == [(130, FIRING, "rebalances rule #1", "g")]  # 100, 110, 120 s: 3 > 2


def test_group_patterns_and_excludes() -> None:
    eng = engine('[[rule]]\nkind = "lag_messages"\nabove = 10\nfor = "0s"\n'
                 'groups = ["payments-*", "billing"]\nexclude = ["payments-test-*"]\n')
    names = ["payments-eu", "payments-test-1", "billing", "billing-eu", "orders", "Payments-us"]
    got = run(eng, [(0, [row(n, lag_messages=100) for n in names])])
    assert sorted(g for _, _, _, g in got) == ["billing", "payments-eu"]


def test_each_rule_and_group_is_its_own_incident() -> None:
    eng = engine('[[rule]]\nname = "a"\nkind = "lag_messages"\nabove = 10\nfor = "0s"\n'
                 '[[rule]]\nname = "b"\nkind = "lag_messages"\nabove = 100\nfor = "0s"\n')
    got = run(eng, [(0, [row("x", lag_messages=50), row("y", lag_messages=500)]),
                    (10, [row("x", lag_messages=500), row("y", lag_messages=500)])])
    assert got == [(0, FIRING, "a", "x"), (0, FIRING, "a", "y"), (0, FIRING, "b", "y"),
                   (10, FIRING, "b", "x")]


def test_a_group_that_disappears_resolves_once_and_is_forgotten() -> None:
    eng = engine('[[rule]]\nkind = "lag_messages"\nabove = 10\nfor = "0s"\n')
    first = eng.observe(overview(0, row("gone", lag_messages=50), row("stays")))
    assert [x.state for x in first] == [FIRING]
    [resolved] = eng.observe(overview(10, row("stays")))
    assert (resolved.state, resolved.group, resolved.since_ms) == (RESOLVED, "gone", 0)
    assert resolved.text == "group gone is no longer listed (deleted or expired)"
    assert eng.observe(overview(20, row("stays"))) == []
    assert "gone" not in eng._tracked and not eng._incidents
    # back again: a new incident
    assert [x.state for x in eng.observe(overview(30, row("gone", lag_messages=50)))] == [FIRING]


def test_an_overview_the_cluster_could_not_list_changes_nothing() -> None:
    eng = engine('[[rule]]\nkind = "lag_messages"\nabove = 10\nfor = "0s"\n')
    assert len(eng.observe(overview(0, row(lag_messages=50)))) == 1
    assert eng.observe(overview(10, error="cannot list groups: timed out")) == []
    assert eng.observe(overview(20, row(lag_messages=50))) == []  # still the same incident


def test_a_repeated_or_older_overview_is_ignored() -> None:
    eng = engine('[[rule]]\nkind = "rebalances"\nmore_than = 1\n')
    assert eng.observe(overview(10, row(rebalance_times=(9000,)))) == []
    again = overview(20, row(rebalance_times=(9000, 19_000)))
    assert [x.state for x in eng.observe(again)] == [FIRING]
    assert eng.observe(again) == []
    assert eng.observe(overview(15, row())) == []


def test_at_most_max_groups_are_tracked() -> None:
    eng = engine('[[rule]]\nkind = "lag_messages"\nabove = 10\nfor = "0s"\n', max_groups=2)
    got = run(eng, [(0, [row(n, lag_messages=50) for n in ("a", "b", "c")])])
    assert [g for _, _, _, g in got] == ["a", "b"]
    assert eng.untracked == 1
    # a slot frees when a tracked group goes away
    got = run(eng, [(10, [row(n, lag_messages=50) for n in ("b", "c")])])
    assert got == [(10, RESOLVED, "lag_messages rule #1", "a"),
                   (10, FIRING, "lag_messages rule #1", "c")]
    assert eng.untracked == 0


def test_state_is_dropped_once_nothing_is_wrong() -> None:
    eng = engine(LAG_SECONDS)
    run(eng, every_10s(lambda t: row(max_lag_seconds=400.0 if t < 100 else 0.0), 0, 300))
    assert eng._incidents == {}

"""The Timeline's view-model of the memory: cards in words, previous / next / worst, the
table, the span, and a lag series the browser can take (bounded, spikes kept, holes shown)."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import pytest

from backend.contracts.history import (
    CAUSES,
    EXPIRED,
    JOINED,
    KILLED,
    NOT_OBSERVED,
    Cause,
    Episode,
    Impact,
    Moved,
)
from backend.history.chunks import LagBlock
from dashboard import history_model as hm
from dashboard.figures import memory_lag_figure

NOW = 1_800_000_000_000
S = 1000


def ep(start: int, end: int | None = None, *causes: Cause, protocol: str = "classic",
       final: bool = True, **impact) -> Episode:
    return Episode("k", "g", start, end, protocol, "state", causes=causes,
                   impact=Impact(**impact), final=final)


EXPIRED_B = Cause(EXPIRED, "b stopped committing with records waiting and stayed listed "
                           "6.0 s until the group noticed", member="b", dead_ms=6000)
JOINED_C = Cause(JOINED, "c (c-1 on /10.0.0.3) joined", member="c")


def test_a_card_says_when_why_and_what_it_cost():
    e = Episode("k", "g", NOW, NOW + 2500, "consumer", "reconcile", causes=(EXPIRED_B, JOINED_C),
                impact=Impact(moved=(Moved("t", 0, "b", "a"), Moved("t", 1, "b", "a"),
                                     Moved("t", 2, None, "c")),
                              unowned_partition_seconds=12.5, gap_ms=7000, lag_before=114,
                              lag_peak=2500, lag_after=3, recovered_ms=4000, reprocessed=40,
                              reconciling=(("a", 2100),)),
                joined=("c",), left=("b",), generation_before=4, generation_after=6,
                target_epoch_before=4, target_epoch_after=6, final=True)
    card = hm.card(e)
    assert card.title == f"{hm.clock(NOW)} · expired · 2.5 s"
    assert card.cause == EXPIRED and card.meaning == CAUSES[EXPIRED]
    assert card.evidence == (f"expired: {EXPIRED_B.evidence}", f"joined: {JOINED_C.evidence}")
    assert card.impact == (
        "3 partitions moved: b → a (t-0, t-1); nobody → c (t-2)",
        "12.5 partition-seconds without an owner",
        "processing gap 7.0 s",
        "lag 114 → peak 2,500 → 3, back to 114 4.0 s after it ended",
        "40 records committed again",
        "group epoch 4 → 6",
        "target assignment epoch 4 → 6",
        "a reconciled for 2.1 s",
        "joined: c",
        "left: b",
    )


def test_no_cause_is_said_plainly_and_an_open_episode_is_not_called_unexplained():
    unexplained = hm.card(ep(NOW, NOW + 800, lag_before=5, lag_peak=5, lag_after=5))
    assert unexplained.cause == NOT_OBSERVED
    assert unexplained.evidence == (f"{NOT_OBSERVED}: {CAUSES[NOT_OBSERVED]}",)
    assert unexplained.impact[0] == "no partition changed owner"
    assert unexplained.title.endswith("· cause not observed · 0.8 s")

    still = hm.card(ep(NOW, None, final=False, moved=(Moved("t", 0, "a", None),),
                       lag_before=10, lag_peak=90))
    assert still.title == f"{hm.clock(NOW)} · {hm.REBALANCING}" and still.meaning == ""
    assert still.evidence == (f"{hm.REBALANCING}: its causes are named once it ends",)
    assert "1 partition moved: a → nobody (t-0)" in still.impact
    assert "processing gap still open: a moved partition has not progressed yet" in still.impact
    assert "lag 10 → peak 90 → … so far" in still.impact
    assert still.impact[-1].startswith("still measuring")
    # a classic group's generation (only where known), a share group's unmoving partitions
    classic = ep(NOW, NOW + 1, JOINED_C)
    assert not any("generation" in line or "epoch" in line for line in hm.card(classic).impact)
    assert "generation ? → 5" in hm.card(replace(classic, generation_after=5)).impact
    shared = hm.card(ep(NOW, NOW + 1, JOINED_C, protocol="share"))
    assert shared.impact[0] == "partitions are shared, not owned: none moves"


def test_long_move_lists_are_cut_and_long_durations_read_in_minutes():
    moved = tuple(Moved("orders", p, "a", "b") for p in range(hm.MOVES_LISTED + 3))
    assert hm.moves_text(moved, "classic").endswith("(orders-0, orders-1, orders-2, orders-3, "
                                                    "orders-4, orders-5 +3)")
    assert hm.took(59_949) == "59.9 s" and hm.took(200_000) == "3 m 20 s"


EPISODES = [
    ep(NOW, NOW + 1 * S, JOINED_C, unowned_partition_seconds=0.0, gap_ms=900),
    ep(NOW + 60 * S, NOW + 61 * S, EXPIRED_B, unowned_partition_seconds=3.0, gap_ms=100),
    ep(NOW + 120 * S, NOW + 121 * S, EXPIRED_B, unowned_partition_seconds=3.0, gap_ms=5000,
       lag_before=10, lag_peak=20),
    ep(NOW + 180 * S, NOW + 181 * S, JOINED_C, gap_ms=9000, lag_before=0, lag_peak=99_999),
]


def test_previous_next_and_the_newest_by_default():
    newest = hm.shown_index(EPISODES, None)
    assert newest == 3
    assert hm.shown_index(EPISODES, 12345) == 3  # chosen in another span or group: the newest
    assert hm.shown_index(EPISODES, NOW + 60 * S) == 1
    assert hm.neighbour(EPISODES, 1, -1) == NOW and hm.neighbour(EPISODES, 1, +1) == NOW + 120 * S
    assert hm.neighbour(EPISODES, 0, -1) is None and hm.neighbour(EPISODES, 3, +1) is None
    assert hm.shown_index([], None) is None and hm.neighbour([], None, -1) is None


def test_the_worst_is_the_most_unowned_then_the_longest_gap_then_the_largest_lag_rise():
    # unowned first: the 9 s gap and the huge lag rise of the newest do not outweigh it
    assert hm.worst(EPISODES) is EPISODES[2]  # two tie on unowned; the longer gap wins
    no_unowned = [EPISODES[0], EPISODES[3]]
    assert hm.worst(no_unowned) is EPISODES[3]  # the longer gap
    same_gap = [ep(NOW, NOW + 1, gap_ms=50, lag_before=100, lag_peak=400),
                ep(NOW + S, NOW + 2 * S, gap_ms=50, lag_before=0, lag_peak=200)]
    assert hm.worst(same_gap) is same_gap[0]  # a rise of 300 beats 200
    equal = [ep(NOW, NOW + 1), ep(NOW + S, NOW + 2 * S)]
    assert hm.worst(equal) is equal[1]  # the newest among equals
    assert hm.worst([]) is None
    assert "partition-seconds without an owner" in hm.WORST_RULE


def test_the_table_lists_the_newest_first_and_marks_the_episode_shown():
    table = hm.table(EPISODES, NOW + 60 * S)
    assert table.starts == [e.start_ms for e in reversed(EPISODES)]
    assert table.cells["shown"] == ["", "", hm.SHOWN_MARK, ""]
    assert table.cells["cause"] == [JOINED, EXPIRED, EXPIRED, JOINED]
    assert table.cells["duration"][0] == "1.0 s" and table.cells["gap"][0] == "9.0 s"
    assert table.cells["unowned"][1] == "3.0" and table.cells["lag_peak"][0] == "99,999"
    open_ = hm.table([ep(NOW, None, final=False, moved=(Moved("t", 0, "a", None),))], None)
    assert open_.cells["duration"] == [hm.REBALANCING] and open_.cells["gap"] == ["…"]
    assert list(table.cells) == list(hm.TABLE_COLUMNS)


def test_spans_are_presets_ending_now_or_a_custom_pair_in_either_order():
    assert hm.span("last 6 h", NOW) == hm.Span(NOW - 6 * hm.HOUR_MS, NOW, "last 6 h")
    assert hm.span("last 7 d", NOW).length_ms == 7 * hm.DAY_MS
    custom = hm.span(hm.CUSTOM, NOW, NOW - 5 * S, NOW - 50 * S)
    assert (custom.since_ms, custom.until_ms) == (NOW - 50 * S, NOW - 5 * S)
    assert custom.label.startswith("from ")
    # a stale choice, or custom without both ends: the default preset
    assert hm.span("last year", NOW).label == hm.span(hm.CUSTOM, NOW, NOW).label == hm.DEFAULT_SPAN


def test_every_cause_has_a_colour_from_the_colour_blind_safe_palette():
    assert set(CAUSES) <= set(hm.CAUSE_COLOURS)
    for kind, colour in hm.CAUSE_COLOURS.items():
        assert colour in hm.OKABE_ITO or kind in (NOT_OBSERVED, hm.REBALANCING), kind
    # neighbours in priority order never share a colour
    kinds = [k for k in CAUSES if k != NOT_OBSERVED]
    assert all(hm.CAUSE_COLOURS[a] != hm.CAUSE_COLOURS[b] for a, b in pairwise(kinds))


def test_shades_are_coloured_by_cause_named_on_hover_and_open_ones_run_to_now():
    killed = Cause(KILLED, "the supervisor sent ada SIGKILL", member="ada")
    bands = hm.shades([ep(NOW, NOW + 2 * S, killed), ep(NOW + 10 * S, None, final=False),
                       ep(NOW + 20 * S, NOW + 21 * S)], open_until_ms=NOW + 30 * S)
    assert [(b.cause, b.colour) for b in bands] == [
        (KILLED, hm.CAUSE_COLOURS[KILLED]), (hm.REBALANCING, hm.REBALANCING_COLOUR),
        (NOT_OBSERVED, hm.NOT_OBSERVED_COLOUR)]
    assert (bands[0].start_ms, bands[0].end_ms) == (NOW, NOW + 2 * S)
    assert bands[1].end_ms == NOW + 30 * S
    assert KILLED in bands[0].hover[0] and bands[0].hover[1] == f"killed: {killed.evidence}"

    fig = memory_lag_figure(hm.LagSeries([NOW, NOW + S], [1, 2]), bands, NOW - 60 * S,
                            NOW + 60 * S, shown_start=NOW + 10 * S, revision="r")
    bars = [t for t in fig.data if t.type == "bar"]
    assert [b.name for b in bars] == [KILLED, hm.REBALANCING, NOT_OBSERVED]
    assert all(b.hovertext for b in bars) and "SIGKILL" in bars[0].hovertext[0]
    assert fig.layout.uirevision == "r" and len(fig.layout.shapes) == 1  # the episode shown


def block(times: list[int], lags: list[int]) -> LagBlock:
    b = LagBlock()
    for t, lag in zip(times, lags, strict=True):
        b.add(t, lag, None)
    return b


def test_a_short_series_goes_as_it_is():
    times = [NOW + i * 10 * S for i in range(50)]
    series = hm.lag_series(block(times, list(range(50))))
    assert series.times == times and series.lags == list(range(50))
    assert hm.lag_series(LagBlock()) == hm.LagSeries([], [])


@pytest.mark.parametrize("max_points", [60, 300, hm.MAX_POINTS])
def test_a_week_of_points_is_bounded_and_keeps_its_spikes(max_points):
    n = 7 * 24 * 360  # a point every 10 s for a week
    times = [NOW + i * 10 * S for i in range(n)]
    lags = [1000 + (i % 17) for i in range(n)]
    lags[12_345] = 999_999  # one cycle's spike
    lags[40_000] = 0  # one cycle's dip
    series = hm.lag_series(block(times, lags), max_points=max_points)
    assert len(series.times) == len(series.lags) <= max_points
    assert max(v for v in series.lags if v is not None) == 999_999
    assert min(v for v in series.lags if v is not None) == 0
    assert times[12_345] in series.times and times[40_000] in series.times
    assert series.times == sorted(series.times)
    assert None not in series.lags  # no hole in the memory: no break


def test_a_hole_in_the_memory_breaks_the_line():
    times = [NOW + i * 10 * S for i in range(20)] + [NOW + 3600 * S + i * 10 * S
                                                    for i in range(20)]
    series = hm.lag_series(block(times, [5] * 40))
    assert series.lags.count(None) == 1
    hole = series.lags.index(None)
    assert series.times[hole - 1] == times[19] and series.times[hole + 1] == times[20]
    # bucketed too: the hour without points still breaks the line
    many = [NOW + i * S for i in range(3000)] + [NOW + 90_000 * S + i * S for i in range(3000)]
    bucketed = hm.lag_series(block(many, [7] * 6000), max_points=200)
    assert bucketed.lags.count(None) == 1 and len(bucketed.times) <= 200


def test_the_chart_starts_near_the_memory_s_first_record_not_a_day_before_it():
    day, now = 86_400_000, 10 * 86_400_000
    since = now - day
    recent = hm.LagSeries([now - 600_000, now - 300_000], [1, 2])
    start = hm.chart_since(since, now, recent, [])
    assert start == now - 600_000 - 30_000  # 5 % of the ten minutes drawn, before the first
    older_episode = [ep(now - 3_600_000)]
    assert hm.chart_since(since, now, recent, older_episode) == now - 3_600_000 - 180_000
    full = hm.LagSeries([since + 1000, now], [1, 2])
    assert hm.chart_since(since, now, full, []) == since  # never before the span's start
    assert hm.chart_since(since, now, hm.LagSeries([], []), []) == since

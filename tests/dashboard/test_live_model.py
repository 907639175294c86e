"""Pure view-model logic of the Live page: feed wording, idle rule, cards, series, locator,
handovers, and the lanes' colours (health, participants)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from backend.contracts import (
    Event,
    MemberView,
    PartitionView,
    RebalanceView,
    Snapshot,
    StreamView,
)
from backend.kafka.partitioner import partition_for
from backend.pool.names import PALETTE, colour_for, contrast_ratio, luminance
from dashboard import live_model as lm
from dashboard.figures import throughput_lag_figure
from dashboard.panels import cards_html, lanes_html
from dashboard.theme import PARTICIPANT_PALETTE, PARTICIPANT_TEXT, health_fill, member_style


def snap(ts: int, owners: dict[int, str | None], ends: dict[int, int] | None = None,
         committed: dict[int, int] | None = None, members: tuple[str, ...] = (),
         events: tuple[Event, ...] = (), rebalances: tuple[RebalanceView, ...] = ()) -> Snapshot:
    ends = ends or dict.fromkeys(owners, 0)
    committed = committed or dict.fromkeys(owners, 0)
    parts = tuple(PartitionView(partition=p, owner=o, committed=committed[p], end=ends[p],
                                lag_messages=ends[p] - committed[p], lag_seconds=None)
                  for p, o in owners.items())
    names = members or tuple(sorted({o for o in owners.values() if o}))
    mem = tuple(MemberView(member_id=f"id-{n}", client_id=n, host="h",
                           partitions=tuple(p for p, o in owners.items() if o == n))
                for n in names)
    streams = tuple(_stream(f"car-{i:02d}", partition_for(f"car-{i:02d}", len(owners)),
                            owners[partition_for(f"car-{i:02d}", len(owners))])
                    for i in range(6))
    return Snapshot(taken_ms=ts, group="g", topic="t", state="Stable", protocol="classic",
                    assignor="range", generation=3, members=mem, partitions=parts,
                    streams=streams, rebalances=rebalances,
                    total_lag=sum(p.lag_messages for p in parts), events=events,
                    partition_count=len(owners))


def _stream(key: str, partition: int, owner: str | None) -> StreamView:
    return StreamView(stream_id=key, partition=partition, owner=owner)


def _rebalance(start: int, end: int | None, generation: int | None, left: tuple[str, ...],
               moved: tuple[tuple[int, str, str], ...]) -> RebalanceView:
    return RebalanceView(start_ms=start, end_ms=end, generation=generation, joined=(),
                         left=left, moved=moved)


def test_feed_uses_quix_wording_newest_first_and_filters():
    events = (
        Event(1000, "g", "ada", "started", {"protocol": "classic", "assignor": "range"}),
        Event(2000, "g", "ada", "stream_received", {"stream": "car-04", "partition": 1}),
        Event(2500, "g", "ada", "heartbeat", {"rate": 10.0}),
        Event(3000, "g", "ada", "streams_revoked", {"streams": ["car-04", "car-07"]}),
        Event(3500, "g", "bruno", "stream_received", {"stream": "car-04", "partition": 1}),
    )
    items = lm.feed_items(events)
    texts = [i.text for i in items]
    assert texts[0] == "New stream received: car-04" and items[0].replica == "bruno"
    assert "Stream revoked: car-04" in texts and "Stream revoked: car-07" in texts
    assert texts[-1].startswith("ada started") and "classic/range" in texts[-1]
    assert not any("heartbeat" in t for t in texts)
    assert [i.ts for i in items] == sorted((i.ts for i in items), reverse=True)
    only_ada_04 = lm.filter_feed(items, ["ada"], "car-04")
    assert [i.text for i in only_ada_04] == ["Stream revoked: car-04",
                                             "New stream received: car-04"]


@dataclass
class Info:
    name: str
    state: str
    alive: bool
    exit_signal: str | None = None
    ended_at: float | None = None


def test_idle_warning_and_cards_name_idle_dead_and_external():
    s = snap(10_000, {0: "ada", 1: "bruno"}, members=("ada", "bruno", "chloe"),
             events=(Event(9000, "g", "ada", "heartbeat", {"rate": 123.4,
                                                           "last_batch_ms": 512.0}),))
    assert lm.idle_replicas(s) == ["chloe"]
    warning = lm.idle_warning(s)
    assert warning is not None and "chloe is idle" in warning and "3 replicas share 2" in warning
    cards = {c.name: c for c in lm.replica_cards(
        s, [Info("ada", "running", True), Info("chloe", "running", True),
            Info("dmitri", "killed", False, "SIGKILL", 5.0)], now_s=17.0)}
    assert cards["ada"].status == "alive" and cards["ada"].rate == 123.4
    assert cards["chloe"].status == "idle"
    assert cards["bruno"].status == "external" and not cards["bruno"].managed
    assert cards["dmitri"].status == "dead"
    assert cards["dmitri"].detail == "killed (SIGKILL) 12 s ago"
    html = cards_html(list(cards.values()))
    assert 'data-replica="dmitri"' in html and "123 msg/s" in html
    # mid-rebalance: members without partitions are only joining, so no names yet
    moving = lm.idle_warning(replace(s, state="PreparingRebalance"))
    assert moving is not None and "chloe" not in moving and "1 of them will be idle" in moving
    # as many members as partitions: nobody idle, no warning
    assert lm.idle_warning(snap(1, {0: "ada", 1: "bruno"})) is None


def test_series_rates_and_rebalance_periods_are_bounded():
    hist = [snap(1000 * i, {0: "ada"}, ends={0: 100 * i}, committed={0: 80 * i})
            for i in range(1, 1000)]
    points = lm.series(hist)
    assert len(points) == lm.MAX_POINTS
    assert points[-1].produced_per_s == 100.0 and points[-1].consumed_per_s == 80.0
    assert points[-1].lag == 20 * 999
    r = (_rebalance(5000, 8000, 4, ("bruno",), ((1, "bruno", "ada"),)),
         _rebalance(9000, None, None, (), ()))
    s = snap(10_000, {0: "ada"}, rebalances=r)
    assert lm.rebalance_periods(s, 6000) == [(6000, 8000, True), (9000, 10_000, False)]


def test_locator_gives_murmur2_partition_owner_now_and_history():
    hist = [snap(1000, {0: "ada", 1: "bruno"}), snap(2000, {0: "ada", 1: None}),
            snap(3000, {0: "ada", 1: "ada"})]
    key = next(f"car-{i:02d}" for i in range(6) if partition_for(f"car-{i:02d}", 2) == 1)
    loc = lm.locate(key, hist[-1], hist)
    assert loc is not None and loc.partition == 1 and loc.owner == "ada" and loc.known
    assert loc.history == ((1000, "bruno"), (2000, None), (3000, "ada"))


def test_lanes_escape_keys_and_cap_chips():
    s = snap(1, {0: "ada"})
    evil = _stream("<script>x</script>", 0, "ada")
    many = tuple(_stream(f"k{i}", 0, "ada") for i in range(100))
    html = lanes_html(replace(s, streams=(evil, *many)))
    assert "<script>x" not in html and "&lt;script&gt;" in html
    assert "+61 more" in html


def test_series_average_irons_out_micro_batch_commits():
    # polls every 0.5 s; the fleet produces 100 per poll, the replica commits 200 once a second
    hist = [snap(500 * i, {0: "ada"}, ends={0: 100 * i}, committed={0: 200 * (i // 2)})
            for i in range(1, 41)]
    points = lm.series(hist)
    raw = {p.consumed_per_s for p in points[1:]}
    assert raw == {0.0, 400.0}  # what the room used to see
    assert points[0].consumed_avg_per_s is None and points[0].consumed_per_s is None
    settled = points[lm.SMOOTH_LEAD:]
    assert all(p.produced_avg_per_s == 200.0 for p in settled)
    assert all(180.0 <= (p.consumed_avg_per_s or 0) <= 220.0 for p in settled)
    # the window restarts on another topic: no rate across two topics
    other = [replace(s, topic="u") for s in
             (snap(20_500, {0: "ada"}, ends={0: 5}), snap(21_000, {0: "ada"}, ends={0: 105}))]
    after = lm.series([*hist, *other])
    assert after[-2].produced_avg_per_s is None and after[-1].produced_avg_per_s == 200.0
    # bounded, including the snapshots read before the first point to fill its window
    assert len(lm.series(hist * 20, limit=50)) == 50


def test_handover_names_the_previous_owner_across_an_unowned_gap():
    hist = [snap(1000, {0: "ada", 1: "ada", 2: "bruno"}),
            snap(2000, {0: "ada", 1: None, 2: None}),  # eager rebalance: nobody owns it
            snap(3000, {0: "ada", 1: "chloe", 2: "bruno"})]  # P2 back to bruno: not a move
    moves = lm.handovers(hist)
    assert moves == {1: lm.Handover(1, "ada", "chloe", 3000)}
    hold = int(lm.HANDOVER_S * 1000)
    assert lm.handovers(hist, now_ms=3000 + hold) == moves
    assert lm.handovers(hist, now_ms=3001 + hold) == {}  # highlighted for a few seconds only
    # unowned again: nothing to highlight; a later owner came "from chloe", the last named one
    later = [*hist, snap(4000, {0: "ada", 1: None, 2: "bruno"})]
    assert lm.handovers(later) == {}
    later.append(snap(5000, {0: "ada", 1: "dmitri", 2: "bruno"}))
    assert lm.handovers(later)[1].previous == "chloe"
    # the first owner ever seen, or one older than the look-back, is no handover
    assert lm.handovers([snap(1000, {0: "ada"})]) == {}
    old = int(lm.HANDOVER_LOOKBACK_S * 1000) + 10_000
    assert lm.handovers([snap(1000, {0: "ada"}), snap(old, {0: "bruno"})]) == {}
    assert lm.handovers([]) == {}


def test_lanes_colour_lag_by_health_and_highlight_a_handover():
    s = snap(5000, {0: "ada", 1: "chloe"}, ends={0: 50, 1: 900}, committed={0: 40, 1: 100})
    stalled = replace(s.partitions[1], health="STALL")
    s = replace(s, partitions=(s.partitions[0], stalled))
    html = lanes_html(s, moved={1: lm.Handover(1, "ada", "chloe", 3000)})
    _, p0, p1 = re.split(r'(?=<div class="p")', html.split('data-testid="gs-lanes"', 1)[1])
    assert f"background:{health_fill('OK')}" in p0 and "#dc2626" not in p0  # healthy: green
    assert f"background:{health_fill('STALL')}" in p1 and "800 · STALL" in p1
    assert "from ada" in p1 and "data-moved" not in p0
    assert "moved from ada to chloe 2 s ago" in p1
    # the cells keep their plain class names: the page test finds owners by them
    owners = re.findall(r'class="p"[^>]*>P(\d)</div><div class="own"[^>]*>([^<]+)<', html)
    assert owners == [("0", "ada"), ("1", "chloe")]
    # a stale handover (the partition has another owner now) is not drawn
    assert "from ada" not in lanes_html(s, moved={1: lm.Handover(1, "ada", "bruno", 3000)})


def test_participants_get_their_own_palette_in_lanes_and_cards():
    s = snap(1000, {0: "ada", 1: "kim-laptop"})
    supervised = [Info("ada", "running", True)]
    assert lm.external_members(s, supervised) == {"kim-laptop"}
    assert lm.external_members(s) == frozenset()  # no supervisor: nobody to tell apart
    ours, theirs = member_style("ada"), member_style("kim-laptop", external=True)
    assert ours.fill == colour_for("ada") and not ours.dashed
    assert theirs.dashed and theirs == member_style("kim-laptop", external=True)  # stable
    brightest_replica = max(luminance(c) for c in PALETTE)
    assert all(luminance(fill) > 2 * brightest_replica for fill, _ in PARTICIPANT_PALETTE)
    assert all(contrast_ratio(fill, PARTICIPANT_TEXT) > 7 for fill, _ in PARTICIPANT_PALETTE)
    html = lanes_html(s, lm.external_members(s, supervised))
    _, lane0, lane1 = re.split(r'(?=<div class="p")', html)
    assert theirs.css() in lane1 and theirs.css() not in lane0 and ours.css() in lane0
    cards = {c.name: c for c in lm.replica_cards(s, supervised)}
    assert cards["kim-laptop"].external and not cards["ada"].external
    html = cards_html(list(cards.values()))
    assert 'class="gs-card external ext"' in html and f"--c:{theirs.fill}" in html


def test_throughput_figure_draws_the_average_bold_over_the_faint_raw_rate():
    hist = [snap(500 * i, {0: "ada"}, ends={0: 100 * i}, committed={0: 200 * (i // 2)})
            for i in range(1, 1000)]
    points = lm.series(hist)
    fig = throughput_lag_figure(points, [], revision="r")
    shown = {t.name: t for t in fig.data}
    assert set(shown) == {"produced, raw", "processed, raw", "produced", "processed", "lag"}
    raw, avg = shown["processed, raw"], shown["processed"]
    assert raw.showlegend is False and raw.opacity < 1 and raw.line.width < avg.line.width
    assert raw.legendgroup == avg.legendgroup  # one legend click hides both
    assert list(avg.y) == [p.consumed_avg_per_s for p in points]
    assert all(len(t.x) == lm.MAX_POINTS for t in fig.data)
    assert fig.layout.uirevision == "r"


def test_a_static_rejoin_is_not_shaded_as_a_rebalance() -> None:
    rejoin = RebalanceView(start_ms=5000, end_ms=5500, generation=4, joined=(), left=(),
                           moved=(), reason="rejoin", previous_generation=4)
    s = snap(10_000, {0: "ada"}, rebalances=(rejoin,))
    assert lm.rebalance_periods(s, 0) == []


# ---- share and streams groups -------------------------------------------------------------

def share_snap(ts: int, sharers: dict[int, tuple[str, ...]],
               starts: dict[int, int | None] | None = None,
               ends: dict[int, int] | None = None, members: tuple[str, ...] = ()) -> Snapshot:
    """A share group as the observer derives it: no owner, every sharer listed."""
    starts = starts or dict.fromkeys(sharers, 0)
    ends = ends or dict.fromkeys(sharers, 0)
    parts = tuple(PartitionView(partition=p, owner=None, committed=starts[p], end=ends[p],
                                lag_messages=ends[p] - (starts[p] or 0), lag_seconds=None,
                                sharers=tuple(sorted(s)))
                  for p, s in sharers.items())
    names = members or tuple(sorted({n for s in sharers.values() for n in s}))
    mem = tuple(MemberView(member_id=f"id-{n}", client_id=n, host="h",
                           partitions=tuple(p for p, s in sharers.items() if n in s))
                for n in names)
    streams = tuple(_stream(f"car-{i:02d}", partition_for(f"car-{i:02d}", len(sharers)), None)
                    for i in range(6))
    return Snapshot(taken_ms=ts, group="q", topic="t", state="Stable", protocol="share",
                    assignor="simple", generation=5, members=mem, partitions=parts,
                    streams=streams, rebalances=(), partition_count=len(sharers),
                    total_lag=sum(p.lag_messages for p in parts))


def test_a_share_groups_lanes_list_every_sharer_and_its_start_offset() -> None:
    s = share_snap(1000, {0: ("bruno", "ada"), 1: ("ada",), 2: ()},
                   starts={0: 40, 1: 7, 2: None}, ends={0: 100, 1: 7, 2: 3})
    lanes = lm.share_lanes(s)
    assert [(lane.partition, lane.sharers, lane.start_offset, lane.lag_messages)
            for lane in lanes] == [(0, ("ada", "bruno"), 40, 60), (1, ("ada",), 7, 0),
                                   (2, (), None, 3)]
    assert sorted(i for lane in lanes for i in lane.streams) == [f"car-{i:02d}" for i in range(6)]
    assert all(set(lane.streams) == {st.stream_id for st in s.streams if
                                     st.partition == lane.partition} for lane in lanes)

    from dashboard.views.live import share_lanes_html

    html = share_lanes_html(s, external={"bruno"})
    rows = re.split(r'(?=<div class="p")', html.split('data-testid="gs-lanes"', 1)[1])[1:]
    assert 'data-sharers="ada,bruno"' in rows[0] and 'data-sharers=""' in rows[2]
    # one chip per sharer in its own colour (a participant in the participants' palette)
    assert member_style("ada").css() in rows[0]
    assert member_style("bruno", external=True).css() in rows[0]
    assert member_style("bruno").css() not in rows[0] and "bruno" not in rows[1]
    # the start offset is named as what it is, never "committed"
    assert "share-partition start offset 40" in rows[0] and 'data-spso="40"' in rows[0]
    assert "share-partition start offset –" in rows[2] and "nobody" in rows[2]
    assert "committed" not in html and "unowned" not in html
    assert re.search(r"<em>60</em>", rows[0])


def test_a_share_lanes_lag_is_labelled_the_brokers_where_the_broker_reports_it() -> None:
    from dashboard.views.live import share_lanes_html

    s = share_snap(1000, {0: ("ada",), 1: ("ada",)}, starts={0: 40, 1: 90},
                   ends={0: 100, 1: 100})
    assert "lag (broker)" not in share_lanes_html(s)
    reported = replace(s, partitions=(replace(s.partitions[0], lag_messages=25,
                                              lag_reported=True), s.partitions[1]))
    lanes = lm.share_lanes(reported)
    assert [(lane.lag_messages, lane.lag_reported) for lane in lanes] == [(25, True),
                                                                          (10, False)]
    html = share_lanes_html(reported)
    rows = re.split(r'(?=<div class="p")', html.split('data-testid="gs-lanes"', 1)[1])
    assert "<b>lag (broker)</b>" in rows[0]
    assert "lag 25 messages not yet acknowledged, as the broker reports it" in rows[1]
    assert re.search(r"<em>25</em>", rows[1])
    # a partition it reports nothing for keeps the arithmetic, and says so
    assert "lag 10 messages from the share-partition start offset 90" in rows[2]
    assert "committed" not in html


def test_a_share_group_has_no_idle_rule_and_its_header_says_share_group() -> None:
    # three members on one partition: all busy, which the golden rule would call two idle
    s = share_snap(1000, {0: ("ada", "bruno", "chloe")})
    assert lm.idle_replicas(s) == [] and lm.idle_warning(s) is None
    cards = {c.name: c for c in lm.replica_cards(s)}
    assert {c.status for c in cards.values()} == {"alive"}
    # a stream has no owner in a share group: each card counts its shared partitions'
    assert all(c.streams == 6 for c in cards.values())
    # a member given nothing yet is idle, whatever the partition count
    waiting = share_snap(1000, {0: ("ada",), 1: ("ada",)}, members=("ada", "bruno"))
    assert lm.idle_replicas(waiting) == ["bruno"] and lm.idle_warning(waiting) is None

    from dashboard.views.live import header_badges

    assert ":blue-badge[share group / simple]" in header_badges(s)
    assert "group epoch **5**" in header_badges(s)
    assert lm.offset_label("share") == "share-partition start offset"
    # classic and consumer groups read as before
    classic = header_badges(snap(1, {0: "ada"}))
    assert ":blue-badge[classic / range]" in classic and "generation **3**" in classic
    assert lm.group_type_label("consumer") == "consumer"
    assert lm.offset_label("classic") == lm.offset_label("consumer") == "committed"


def test_a_share_replicas_card_says_how_many_records_it_holds_in_flight() -> None:
    beat = Event(900, "q", "ada", "heartbeat", {"share": True, "rate": 120.0,
                                                "last_batch_ms": 80.0, "in_flight": 42.4})
    s = replace(share_snap(1000, {0: ("ada", "bruno")}), events=(beat,))
    cards = {c.name: c for c in lm.replica_cards(s)}
    assert (cards["ada"].rate, cards["ada"].in_flight) == (120.0, 42.4)
    assert cards["bruno"].in_flight is None  # no heartbeat yet: nothing claimed
    html = cards_html([cards["ada"], cards["bruno"]])
    assert "120 msg/s · batch 80 ms · 42 in flight" in html
    assert html.count("in flight") == 1
    # a consumer group's heartbeat has no such figure, and its card never says it
    owned = replace(snap(1000, {0: "ada"}), events=(replace(beat, group="g"),))
    assert lm.replica_cards(owned)[0].in_flight is None


def test_a_share_groups_locator_names_the_sharers_and_nothing_is_handed_over() -> None:
    hist = [share_snap(1000, {0: ("ada",), 1: ("ada",)}),
            share_snap(2000, {0: ("ada", "bruno"), 1: ("ada", "bruno")}),
            share_snap(3000, {0: ("ada", "bruno"), 1: ("ada", "bruno")})]
    key = next(f"car-{i:02d}" for i in range(6) if partition_for(f"car-{i:02d}", 2) == 1)
    loc = lm.locate(key, hist[-1], hist)
    assert loc is not None and loc.shared and loc.owner is None
    assert loc.sharers == ("ada", "bruno")
    assert loc.history == ((1000, "ada"), (2000, "ada, bruno"))
    assert lm.handovers(hist) == {}
    # a classic group's locator is unchanged: one owner, no sharers
    classic = lm.locate(key, snap(1, {0: "ada", 1: "bruno"}), [])
    assert classic is not None and not classic.shared and classic.sharers == ()


def test_a_streams_groups_cards_list_tasks_and_a_member_with_tasks_is_not_idle() -> None:
    members = (
        MemberView(member_id="id-ada", client_id="ada", host="h", partitions=(),
                   tasks=("0_10 active", "0_2 active", "1_0 standby")),
        MemberView(member_id="id-bruno", client_id="bruno", host="h", partitions=(),
                   tasks=("0_1 warmup",)),
        MemberView(member_id="id-chloe", client_id="chloe", host="h", partitions=()),
    )
    s = replace(snap(1, {0: None, 1: None}), protocol="streams", assignor=None,
                members=members)
    assert lm.tasks_text(members[0].tasks) == "active 0_2, 0_10 · standby 1_0"
    assert lm.tasks_text(()) == "none"
    cards = {c.name: c for c in lm.replica_cards(s)}
    assert (cards["ada"].status, cards["bruno"].status, cards["chloe"].status) == (
        "alive", "alive", "idle")
    assert cards["ada"].tasks == members[0].tasks
    assert lm.idle_replicas(s) == ["chloe"] and lm.idle_warning(s) is None
    assert lm.generation_label("streams") == "group epoch"
    assert lm.group_type_label("streams") == "streams group"

    from dashboard.views.live import tasks_cards_html

    html = tasks_cards_html(list(cards.values()), own=False)
    assert "active 0_2, 0_10 · standby 1_0" in html and "warmup 0_1" in html
    assert 'data-tasks="0_10 active,0_2 active,1_0 standby"' in html
    assert 'data-replica="chloe"' in html and "msg/s" not in html


def test_a_share_replicas_redeliveries_are_feed_lines_naming_car_offset_and_delivery():
    from backend.contracts import Event

    ev = Event(ts=5, group="q", replica="bruno", type="redelivered", fields={
        "share": True, "count": 7, "records": [
            {"key": "car-04", "partition": 1, "offset": 1233, "delivery": 2},
            {"key": "car-05", "partition": 0, "offset": 40, "delivery": 3}]})
    items = lm.feed_items([ev])
    texts = [i.text for i in items]
    assert "car-04 offset 1233 (P1) redelivered to bruno, delivery 2" in texts
    assert "car-05 offset 40 (P0) redelivered to bruno, delivery 3" in texts
    assert "5 more records redelivered to bruno" in texts
    assert {i.kind for i in items} == {"redelivered"}
    assert [i.stream for i in items if i.stream] == ["car-04", "car-05"]

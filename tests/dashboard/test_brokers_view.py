"""Pure parts of the brokers view: the lanes' "L2 · ISR 1,2,3", Kafka's lines in the event
feed, the broker cards, and the leaders-over-time figure."""

from __future__ import annotations

import re
from dataclasses import replace

from backend.contracts import BrokerView, ClusterEvent, PartitionView, Snapshot
from backend.contracts import ClusterEventType as T
from backend.contracts.control import BrokerNode
from dashboard import live_model as lm
from dashboard.figures import leadership_figure
from dashboard.panels import broker_card_html, brokers_html, kafka_text, lanes_html
from dashboard.pollers import Reading
from dashboard.theme import BROKER_PALETTE, broker_colour
from dashboard.views.brokers import managed_ids, managed_in, unavailable_reason, with_managed

UP3 = (BrokerView(1, "h:1", True, 2, 6), BrokerView(2, "h:2", True, 2, 6),
       BrokerView(3, "h:3", True, 2, 6))


def snap(ts: int = 1000, leaders: dict[int, int | None] | None = None,
         isr: dict[int, tuple[int, ...]] | None = None,
         brokers: tuple[BrokerView, ...] = UP3,
         events: tuple[ClusterEvent, ...] = ()) -> Snapshot:
    leaders = leaders if leaders is not None else {p: p % 3 + 1 for p in range(6)}
    isr = isr or {}
    parts = tuple(PartitionView(p, "ada", 0, 0, 0, None, leader=leader, replicas=(1, 2, 3),
                                isr=isr.get(p, (1, 2, 3)))
                  for p, leader in leaders.items())
    return Snapshot(taken_ms=ts, group="g", topic="t", state="Stable", protocol="classic",
                    assignor=None, generation=1, members=(), partitions=parts, streams=(),
                    rebalances=(), brokers=brokers, cluster_events=events,
                    partition_count=len(parts))


def body(html: str) -> str:
    """The lanes without the stylesheet before them."""
    return html.split("</style>", 1)[1]


def kafka_cells(html: str) -> list[str]:
    """Each lane's leader-and-ISR tag as the page reads it (its two halves joined)."""
    return [re.sub(r"<[^>]+>", "", cell)
            for cell in re.findall(r'<span class="kafka"[^>]*>(.*?)</span></span>', html)]


def test_lanes_name_leader_and_isr_on_a_multi_broker_cluster_only():
    html = lanes_html(snap())
    assert kafka_cells(html)[:3] == ["L1 · ISR 1,2,3", "L2 · ISR 1,2,3", "L3 · ISR 1,2,3"]
    assert "gs-kafka" in body(html) and "data-under" not in body(html)
    # one broker: the lanes stay as they were (no "L1 · ISR 1" on every lane)
    single = snap(brokers=(BrokerView(1, "h:1", True),))
    assert kafka_cells(lanes_html(single)) == [] and "gs-kafka" not in body(lanes_html(single))


def test_lanes_mark_a_short_isr_and_a_partition_without_leader():
    s = snap(leaders={0: 1, 1: None}, isr={0: (1, 3), 1: ()})
    html = lanes_html(s)
    assert kafka_cells(html) == ["L1 · ISR 1,3", "no leader · ISR –"]
    first, second = re.findall(r'<span class="kafka"[^>]*>', html)
    assert "data-under" in first and 'data-isr="1,3"' in first and 'data-leader="1"' in first
    assert "data-offline" in second and 'data-leader=""' in second
    # a partition whose metadata was not read says nothing rather than something wrong
    unknown = PartitionView(0, None, None, 0, 0, None)
    assert kafka_text(unknown) == ""


def test_cluster_feed_tells_a_kill_in_three_lines_and_a_restart_in_two():
    kill = (ClusterEvent(5000, T.BROKER_DOWN, "t", None, (2,)),
            *(ClusterEvent(5000, T.LEADER_CHANGED, "t", p, (1,), (2,), (1,)) for p in (1, 4)),
            *(ClusterEvent(5000, T.ISR_SHRUNK, "t", p, (2,), (1, 2, 3), (1, 3))
              for p in range(6)))
    back = (ClusterEvent(9000, T.BROKER_UP, "t", None, (2,)),
            *(ClusterEvent(11000, T.ISR_EXPANDED, "t", p, (2,), (1, 3), (1, 2, 3))
              for p in range(6)))
    items = lm.cluster_feed_items((*kill, *back))
    assert [i.text for i in items] == [
        "Broker 2 went down",
        "Leader moved: P1 2 → 1, P4 2 → 1",
        "Broker 2 left the ISR of P0, P1, P2, P3, P4, P5",
        "Broker 2 is up",
        "Broker 2 rejoined the ISR of P0, P1, P2, P3, P4, P5",
    ]
    assert {i.kind for i in items} <= lm.CLUSTER_KINDS and {i.replica for i in items} == {
        lm.KAFKA}
    # merged into the replicas' feed, newest first, and the filter can pick Kafka's lines
    feed = lm.feed_items((), (), (*kill, *back))
    assert feed[0].text.startswith("Broker 2 rejoined") and len(feed) == 5
    assert lm.filter_feed(feed, [lm.KAFKA]) == feed


def test_cluster_feed_bounds_a_long_partition_list_and_names_offline():
    shrunk = tuple(ClusterEvent(1, T.ISR_SHRUNK, "t", p, (3,), (1, 3), (1,)) for p in range(40))
    (item,) = lm.cluster_feed_items(shrunk)
    assert item.text.endswith(f"P{lm.MAX_LISTED_PARTITIONS - 1} and "
                              f"{40 - lm.MAX_LISTED_PARTITIONS} more")
    (gone,) = lm.cluster_feed_items((ClusterEvent(1, T.LEADER_CHANGED, "t", 0, (), (3,), ()),))
    assert gone.text == "Leader moved: P0 3 → no leader"


def test_broker_cards_say_up_down_and_only_the_troubles_there_are():
    down = BrokerView(2, None, False, leaders=0, replicas=6, out_of_sync=6)
    assert lm.broker_line(down) == "leads 0 · 6 replicas · 6 out of ISR"
    assert lm.broker_line(BrokerView(1, "h:1", True, 3, 6, under_replicated=3)) == \
        "leads 3 · 6 replicas · 3 under-replicated"
    card = broker_card_html(down)
    assert 'data-state="down"' in card and "never seen up" in card
    assert 'data-broker="2"' in card
    evil = BrokerView(7, "<script>x</script>:1", True)
    assert "<script>" not in brokers_html((evil,))
    assert lm.brokers_summary((*UP3[:2], down), 6, 0) == \
        "2 of 3 brokers up · 6 under-replicated · 0 offline partitions"
    assert lm.multi_broker(UP3) and not lm.multi_broker(UP3[:1])


def test_broker_colours_are_stable_by_id_and_none_is_grey():
    assert broker_colour(1) == BROKER_PALETTE[0] == broker_colour(1 + len(BROKER_PALETTE))
    assert len({broker_colour(i) for i in (1, 2, 3)}) == 3
    assert broker_colour(None) != broker_colour(1)


def test_brokers_the_supervisor_runs_stay_listed_when_kafka_forgets_them():
    shown = with_managed(UP3[:1], frozenset({1, 2, 3}))
    assert [(b.broker_id, b.up) for b in shown] == [(1, True), (2, False), (3, False)]

    nodes = [BrokerNode(id=i, port=9092 + i, controller_port=None, pid=None, alive=i == 1,
                        controller=False) for i in (1, 3)]
    assert managed_ids(nodes) == [1, 3]


def _node(i: int) -> BrokerNode:
    return BrokerNode(id=i, port=9092 + i, controller_port=None, pid=None, alive=True,
                      controller=False)


def test_broker_buttons_survive_a_failed_probe_and_say_why_when_there_never_was_an_answer():
    nodes = (_node(1), _node(2))
    good = Reading(nodes, None, 0.0, 0.1, nodes)
    slow = Reading(None, "supervisor at http://x not reachable: timed out", 0.0, 5.0, nodes)
    never = Reading(None, "supervisor at http://x not reachable: timed out", 0.0, 5.0, None)
    none_run = Reading((), None, 0.0, 0.1, ())  # an external cluster, or no supervisor here

    assert managed_in(good) == managed_in(slow) == frozenset({1, 2})
    assert managed_in(never) is None and managed_in(none_run) is None
    assert unavailable_reason(good) is None and unavailable_reason(slow) is None
    assert unavailable_reason(none_run) is None
    assert unavailable_reason(never) == "supervisor at http://x not reachable: timed out"


def test_leadership_figure_follows_leaders_and_marks_brokers_down_and_up():
    before = snap(1000)
    after = replace(snap(5000, leaders={p: 1 if p % 3 == 1 else p % 3 + 1 for p in range(6)}),
                    cluster_events=(ClusterEvent(4000, T.BROKER_DOWN, "t", None, (2,)),
                                    ClusterEvent(4500, T.BROKER_UP, "t", None, (2,))))
    fig = leadership_figure([before, after], revision="x")
    names = [t.name for t in fig.data]
    assert names == ["broker 1", "broker 2", "broker 3"]
    # partitions 1 and 4 were led by 2 until the change, then by 1
    by_name = {t.name: list(t.y) for t in fig.data}
    assert by_name["broker 2"] == ["P1", "P4"] and by_name["broker 1"].count("P1") == 1
    assert [a.text for a in fig.layout.annotations] == ["broker 2 down", "broker 2 up"]
    assert fig.layout.uirevision == "x"

"""HTML blocks of the Live page: partition lanes with stream chips and lag bars, replica cards.

Plain strings (one st.html call per panel) because a room needs big readable chips more than
chart interactivity, and building a string for 64 lanes and 1 000 chips takes about a
millisecond. Every name is escaped: stream ids come from message keys, i.e. from anyone.

Drawn for a projector: lag bars take their partition's health colour (green when the owner
keeps up), participants' members are light dashed chips beside the solid replica colours
(theme.member_style), and a partition that just changed owner is outlined in yellow with
"from <previous owner>" for a few seconds (live_model.handovers). Cells keep their plain
class names (`p`, `own`) and carry the highlight as data attributes, so anything that reads
the lanes by class still does.

On a cluster of more than one broker each partition cell also names Kafka's side of the
partition, "L2 · ISR 1,2,3": its leader and in-sync replicas, amber while the ISR is short of
the replica set, red while the partition has no leader. On one broker it would say "L1 · ISR
1" on every lane, which teaches nothing, so the single-broker demo keeps its lanes as they were.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from html import escape

from backend.contracts import BrokerView, PartitionView, Snapshot
from dashboard.live_model import Handover, ReplicaCard, assignment_text, broker_line
from dashboard.theme import (
    BROKER_DOWN,
    BROKER_UP,
    OFFLINE_FILL,
    PARTICIPANT_TEXT,
    UNDER_REPLICATED_FILL,
    broker_colour,
    health_fill,
    member_style,
)

MAX_CHIPS_PER_LANE = 40
HANDOVER_OUTLINE = "#facc15"  # yellow: neither a health nor a member colour

LANE_CSS = """
<style>
.gs-lanes { display:grid; gap:0.25rem 0.6rem; align-items:center; font-size:1rem;
            grid-template-columns: 3.2rem minmax(4.5rem, 9rem) minmax(4.5rem, 1fr)
                                   minmax(5.5rem, 11rem); }
.gs-lanes > div { min-width:0; }
.gs-lanes .p { font-weight:800; font-size:1.1rem; border-radius:0.4rem; text-align:center; }
.gs-lanes.gs-kafka { grid-template-columns: minmax(5.5rem, 8.2rem) minmax(4.5rem, 9rem)
                                             minmax(4.5rem, 1fr) minmax(5.5rem, 11rem); }
/* leader and in-sync replicas: on one line where the column allows, else the ISR under the
   leader, never cut */
.gs-lanes .p .kafka { display:block; font-size:0.85rem; font-weight:700;
                      font-family:ui-monospace,monospace; border-radius:0.3rem; }
.gs-lanes .p .kafka > span { white-space:nowrap; }
.gs-lanes .p .kafka[data-under] { background:KAFKA_UNDER; color:DARK_TEXT; }
.gs-lanes .p .kafka[data-offline] { background:KAFKA_OFFLINE; color:#fff; }
.gs-lanes .own { color:#fff; border-radius:0.4rem; padding:0.15rem 0.5rem; font-weight:700;
                 white-space:nowrap; overflow:hidden; text-overflow:ellipsis;
                 border:0.14rem solid transparent; }
.gs-lanes .own .from { display:block; font-size:0.8rem; font-weight:600; }
.gs-lanes .chips { line-height:1.9; min-height:1.9rem; border-radius:0.4rem; padding:0 0.3rem; }
.gs-lanes .p[data-moved] { background:HANDOVER; color:DARK_TEXT; }
.gs-lanes .own[data-moved] { outline:0.25rem solid HANDOVER; outline-offset:0.1rem; }
.gs-lanes .chips[data-moved] { background:rgba(250,204,21,0.22); }
.gs-chip { display:inline-block; padding:0 0.45rem; margin:0 0.15rem; border-radius:0.7rem;
           font-size:0.85rem; font-family:ui-monospace,monospace; color:#fff; white-space:nowrap;
           line-height:1.5; border:0.14rem solid transparent; }
.gs-lag { position:relative; min-height:1.3rem; border-radius:0.3rem;
          background:rgba(127,127,127,0.18); display:flex; justify-content:flex-end;
          align-items:center; }
.gs-lag span { position:absolute; left:0; top:0; bottom:0; border-radius:0.3rem;
               background:#16a34a; }
.gs-lag em { position:relative; margin:0.1rem 0.2rem; font-style:normal; font-size:0.85rem;
             font-weight:700; line-height:1.1rem; padding:0 0.3rem; border-radius:0.3rem;
             background:rgba(255,255,255,0.85); color:DARK_TEXT; text-align:right;
             overflow-wrap:anywhere; }
.gs-cards { display:grid; grid-template-columns:repeat(auto-fill, minmax(15rem, 1fr));
            gap:0.6rem; }
.gs-card { border-left:0.6rem solid var(--c); border-radius:0.5rem; padding:0.4rem 0.7rem;
           background:rgba(127,127,127,0.10); }
.gs-card.ext { border:0.14rem dashed var(--o); border-left:0.6rem solid var(--c); }
.gs-card .n { font-size:1.3rem; font-weight:800; }
.gs-card .s { float:right; font-weight:700; border-radius:0.6rem; padding:0 0.5rem;
              font-size:0.85rem; color:#fff; }
.gs-card .d { font-size:0.95rem; }
.gs-card.dead { opacity:0.55; }
.gs-brokers { display:grid; grid-template-columns:repeat(auto-fill, minmax(14rem, 1fr));
              gap:0.5rem; }
.gs-broker { border-left:0.6rem solid var(--c); border-radius:0.5rem; padding:0.35rem 0.7rem;
             background:rgba(127,127,127,0.10); }
.gs-broker .n { font-size:1.2rem; font-weight:800; white-space:nowrap; }
.gs-broker .s { float:right; font-weight:700; border-radius:0.6rem; padding:0 0.5rem;
                font-size:0.85rem; color:#fff; }
.gs-broker .d { font-size:0.9rem; }
.gs-broker.down { background:rgba(153,27,27,0.12); }
.gs-broker.down .n { text-decoration:line-through; }
@media (max-width: 640px) {  /* a phone: partition, owner and lag, the streams under them */
  .gs-lanes, .gs-lanes.gs-kafka { gap:0.25rem 0.4rem; grid-auto-flow:row dense;
    grid-template-columns: minmax(2.4rem, auto) minmax(5.5rem, 1fr) 6rem; }
  .gs-lanes .chips { grid-column: 1 / -1; }
  .gs-lanes > div:nth-child(3) { display:none; }  /* the "streams" heading */
}
</style>
""".replace("HANDOVER", HANDOVER_OUTLINE).replace("DARK_TEXT", PARTICIPANT_TEXT).replace(
    "KAFKA_UNDER", UNDER_REPLICATED_FILL).replace("KAFKA_OFFLINE", OFFLINE_FILL)

STATUS_COLOURS = {"alive": "#047857", "idle": "#b45309", "dead": "#991b1b",
                  "external": "#475569"}


def lanes_html(snap: Snapshot, external: Collection[str] = (),
               moved: Mapping[int, Handover] | None = None) -> str:
    """One lane per partition: owner, its streams as chips, its lag as a health-coloured bar.

    `external` holds the client ids drawn in the participants' palette
    (live_model.external_members); `moved` the partitions to highlight as just handed over
    (live_model.handovers). Both default to nothing, e.g. for the Timeline page's past lanes.
    """
    streams: dict[int, list[str]] = {}
    for s in snap.streams:
        streams.setdefault(s.partition, []).append(s.stream_id)
    moved = moved or {}
    kafka = len(snap.brokers) > 1
    max_lag = max((p.lag_messages for p in snap.partitions), default=0) or 1
    rows: list[str] = []
    for p in sorted(snap.partitions, key=lambda pv: pv.partition):
        owner = p.owner
        look = member_style(owner, owner in external)  # grey when unowned
        chip_css = look.css()
        ids = sorted(streams.get(p.partition, ()))
        chips = "".join(f'<span class="gs-chip" style="{chip_css}">{escape(i)}</span>'
                        for i in ids[:MAX_CHIPS_PER_LANE])
        if len(ids) > MAX_CHIPS_PER_LANE:
            chips += f'<span class="gs-muted"> +{len(ids) - MAX_CHIPS_PER_LANE} more</span>'
        width = 100.0 * p.lag_messages / max_lag
        secs = f" · {p.lag_seconds:.1f} s" if p.lag_seconds is not None else ""
        word = "" if p.health == "OK" else f" · {escape(p.health)}"
        label = escape(owner) if owner else "unowned"
        hand = moved.get(p.partition)
        mark = own_title = from_tag = ""
        if hand is not None and hand.owner == owner:
            ago = max(0.0, (snap.taken_ms - hand.at_ms) / 1000.0)
            mark = ' data-moved="1"'
            own_title = (f' title="moved from {escape(hand.previous)} to {escape(hand.owner)} '
                         f'{ago:.0f} s ago"')
            from_tag = f'<span class="from">from {escape(hand.previous)}</span>'
        side = kafka_tag(p) if kafka else ""
        rows.append(
            f'<div class="p"{mark} title="health {escape(p.health)}">P{p.partition}{side}</div>'
            f'<div class="own"{mark}{own_title} style="{chip_css}">{label}{from_tag}</div>'
            f'<div class="chips"{mark} style="box-shadow: inset 0.25rem 0 0 {look.outline}">'
            f'{chips}</div>'
            f'<div class="gs-lag" title="lag {p.lag_messages} messages{secs}, health '
            f'{escape(p.health)}"><span style="width:{width:.1f}%;'
            f'background:{health_fill(p.health)}"></span>'
            f'<em>{p.lag_messages:,}{secs}{word}</em></div>'
        )
    header = ('<div><b>part.</b></div><div><b>owner</b></div><div><b>streams</b></div>'
              '<div><b>lag</b></div>')
    grid = "gs-lanes gs-kafka" if kafka else "gs-lanes"
    return (f'{LANE_CSS}<div class="{grid}" data-testid="gs-lanes">{header}'
            f'{"".join(rows)}</div>')


def kafka_text(p: PartitionView) -> str:
    """"L2 · ISR 1,2,3"; "no leader · ISR 3" when offline; "" when not known."""
    if not p.replicas:
        return ""
    leader = "no leader" if p.leader is None else f"L{p.leader}"
    return f"{leader} · ISR {','.join(map(str, sorted(p.isr))) or '–'}"  # ids in order


def kafka_tag(p: PartitionView) -> str:
    """The partition cell's second line: leader and ISR, marked when short or offline."""
    text = kafka_text(p)
    if not text:
        return ""
    state = " data-offline" if p.offline else " data-under" if p.under_replicated else ""
    title = (f"leader {'none' if p.leader is None else p.leader}, replicas "
             f"{','.join(map(str, p.replicas))}, in sync {','.join(map(str, p.isr)) or 'none'}")
    leader, _, isr = text.partition(" · ")  # two unbreakable halves: wraps between, if at all
    return (f'<span class="kafka"{state} data-leader="{"" if p.leader is None else p.leader}" '
            f'data-isr="{",".join(map(str, p.isr))}" title="{title}"><span>{leader} ·</span> '
            f'<span>{isr}</span></span>')


def cards_html(cards: list[ReplicaCard], own: bool = True) -> str:
    """One card per member. The msg/s and batch line comes from groupscope replicas'
    heartbeats, so only a groupscope group (`own`) has it (a share replica's adds the records
    it held unacknowledged, on average); a KIP-848 member still moving towards its target
    assignment shows both ("P1,P2 → target P1,P2,P3")."""
    out: list[str] = []
    for c in cards:
        look = member_style(c.name, c.external)
        if c.target is not None and sorted(c.target) != sorted(c.partitions):
            parts = escape(assignment_text(c.partitions, c.target))
        else:
            parts = ", ".join(str(p) for p in c.partitions) or "none"
        rate = f"{c.rate:,.0f} msg/s" if c.rate is not None else "– msg/s"
        batch = f"batch {c.last_batch_ms:,.0f} ms" if c.last_batch_ms is not None else "batch –"
        held = f" · {c.in_flight:,.0f} in flight" if c.in_flight is not None else ""
        stats = f'<div class="d">{rate} · {batch}{held}</div>' if own else ""
        detail = f'<div class="d gs-muted">{escape(c.detail)}</div>' if c.detail else ""
        out.append(
            f'<div class="gs-card {c.status}{" ext" if c.external else ""}" '
            f'style="--c:{look.fill};--o:{look.outline}" data-replica="{escape(c.name)}">'
            f'<span class="s" style="background:{STATUS_COLOURS.get(c.status, "#475569")}">'
            f'{c.status}</span><div class="n">{escape(c.name)}</div>'
            f'<div class="d">partitions <b>{parts}</b> · <b>{c.streams}</b> streams</div>'
            f'{stats}{detail}</div>'
        )
    return f'{LANE_CSS}<div class="gs-cards">{"".join(out)}</div>'


def broker_card_html(b: BrokerView) -> str:
    """One broker: id in its stable colour, up or down, address, what it leads and holds."""
    state = "up" if b.up else "down"
    address = escape(b.address) if b.address else "address unknown (never seen up)"
    return (f'<div class="gs-broker {state}" style="--c:{broker_colour(b.broker_id)}" '
            f'data-broker="{b.broker_id}" data-state="{state}">'
            f'<span class="s" style="background:{BROKER_UP if b.up else BROKER_DOWN}">'
            f'{state}</span><div class="n">broker {b.broker_id}</div>'
            f'<div class="d gs-muted">{address}</div>'
            f'<div class="d">{escape(broker_line(b))}</div></div>')


def brokers_html(brokers: list[BrokerView] | tuple[BrokerView, ...]) -> str:
    """Every broker as a card, in one grid (no controls: a production cluster's view)."""
    cards = "".join(broker_card_html(b) for b in brokers)
    return f'{LANE_CSS}<div class="gs-brokers" data-testid="gs-brokers">{cards}</div>'

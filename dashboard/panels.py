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
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from html import escape

from backend.contracts import Snapshot
from dashboard.live_model import Handover, ReplicaCard
from dashboard.theme import PARTICIPANT_TEXT, health_fill, member_style

MAX_CHIPS_PER_LANE = 40
HANDOVER_OUTLINE = "#facc15"  # yellow: neither a health nor a member colour

LANE_CSS = """
<style>
.gs-lanes { display:grid; grid-template-columns: 3.2rem 9rem 1fr 11rem; gap:0.25rem 0.6rem;
            align-items:center; font-size:1rem; }
.gs-lanes .p { font-weight:800; font-size:1.1rem; border-radius:0.4rem; text-align:center; }
.gs-lanes .own { color:#fff; border-radius:0.4rem; padding:0.15rem 0.5rem; font-weight:700;
                 white-space:nowrap; overflow:hidden; text-overflow:ellipsis;
                 border:0.14rem solid transparent; }
.gs-lanes .own .from { display:block; font-size:0.8rem; font-weight:600; }
.gs-lanes .chips { line-height:1.9; min-height:1.9rem; border-radius:0.4rem; padding:0 0.3rem; }
.gs-lanes .p[data-moved] { background:HANDOVER; color:DARK_TEXT; }
.gs-lanes .own[data-moved] { outline:0.25rem solid HANDOVER; outline-offset:0.1rem; }
.gs-lanes .chips[data-moved] { background:rgba(250,204,21,0.22); }
.gs-chip { display:inline-block; padding:0 0.45rem; margin:0 0.15rem; border-radius:0.7rem;
           font-size:0.85rem; font-family:ui-monospace,monospace; color:#fff;
           line-height:1.5; border:0.14rem solid transparent; }
.gs-lag { position:relative; height:1.3rem; border-radius:0.3rem;
          background:rgba(127,127,127,0.18); }
.gs-lag span { position:absolute; left:0; top:0; bottom:0; border-radius:0.3rem;
               background:#16a34a; }
.gs-lag em { position:absolute; right:0.2rem; top:0.1rem; font-style:normal; font-size:0.85rem;
             font-weight:700; line-height:1.1rem; padding:0 0.3rem; border-radius:0.3rem;
             background:rgba(255,255,255,0.85); color:DARK_TEXT; }
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
</style>
""".replace("HANDOVER", HANDOVER_OUTLINE).replace("DARK_TEXT", PARTICIPANT_TEXT)

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
        rows.append(
            f'<div class="p"{mark} title="health {escape(p.health)}">P{p.partition}</div>'
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
    return f'{LANE_CSS}<div class="gs-lanes" data-testid="gs-lanes">{header}{"".join(rows)}</div>'


def cards_html(cards: list[ReplicaCard]) -> str:
    out: list[str] = []
    for c in cards:
        look = member_style(c.name, c.external)
        parts = ", ".join(str(p) for p in c.partitions) or "none"
        rate = f"{c.rate:,.0f} msg/s" if c.rate is not None else "– msg/s"
        batch = f"batch {c.last_batch_ms:,.0f} ms" if c.last_batch_ms is not None else "batch –"
        detail = f'<div class="d gs-muted">{escape(c.detail)}</div>' if c.detail else ""
        out.append(
            f'<div class="gs-card {c.status}{" ext" if c.external else ""}" '
            f'style="--c:{look.fill};--o:{look.outline}" data-replica="{escape(c.name)}">'
            f'<span class="s" style="background:{STATUS_COLOURS.get(c.status, "#475569")}">'
            f'{c.status}</span><div class="n">{escape(c.name)}</div>'
            f'<div class="d">partitions <b>{parts}</b> · <b>{c.streams}</b> streams</div>'
            f'<div class="d">{rate} · {batch}</div>{detail}</div>'
        )
    return f'{LANE_CSS}<div class="gs-cards">{"".join(out)}</div>'

"""What the Lab page draws, from the supervisor's `LabState` (pure: no Streamlit, no I/O).

One compact row of lanes per group, one cell per partition, coloured by the replica that
processed its latest batch and named after it (so no fact rides on colour alone), grey while
the partition processes nothing; a stopwatch per group; the scoreboard and each protocol's
card with its numbers from this run.
"""

from __future__ import annotations

from html import escape

from backend.contracts.control import LabGroup, LabState
from backend.contracts.lab import LAB_PROTOCOLS, Score
from dashboard.theme import UNOWNED, member_style

LAB_CSS = """
<style>
.gs-lab-row { display:flex; flex-wrap:wrap; gap:0.25rem; margin:0.1rem 0 0.2rem 0; }
.gs-lab-row .cell { min-width:4.6rem; padding:0.1rem 0.35rem; border-radius:0.4rem;
                    font-size:0.95rem; font-weight:700; line-height:1.25; white-space:nowrap; }
.gs-lab-row .cell .p { display:block; font-size:0.8rem; font-weight:600; opacity:0.9; }
.gs-lab-row .cell[data-idle] { background:IDLE !important; color:#111827 !important;
                               border-style:dashed !important; }
.gs-watch { font-size:1.7rem; font-weight:800; font-family:ui-monospace,monospace;
            white-space:nowrap; }
.gs-watch[data-running] { color:#b45309; }
</style>
""".replace("IDLE", UNOWNED)

PHASE_LINES = {
    "starting": "Starting every group's replicas…",
    "warming": "Warming up: every group must process every partition before an event.",
    "baseline": "Taking each group's normal cadence, what a stall is measured against…",
    "ready": "Ready: apply an event to every group at once.",
    "measuring": "Measuring: each stopwatch runs until its group processes every partition "
                 "again.",
}
EVENT_BUTTONS: dict[str, str] = {
    "kill": "Kill one",
    "stop": "Stop one",
    "add": "Add one",
    "bounce": "Rolling restart",
    "partitions": "Add partitions",
}


def lanes_html(group: LabGroup) -> str:
    """One line of partition cells: 'ada' over 'P3', grey and dashed while idle."""
    cells = []
    for lane in group.lanes:
        style = member_style(lane.owner)
        idle = " data-idle" if lane.idle else ""
        who = escape(lane.owner or "nobody")
        cells.append(f'<span class="cell" style="{style.css()}"{idle} '
                     f'data-testid="gs-lab-cell" title="partition {lane.partition}: {who}'
                     f'{" (idle)" if lane.idle else ""}">{who}'
                     f'<span class="p">P{lane.partition}{" · idle" if lane.idle else ""}'
                     f'</span></span>')
    return (f'<div class="gs-lab-row" data-testid="gs-lab-lanes" '
            f'data-lab="{escape(group.lab)}">{"".join(cells)}</div>')


def stopwatch_html(group: LabGroup, phase: str) -> str:
    if group.stopwatch_s is None:
        text = "–" if group.score is None or group.score.stalled else "0.0 s"
        return f'<span class="gs-watch" data-testid="gs-lab-watch">{text}</span>'
    running = phase == "measuring" and not group.over
    mark = " data-running" if running else ""
    return (f'<span class="gs-watch" data-testid="gs-lab-watch"{mark}>'
            f'{group.stopwatch_s:.1f} s</span>')


def replicas_line(group: LabGroup) -> str:
    n = len(group.replicas)
    return f"{n} replica{'' if n == 1 else 's'}: {', '.join(group.replicas) or 'none'}"


def headline(state: LabState) -> str:
    line = PHASE_LINES[state.phase]
    if state.event and state.since_event_s is not None and state.phase == "measuring":
        line += f" `{state.event}` applied {state.since_event_s:.0f} s ago."
    elif state.event and state.window_s is not None:
        line += f" Last event `{state.event}`, measured over {state.window_s:.0f} s."
    return line


def machine_line(state: LabState) -> str:
    groups = len(state.groups)
    replicas = sum(len(g.replicas) for g in state.groups)
    busy = ("" if state.busy_cores is None or not state.cores
            else f"; the machine: {state.busy_cores:.1f} of {state.cores} cores busy")
    return (f"{groups} groups, {replicas} replicas on `{state.topic}` "
            f"({state.partitions} partitions, {state.rate:.0f} msg/s){busy}")


SCORE_COLUMNS = ("protocol", "partitions stalled", "partition-seconds stalled",
                 "longest stall (s)", "every partition back after (s)", "partitions moved",
                 "records processed twice")


def score_rows(state: LabState) -> list[dict[str, object]]:
    """The scoreboard: one row per group with a measurement."""
    rows = []
    for g in state.groups:
        s = g.score
        if s is None:
            continue
        rows.append(dict(zip(SCORE_COLUMNS, (
            LAB_PROTOCOLS[g.lab].title, f"{s.stalled} of {s.partitions}", s.stalled_s,
            s.longest_s, "not yet" if s.recovered_s is None else s.recovered_s, s.moved,
            s.twice), strict=True)))
    return rows


def card_markdown(lab: str, score: Score | None) -> str:
    """A protocol's lesson beside what it measured in this run."""
    p = LAB_PROTOCOLS[lab]
    text = f"**{p.title}**  \n{p.does}.  \n*Choose it for* {p.choose}."
    if score is not None:
        back = ("never within the measurement" if score.recovered_s is None
                else f"{score.recovered_s:g} s")
        text += (f"  \n**This run:** {score.stalled} of {score.partitions} partitions "
                 f"stalled, {score.stalled_s:g} partition-seconds, every partition back "
                 f"after {back}, {score.moved} moved.")
    return text

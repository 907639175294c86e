"""The supervisor's replicas, as the Live view and the leaderboard both read them.

Its own module so both views import it and neither imports the other: the Live view shows
the leaderboard, and the leaderboard marks dead and external members with the same list.
"""

from __future__ import annotations

from backend.paths import data_dir
from dashboard.context import ViewContext
from dashboard.pollers import Reading, supervisor_poller


def supervised_replicas(ctx: ViewContext) -> tuple:
    """The supervisor's replicas when it manages this group (for dead / external cards);
    none on a page that only watches, whose group the stack's supervisor does not run."""
    if ctx.watching or ctx.read_only:
        return ()

    reading: Reading | None = supervisor_poller(str(data_dir())).latest()
    if reading is None or not reading.ok or reading.value is None:
        return ()
    status = reading.value
    return status.replicas if status.group == ctx.group else ()

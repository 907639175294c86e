"""The Status page's Spark executors: which JVMs run the replicas' batches, and how much.

On `local[*]` that is the driver alone, running every task on its cores; on a cluster
(`groupscope spark --workers N`, or any Spark Connect endpoint whose driver UI is reachable)
one row per executor -- id, host, state, cores, tasks running, done and failed -- with the
driver listed first, running none. The list comes from Spark's own REST API through
`backend.spark.executors`, on one shared poller thread per engine (this module's, as the
other pollers are in dashboard/pollers.py); the page only draws its latest reading.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from backend.spark.executors import ENV_UI, ExecutorInfo, ExecutorsProbe
from dashboard.pollers import Poller, Reading

POLL_S = 5.0  # a REST call on loopback; a new Connect session only when the UI must be found


def executor_rows(executors: Sequence[ExecutorInfo]) -> list[dict[str, object]]:
    """One table row per executor, in Spark's words where it has them."""
    return [{
        "executor": e.id,
        "host": e.host_port,
        "state": e.state if e.active or not e.remove_reason else f"dead: {e.remove_reason}",
        "cores": e.cores,
        "active tasks": e.active_tasks,
        "completed tasks": e.completed_tasks,
        "failed tasks": e.failed_tasks,
    } for e in executors]


def headline(executors: Sequence[ExecutorInfo]) -> str:
    """What the list says in one sentence: local mode, or how many executors run tasks."""
    workers = [e for e in executors if not e.is_driver]
    if not workers:
        cores = sum(e.cores for e in executors if e.is_driver)
        return f"local mode: the driver runs every task, on **{cores}** core(s)"
    active = [e for e in workers if e.active]
    dead = len(workers) - len(active)
    text = (f"**{len(active)}** executor(s) beside the driver, "
            f"**{sum(e.cores for e in active)}** core(s) for tasks")
    return text + (f", {dead} gone" if dead else "")


def executors_poller(remote: str, interval_s: float = POLL_S) -> Poller:
    return _executors_poller(remote, interval_s)


def _release(poller: Poller) -> None:
    poller.stop(join_s=0.0)


@st.cache_resource(show_spinner=False, max_entries=16, on_release=_release)
def _executors_poller(remote: str, interval_s: float) -> Poller:
    return Poller(f"executors:{remote}", ExecutorsProbe(remote), interval_s)


def executors_section(remote: str) -> None:
    """Drawn inside the Status page's refreshing fragment."""
    reading: Reading | None = executors_poller(remote).latest(wait_s=1.0)
    with st.container(border=True, key="spark-executors"):
        st.subheader("Spark executors")
        if reading is None:
            st.badge("checking…", icon=":material/hourglass_top:", color="gray")
            return
        shown = reading.value if reading.ok else reading.last_ok
        if not reading.ok:
            st.caption(f"Executors not listed: {reading.error}. The engine's driver serves "
                       f"them on its web UI; set {ENV_UI} if it is not on the Spark Connect "
                       f"host.")
            if shown:
                st.caption("The list below is from the last successful check.")
        if shown:
            st.markdown(headline(shown))
            st.dataframe(pd.DataFrame(executor_rows(shown)), hide_index=True, width="stretch")

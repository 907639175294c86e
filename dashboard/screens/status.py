"""Status page: is the broker up, is Spark up, which topics and groups exist.

Every check is real and bounded in time; it runs on a shared poller thread, and this page only
renders the latest reading, refreshing itself so an error clears once the cluster is back.
"""

from __future__ import annotations

import streamlit as st

from backend.spark.session import spark_remote
from dashboard.checks import ClusterTarget
from dashboard.context import env_context
from dashboard.pollers import cluster_poller, engine_poller
from dashboard.views.brokers import status_section
from dashboard.views.executors import executors_section
from dashboard.views.status import render_status

st.title("Cluster status")


@st.fragment(run_every=2.0)
def _panel() -> None:
    target = ClusterTarget.from_env()
    remote = spark_remote()
    cluster = cluster_poller(target).latest(wait_s=5.0)
    engine = engine_poller(remote).latest(wait_s=5.0)
    render_status(target, cluster, remote, engine)
    executors_section(remote)
    status_section(env_context(), cluster)


_panel()

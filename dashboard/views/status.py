"""Rendering of the Status page from poller readings (no I/O here, so it is cheap to rerun)."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from dashboard.checks import ClusterOverview, ClusterTarget, EngineStatus
from dashboard.pollers import Reading
from dashboard.theme import STATE_COLOURS


def _age(reading: Reading) -> str:
    return f"checked {reading.age_s(time.time()):.0f} s ago in {reading.duration_s:.1f} s"


def _n(count: int, noun: str) -> str:
    return f"**{count}** {noun}{'' if count == 1 else 's'}"


def render_status(target: ClusterTarget, cluster: Reading[ClusterOverview] | None,
                  remote: str, engine: Reading[EngineStatus] | None) -> None:
    kafka_col, spark_col = st.columns(2)
    with kafka_col, st.container(border=True, key="kafka-status"):
        st.subheader("Kafka")
        st.caption(target.describe())
        if cluster is None:
            st.badge("checking…", icon=":material/hourglass_top:", color="gray")
        elif cluster.ok and cluster.value is not None:
            ov = cluster.value
            st.badge("reachable", icon=":material/check_circle:", color="green")
            st.markdown(f"{_n(ov.brokers, 'broker')}, {_n(len(ov.topics), 'topic')}, "
                        f"{_n(len(ov.groups), 'consumer group')}")
            st.caption(_age(cluster))
        else:
            st.badge("unreachable", icon=":material/error:", color="red")
            st.error(cluster.error or "unknown error", icon=":material/cloud_off:")
            st.caption(_age(cluster) + " · retrying every 2 s")
    with spark_col, st.container(border=True, key="spark-status"):
        st.subheader("Spark engine")
        st.caption(f"{remote} · Spark Connect")
        if engine is None:
            st.badge("checking…", icon=":material/hourglass_top:", color="gray")
        elif engine.ok and engine.value is not None:
            st.badge("reachable", icon=":material/check_circle:", color="green")
            st.markdown(f"Spark **{engine.value.version}** answered a test query")
            st.caption(_age(engine))
        else:
            st.badge("unreachable", icon=":material/error:", color="red")
            st.error(engine.error or "unknown error", icon=":material/cloud_off:")
            st.caption(_age(engine) + " · retrying every 10 s")

    overview = cluster.value if cluster is not None and cluster.ok else (
        cluster.last_ok if cluster is not None else None)
    if overview is None:
        return
    if cluster is not None and not cluster.ok:
        st.caption("Topics and groups below are from the last successful check.")
    topics_col, groups_col = st.columns(2)
    with topics_col:
        st.subheader("Topics")
        show_internal = st.toggle("show internal topics", value=False, key="status_internal")
        rows = [{"topic": t.name, "partitions": t.partitions}
                for t in overview.topics if show_internal or not t.internal]
        if rows:
            st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        else:
            st.info("No topics yet.")
    with groups_col:
        st.subheader("Consumer groups")
        rows = [{"group": g.group_id, "state": g.state, "type": g.type}
                for g in overview.groups]
        if rows:
            st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
            states = sorted({g.state for g in overview.groups})
            st.markdown(" ".join(
                f":{STATE_COLOURS.get(s, 'gray')}-badge[{s}: "
                f"{sum(g.state == s for g in overview.groups)}]" for s in states))
        else:
            st.info("No consumer groups yet.")

"""Watch page: connect to any cluster, pick a consumer group, see the Live view read-only.

`groupscope watch --bootstrap … [--kafka-config …] [--group …]` opens here with the cluster
from its flags and every control hidden. Passwords stay in the properties file on the server;
the page shows only KafkaSettings.describe().
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard.checks import ClusterTarget
from dashboard.context import ENV_GROUP, WATCH_KEY, ViewContext, env_context, read_only_env
from dashboard.pollers import cluster_poller
from dashboard.views.live import render_live

st.title("Watch a consumer group")
base = env_context()
chosen: ViewContext | None = st.session_state.get(WATCH_KEY)
target = chosen.target if chosen else base.target


def _connect_form(target: ClusterTarget) -> ClusterTarget:
    """Choose a cluster by bootstrap and a properties file on this server.

    Only in the full dashboard: `groupscope watch` fixes the cluster from its flags, so a
    viewer can neither repoint the server nor probe which files exist on it."""
    with st.form("watch_connect"):
        bootstrap = st.text_input("bootstrap servers", value=target.bootstrap,
                                  placeholder="host1:9092,host2:9092")
        config = st.text_input("client.properties file on this server (SASL/SSL)",
                               value=target.kafka_config or "",
                               placeholder="/path/to/client.properties")
        if st.form_submit_button("Connect"):
            if config and not Path(config).expanduser().is_file():
                st.error(f"{config}: no such file on the dashboard's server")
            elif not bootstrap.strip() and not config:
                st.error("Give bootstrap servers or a properties file that names them.")
            else:
                target = ClusterTarget(bootstrap.strip(),
                                       str(Path(config).expanduser().resolve()) if config
                                       else None, external=True)
                st.session_state[WATCH_KEY] = None
                st.session_state["gs_watch_target"] = target
    return st.session_state.get("gs_watch_target", target)


with st.expander("Cluster", expanded=not read_only_env() and chosen is None):
    if not read_only_env():
        target = _connect_form(target)
    st.caption(f"Connected to {target.describe()} · read-only: groupscope never joins, "
               f"commits or changes anything on this cluster")


@st.fragment(run_every=3.0)
def _groups() -> None:
    reading = cluster_poller(target).latest(wait_s=5.0)
    if reading is None:
        st.info("Connecting…")
        return
    if not reading.ok:
        st.error(reading.error or "unknown error", icon=":material/cloud_off:")
    overview = reading.value or reading.last_ok
    if overview is None:
        return
    # offsets-only groups too (no member protocol: Spark, Flink, tools that only commit):
    # the Groups page lists them with their lag, and opens them here
    groups = list(overview.groups)
    ids = [g.group_id for g in groups]
    if chosen is not None and chosen.group not in ids:  # opened from Groups, not listed yet
        ids.insert(0, chosen.group)
    if not ids:
        st.info("No consumer groups on this cluster.")
        return
    preferred = (chosen.group if chosen else None) or base.group
    default = ids.index(preferred) if preferred in ids else 0
    labels = {g.group_id: f"{g.group_id} · {g.state} · {g.type}"
              + (" · offsets only" if g.simple else "") for g in groups}
    pick = st.selectbox("consumer group", ids, index=default, key="watch_group",
                        format_func=lambda g: labels.get(g, g))
    ctx = ViewContext(target, pick, None, read_only=True, watching=target != base.target)
    if st.session_state.get(WATCH_KEY) != ctx:
        st.session_state[WATCH_KEY] = ctx
        st.rerun()


_groups()
ctx = st.session_state.get(WATCH_KEY)
if isinstance(ctx, ViewContext):
    render_live(ctx)
elif read_only_env() and base.group:
    st.caption(f"Waiting for group {base.group} ({ENV_GROUP}) to appear…")

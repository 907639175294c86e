"""Live page: the group as it is now — lanes, replicas, events, throughput — with controls."""

from __future__ import annotations

import streamlit as st

from dashboard.context import env_context
from dashboard.controls import render_controls
from dashboard.views.live import render_live

ctx = env_context()  # the local stack; the Watch page shows other clusters
with st.sidebar:
    render_controls(ctx)
render_live(ctx)

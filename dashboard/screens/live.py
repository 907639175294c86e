"""Live page: the group as it is now — lanes, replicas, events, throughput — with controls."""

from __future__ import annotations

import streamlit as st

from dashboard.context import current_context
from dashboard.controls import render_controls
from dashboard.views.live import render_live

ctx = current_context(st.session_state)
with st.sidebar:
    render_controls(ctx)
render_live(ctx)

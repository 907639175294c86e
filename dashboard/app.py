"""groupscope dashboard entry point: `streamlit run dashboard/app.py` (the `web` process).

Only navigation and page chrome live here; each page is a script under dashboard/screens
(the views it shares with other pages are in dashboard/views) and reads shared pollers
(dashboard/pollers.py), so nothing here talks to Kafka directly.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:  # streamlit puts dashboard/ on sys.path, not the repo root
    sys.path.insert(0, _ROOT)

import streamlit as st  # noqa: E402

from dashboard.context import offset_writes_env, open_to_all_env, read_only_env  # noqa: E402
from dashboard.presenter import Role, session_role  # noqa: E402
from dashboard.signin import account, show_account  # noqa: E402
from dashboard.theme import CSS, PROJECTOR_CSS, PROJECTOR_KEY, PROJECTOR_QUERY  # noqa: E402

st.set_page_config(page_title="groupscope", page_icon=":material/hub:", layout="wide")
st.html(CSS)
if st.query_params.get(PROJECTOR_QUERY[0]) == PROJECTOR_QUERY[1]:
    st.session_state[PROJECTOR_KEY] = True  # a bookmarked projector tab
if st.session_state.get(PROJECTOR_KEY):
    st.html(PROJECTOR_CSS)

# `watch --sign-in`: nothing below runs for a session that has not signed in and been let in
admission = account()
if admission is not None:
    show_account(admission)

# "screens", not "pages": a pages/ directory would switch on Streamlit's older file-based
# navigation, which serves each file directly and bypasses st.navigation and this chrome.
_PAGES = Path(__file__).resolve().parent / "screens"

streams = st.Page(_PAGES / "streams.py", title="Streams", icon=":material/directions_car:",
                  url_path="streams")
timeline = st.Page(_PAGES / "timeline.py", title="Timeline", icon=":material/timeline:",
                   url_path="timeline")
watch = st.Page(_PAGES / "watch.py", title="Watch", icon=":material/visibility:",
                url_path="watch")
status = st.Page(_PAGES / "status.py", title="Status", icon=":material/monitor_heart:",
                 url_path="status")
groups = st.Page(_PAGES / "groups.py", title="Groups", icon=":material/groups:",
                 url_path="groups")
queues = st.Page(_PAGES / "queues.py", title="Queues", icon=":material/queue:",
                 url_path="queues")
lab = st.Page(_PAGES / "lab.py", title="Lab", icon=":material/science:", url_path="lab")

if read_only_env():  # `groupscope watch`: no page with controls; every group first
    pages = [st.Page(_PAGES / "groups.py", title="Groups", icon=":material/groups:",
                     url_path="groups", default=True), watch, streams, timeline, status]
    # `watch --allow-offset-writes`: the one writing page, for this machine's browser only,
    # or with sign-in for everyone let in (a viewer previews; applying needs an operator)
    if offset_writes_env() and (admission is not None or session_role() is Role.PRESENTER):
        pages.append(st.Page(_PAGES / "offsets.py", title="Offsets", icon=":material/replay:",
                             url_path="offsets"))
else:
    pages = [st.Page(_PAGES / "live.py", title="Live", icon=":material/sensors:",
                     url_path="live", default=True), queues, lab, groups, streams,
             timeline, watch, status]
    # the Watch page's form repoints this server at any address and reads any file on it as
    # client.properties (a bad line is shown: the room's passcode file would be): presenter only
    if session_role() is not Role.PRESENTER:
        pages.remove(watch)

if open_to_all_env():
    st.caption(":material/public: Open to everyone who can reach this address: no sign-in "
               "(`groupscope watch --no-auth`).")
st.navigation(pages, position="top").run()

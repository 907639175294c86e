"""Who this browser session is, when `watch --sign-in FILE` asked for sign-in.

app.py calls `signed_in()` before any page runs: a session that has not signed in gets the
sign-in button and nothing else (no page, no group name, no figure); one whose ID token the
file does not admit (another issuer, expired, a domain or role it does not know) gets one
line saying why and a sign-out button, and the refusal is logged with the user's name. The
rule itself is the sign-in file's (`backend.contracts.signin.SignIn.admit`), which `watch`
checked at start.

Streamlit's login keeps the token's claims in a signed cookie for days; the gate reads the
token's own expiry from them on every run, so a session lasts as long as its ID token, and
signing in again through the provider (usually one redirect) renews it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import streamlit as st

from backend.contracts.signin import ENV_SIGN_IN, Admission, Role, SignIn, load_sign_in
from dashboard.logs import dashboard_log

log = dashboard_log("groupscope.dashboard.signin", "sign-in")

_REFUSAL_LOGGED = "gs_signin_refusal"


def sign_in_env() -> str | None:
    """The sign-in file `watch` runs with; None when nobody is asked to sign in."""
    return os.environ.get(ENV_SIGN_IN) or None


@st.cache_resource(show_spinner=False)
def _sign_in(path: str) -> SignIn:
    return load_sign_in(Path(path))  # checked by `watch` at start: cannot fail here but on edit


def account() -> Admission | None:
    """This session's admission, when sign-in is on and it has signed in and was let in;
    None when sign-in is off. Never returns for a session that may not see a page."""
    path = sign_in_env()
    if path is None:
        return None
    if not st.user.is_logged_in:
        st.title("groupscope")
        st.write("This dashboard shows a Kafka cluster's consumer groups to its team. "
                 "Sign in to see them.")
        if st.button("Sign in", key="gs_sign_in", type="primary"):
            st.login()
        st.stop()
    admission = _sign_in(path).admit(st.user.to_dict(), time.time())
    if admission.role is None:
        if st.session_state.get(_REFUSAL_LOGGED) != admission.why:
            st.session_state[_REFUSAL_LOGGED] = admission.why
            log.warning("refused %s: %s", admission.user or "an unnamed account", admission.why)
        st.title("groupscope")
        st.error(f"Not let in: {admission.why}.")
        again, out, _ = st.columns([1, 1, 4])
        if again.button("Sign in again", key="gs_sign_in_again", type="primary"):
            st.login()  # the provider's session may renew the token, or take another account
        if out.button("Sign out", key="gs_sign_out"):
            st.logout()
        st.stop()
    return admission


def show_account(admission: Admission) -> None:
    """Who is signed in, as what, and the way out: one line above every page."""
    left, right = st.columns([5, 1], vertical_alignment="center")
    name = st.user.get("name")
    who = f"{name} · {admission.user}" if name and name != admission.user else admission.user
    left.caption(f":material/person: {who} · {admission.role.value}")
    if right.button("Sign out", key="gs_sign_out", width="stretch"):
        st.logout()


def may_write(admission: Admission | None) -> bool:
    """Offset writes: an operator, when sign-in is on (without it, app.py's presenter rule)."""
    return admission is not None and admission.role is Role.OPERATOR

"""Dashboard test helpers: AppTest runs, text of a rendered page, shared pollers cleaned up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def page_text(at) -> str:
    """Every string the page put on screen (markdown, captions, errors, tables), for asserts."""
    parts: list[str] = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            parts.append(str(proto))
        value = getattr(node, "value", None)
        if value is not None and not callable(value):
            try:
                parts.append(value.to_csv() if hasattr(value, "to_csv") else str(value))
            except Exception:
                parts.append(repr(value))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return "\n".join(parts)


@pytest.fixture
def fresh_pollers() -> Iterator[None]:
    """Each test gets its own shared pollers; their threads stop when the cache is cleared."""
    import streamlit as st

    st.cache_resource.clear()
    try:
        yield
    finally:
        st.cache_resource.clear()


@pytest.fixture
def as_presenter(monkeypatch: pytest.MonkeyPatch) -> None:
    """AppTest sessions have no websocket, so no peer address, which makes them viewers;
    this one is the presenter's own loopback browser (tests/system/room covers real peers)."""
    monkeypatch.setattr("dashboard.presenter.session_peer", lambda: "127.0.0.1")

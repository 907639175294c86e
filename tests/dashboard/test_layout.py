"""Streamlit puts dashboard/ first on sys.path: no module there may shadow another one."""

from __future__ import annotations

import pkgutil
import sys
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboard"


def test_no_dashboard_module_shadows_stdlib_or_installed_packages():
    ours = {p.stem for p in DASHBOARD.glob("*.py")} | {
        p.name for p in DASHBOARD.iterdir() if p.is_dir() and not p.name.startswith("__")}
    site = [p for p in sys.path if "site-packages" in p]
    others = {m.name for m in pkgutil.iter_modules(site)} | set(sys.stdlib_module_names)
    assert not ours & others, f"rename these: {sorted(ours & others)}"
    assert not (DASHBOARD / "pages").exists()  # would bypass st.navigation

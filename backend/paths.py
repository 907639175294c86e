"""Where groupscope keeps downloaded jars (cache) and broker/engine state (data)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The user's cache directory; jars live here so every clone shares one download."""
    base = os.environ.get("GROUPSCOPE_CACHE") or os.environ.get("XDG_CACHE_HOME")
    root = Path(base) if base else Path.home() / ".cache"
    if not os.environ.get("GROUPSCOPE_CACHE"):
        root = root / "groupscope"
    root.mkdir(parents=True, exist_ok=True)
    return root


def data_dir() -> Path:
    """State of the embedded stack (broker log dirs, tokens); per checkout unless overridden."""
    base = os.environ.get("GROUPSCOPE_DATA")
    root = Path(base) if base else Path.cwd() / ".groupscope"
    root.mkdir(parents=True, exist_ok=True)
    return root

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


def write_private(path: Path, text: str) -> None:
    """Write via a 0600 temp file and rename, so readers never see half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)

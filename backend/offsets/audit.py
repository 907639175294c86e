"""Every offsets write kept in the memory's audit: who, through what, which group, from what
to what.

Both writers (`groupscope offsets … --execute` and the Offsets page) call `keep` after the
broker answered, with what it took and what it refused. The write is done by then: a memory
that cannot be opened costs the audit row, said in one line by the caller, never the write's
result (the log lines written before it say the same).
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Mapping
from pathlib import Path

from backend.contracts.history import AuditEntry
from backend.history.sqlite import SqliteStore
from backend.history.store import StoreError
from backend.offsets.plan import TP, Plan, partition_changes


def entry(applied: Plan, refused: Mapping[TP, str], *, user: str, via: str,
          cluster: str) -> AuditEntry:
    return AuditEntry(ts_ms=int(time.time() * 1000), user=user, via=via, cluster=cluster,
                      group=applied.group, action=applied.action,
                      changes=tuple(partition_changes(applied)),
                      refused=tuple(f"{t}-{p}: {why}" for (t, p), why in sorted(refused.items())))


def keep(path: str | Path | None, audit: AuditEntry) -> str | None:
    """Add the entry to the memory at `path`; None when kept, else the line saying why not."""
    if path is None:
        return "no memory to keep the audit in (--no-history)"
    try:
        store = SqliteStore(path)
    except StoreError as exc:
        return f"not audited: {exc}"
    try:
        store.add_audit(audit)
    except StoreError as exc:
        return f"not audited: {exc}"
    finally:
        store.close()
    return None


def os_user() -> str:
    """The user a command runs as, for the audit of `groupscope offsets`."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown user"

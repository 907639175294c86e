"""`groupscope history`: a group's rebalances with their causes and impact, from the memory;
and the memory's options for the commands that keep it (`watch`, `exporter`, `backend`).

Reading needs no cluster: the memory is a file, and `--bootstrap` / `--kafka-config` only say
which of the clusters it keeps is meant (any with a server in common).

Imports inside functions keep `groupscope --help`, which loads this module for the memory's
options of `watch` and `exporter`, from loading the memory's store and recorder (sqlite3,
NumPy), which only `history` and a process that records use.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from backend.cli_common import UserError, add_command, duration, format_duration, positive
from backend.contracts.history import (
    DEFAULT_MAX_BYTES,
    DEFAULT_RETENTION_DAYS,
    EPISODES_JSON,
    HISTORY_FILE,
    Episode,
)
from backend.kafka.settings import resolve_settings
from backend.paths import data_dir

HISTORY_HELP = "print a group's rebalances with their causes and impact, from the memory"
HISTORY = ("Print the rebalances the memory keeps for a group (written by `groupscope watch`, "
           "`exporter` or the demo's backend): when, why, with the evidence, and what each "
           "cost. Reads the file only; nothing is asked of the cluster.")
DEFAULT_SINCE = "24h"


def default_path() -> Path:
    return data_dir() / HISTORY_FILE


# ---- the options of the commands that keep the memory ---------------------------------------

@dataclass(frozen=True)
class Recording:
    path: Path | None  # None: --no-history (counters in memory only)
    retention_days: float = DEFAULT_RETENTION_DAYS
    max_bytes: int = DEFAULT_MAX_BYTES


def add_recording_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--history", metavar="PATH", type=Path,
                   help=f"the memory's file (default: {HISTORY_FILE} in the data directory, "
                        f"GROUPSCOPE_DATA or ./.groupscope)")
    p.add_argument("--no-history", action="store_true",
                   help="keep no memory: rebalances and their counters live as long as the "
                        "process")
    p.add_argument("--history-days", type=positive(float), default=DEFAULT_RETENTION_DAYS,
                   metavar="D", help=f"days the memory keeps (default {DEFAULT_RETENTION_DAYS})")
    p.add_argument("--history-max-mb", type=positive(int), default=DEFAULT_MAX_BYTES >> 20,
                   metavar="MB", help=f"the most the memory's file may take; past it the oldest "
                   f"lag goes first (default {DEFAULT_MAX_BYTES >> 20})")


def recording(args: argparse.Namespace) -> Recording:
    if getattr(args, "no_history", False):
        return Recording(None)
    return Recording(getattr(args, "history", None) or default_path(),
                     getattr(args, "history_days", DEFAULT_RETENTION_DAYS),
                     getattr(args, "history_max_mb", DEFAULT_MAX_BYTES >> 20) << 20)


def recorder(options: Recording, role: str):
    """The process's recorder for these options (not started)."""
    from backend.history.recorder import HistoryRecorder

    return HistoryRecorder(options.path, role, retention_days=options.retention_days,
                           max_bytes=options.max_bytes)


# ---- groupscope history --------------------------------------------------------------------

def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "history", _history, cluster=True, help=HISTORY_HELP,
                    description=HISTORY)
    p.add_argument("--group", help="the consumer group (with --audit: only its writes)")
    p.add_argument("--audit", action="store_true",
                   help="print the writes groupscope made instead (offsets resets and "
                        "deletes): when, who, through what, from what to what")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--since", type=duration, metavar="AGO",
                      help=f"how far back, like 6h or 2d (default {DEFAULT_SINCE})")
    when.add_argument("--from", dest="start", metavar="TIME",
                      help="from this time: ISO 8601 (2026-11-27T03:00, local time unless it "
                           "says +01:00 or Z) or epoch milliseconds")
    p.add_argument("--to", dest="end", metavar="TIME", help="until this time (default: now)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON array of the episodes")
    out.add_argument("--csv", action="store_true", help="one CSV row per episode")
    p.add_argument("--history", metavar="PATH", type=Path,
                   help=f"the memory's file (default: {HISTORY_FILE} in the data directory)")


def parse_time(text: str, what: str) -> int:
    """Epoch ms from ISO 8601 or epoch ms; a one-line error naming the option otherwise."""
    s = text.strip()
    if s.isdigit():
        return int(s)
    try:
        when = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(f"{what} {text!r}: write a time like 2026-11-27T03:00 (local), "
                        f"2026-11-27T03:00Z, or epoch milliseconds") from None
    return int(when.timestamp() * 1000)  # naive: local time, as the pages show it


def _span(args: argparse.Namespace, now_ms: int) -> tuple[int, int]:
    end = parse_time(args.end, "--to") if args.end else now_ms
    if args.start:
        start = parse_time(args.start, "--from")
    else:
        start = end - (args.since if args.since is not None else duration(DEFAULT_SINCE))
    if start > end:
        raise UserError("--from is after --to; swap them")
    return start, end


def _bootstrap(args: argparse.Namespace) -> str | None:
    """The servers the user means, if any: flags, a properties file, the environment."""
    if not (args.bootstrap or args.kafka_config or os.environ.get("GROUPSCOPE_BOOTSTRAP")
            or os.environ.get("GROUPSCOPE_KAFKA_CONFIG")):
        return None

    return resolve_settings(args.bootstrap, args.kafka_config).bootstrap


def _history(args: argparse.Namespace) -> int:
    from backend.history.sqlite import SqliteStore
    from backend.history.store import StoreError, resolve_cluster

    path = args.history or default_path()
    if not Path(path).is_file():
        raise UserError(f"no memory at {path}: `groupscope watch`, `exporter` or the demo keep "
                        f"it there; or give --history PATH")
    if not args.group and not args.audit:
        raise UserError("give --group NAME (its rebalances), or --audit (the writes made)")
    start, end = _span(args, int(time.time() * 1000))
    try:
        store = SqliteStore(path)
    except StoreError as exc:
        raise UserError(str(exc)) from None
    if args.audit:
        return _audit(store, args, start, end)
    try:
        kept = store.clusters()
        bootstrap = _bootstrap(args)
        cluster = resolve_cluster(kept, bootstrap)
        if cluster is None:
            names = "; ".join(c.name for c in kept) or "none"
            hint = "pass --bootstrap to pick one" if bootstrap is None else \
                f"none shares a server with {bootstrap}"
            raise UserError(f"{path} keeps {len(kept)} clusters ({names}): {hint}")
        episodes = store.episodes(cluster.key, args.group, start, end)
        if not episodes and args.group not in store.groups(cluster.key):
            raise UserError(f"no memory of group {args.group!r} on {cluster.name} in {path}")
    except StoreError as exc:
        raise UserError(str(exc)) from None
    finally:
        store.close()
    if args.json:
        sys.stdout.write(EPISODES_JSON.dump_json(tuple(episodes), indent=2).decode() + "\n")
    elif args.csv:
        write_csv(episodes, sys.stdout)
    else:
        print(render(episodes, args.group, cluster.name, start, end))
    return 0


def _audit(store, args: argparse.Namespace, start: int, end: int) -> int:
    from backend.history.store import StoreError

    try:
        kept = [a for a in store.audit(start, args.group) if a.ts_ms <= end]
    except StoreError as exc:
        raise UserError(str(exc)) from None
    finally:
        store.close()
    if args.json:
        print(json.dumps([dataclasses.asdict(a) for a in kept], indent=2))
    elif args.csv:
        out = csv.writer(sys.stdout)
        out.writerow(("time", "user", "via", "cluster", "group", "action", "changes",
                      "refused"))
        for a in kept:
            out.writerow((_iso(a.ts_ms), a.user, a.via, a.cluster, a.group, a.action,
                          "; ".join(a.changes), "; ".join(a.refused)))
    else:
        print("\n".join(audit_lines(kept)) or "no writes kept in this span")
    return 0


def audit_lines(entries) -> list[str]:
    """The audit as text: a line per write, then one per partition it changed or not."""
    lines = []
    for a in entries:
        lines.append(f"{_iso(a.ts_ms)}  {a.user} via {a.via}: {a.action} group {a.group} "
                     f"on {a.cluster}")
        lines += [f"    {c}" for c in a.changes]
        lines += [f"    NOT CHANGED {r}" for r in a.refused]
    return lines


# ---- output --------------------------------------------------------------------------------

CSV_COLUMNS = ("start", "end", "duration_s", "cause", "causes", "evidence", "joined", "left",
               "moved", "unowned_partition_seconds", "gap_s", "lag_before", "lag_peak",
               "lag_after", "recovered_s", "reprocessed", "generation_before",
               "generation_after", "seen_as")


def _iso(ms: int | None) -> str:
    return "" if ms is None else datetime.fromtimestamp(ms / 1000).isoformat(
        timespec="milliseconds")


def _s(ms: int | None) -> str:
    return "" if ms is None else f"{ms / 1000:.1f}"


def row(e: Episode) -> dict[str, object]:
    i = e.impact
    return {
        "start": _iso(e.start_ms), "end": _iso(e.end_ms), "duration_s": _s(e.duration_ms),
        "cause": e.cause, "causes": ";".join(c.kind for c in e.causes),
        "evidence": " | ".join(c.evidence for c in e.causes), "joined": ";".join(e.joined),
        "left": ";".join(e.left), "moved": len(i.moved),
        "unowned_partition_seconds": i.unowned_partition_seconds, "gap_s": _s(i.gap_ms),
        "lag_before": i.lag_before, "lag_peak": i.lag_peak, "lag_after": i.lag_after,
        "recovered_s": _s(i.recovered_ms), "reprocessed": i.reprocessed,
        "generation_before": e.generation_before, "generation_after": e.generation_after,
        "seen_as": e.seen_as}


def write_csv(episodes: list[Episode], out) -> None:
    w = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for e in episodes:
        w.writerow(row(e))


def render(episodes: list[Episode], group: str, cluster: str, start: int, end: int) -> str:
    head = (f"{group} on {cluster}: {len(episodes)} rebalance"
            f"{'' if len(episodes) == 1 else 's'} from {_iso(start)[:19]} to {_iso(end)[:19]}")
    lines = [head]
    for e in episodes:
        i = e.impact
        took = "still rebalancing" if e.end_ms is None else f"{format_duration(e.duration_ms)}"
        lines.append(f"\n{_iso(e.start_ms)[:19]}  {e.cause}  ({took})")
        for c in e.causes:
            lines.append(f"    because {c.evidence}")
        cost = [f"{len(i.moved)} partitions moved"]
        if i.unowned_partition_seconds:
            cost.append(f"{i.unowned_partition_seconds:g} partition-seconds without an owner")
        if i.gap_ms is not None:
            cost.append(f"processing gap {format_duration(i.gap_ms)}")
        if i.lag_before is not None:
            cost.append(f"lag {i.lag_before:,} -> peak {i.lag_peak or 0:,}"
                        + (f" -> {i.lag_after:,}" if i.lag_after is not None else ""))
        if i.reprocessed:
            cost.append(f"{i.reprocessed:,} records committed again")
        lines.append("    cost: " + ", ".join(cost))
        if e.generation_before is not None or e.generation_after is not None:
            lines.append(f"    generation {e.generation_before} -> {e.generation_after}")
        for who, ms in i.reconciling:
            lines.append(f"    {who} reconciled for {format_duration(ms)}")
    return "\n".join(lines)

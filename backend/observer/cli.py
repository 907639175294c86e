"""`groupscope snapshot` and `groupscope groups`: the observer from a terminal, read-only.

Imports inside functions keep `groupscope --help` and the other subcommands from loading what
only a command that runs uses: the observer, the overview watcher (NumPy) and the running
stack's control files (psutil).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Protocol, TypeVar

from backend.cli_common import UserError, add_command, positive
from backend.contracts import DEFAULT_GROUP, SNAPSHOT_JSON
from backend.kafka.settings import ENV_BOOTSTRAP, ENV_KAFKA_CONFIG, resolve_settings


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "snapshot", _snapshot, cluster=True,
                    help="print one read-only snapshot of a consumer group",
                    description="Describe a consumer group without joining it: members, "
                                "ownership, committed and end offsets, lag in messages and "
                                "seconds, streams, health.")
    p.add_argument("--group", default=DEFAULT_GROUP, help=f"group id (default {DEFAULT_GROUP})")
    p.add_argument("--topic", default=None,
                   help="topic to show (default: the group's topic with most partitions)")
    p.add_argument("--json", action="store_true", help="print the Snapshot as JSON")
    p.add_argument("--samples", type=positive(int), default=2, metavar="N",
                   help="polls 1 s apart before printing, so health has a window (default 2)")

    p = add_command(sub, "groups", _groups, cluster=True,
                    help="list the cluster's consumer groups with lag and health",
                    description="Every consumer group the principal may describe: state, "
                                "protocol, members, lag in messages and seconds, health. "
                                "Read-only, like the dashboard's Groups page.")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--samples", type=positive(int), default=1, metavar="N",
                   help="refresh cycles 2 s apart before printing, so rate and health have a "
                        "window (default 1)")


def cluster_settings(args: argparse.Namespace):
    """The cluster a read-only command watches: its flags, else the environment, else the
    running stack's; checked reachable, so a wrong address is one line at once."""
    bootstrap, kafka_config = args.bootstrap, args.kafka_config
    if not (bootstrap or kafka_config or os.environ.get(ENV_BOOTSTRAP)
            or os.environ.get(ENV_KAFKA_CONFIG)):
        bootstrap, kafka_config = _running_stack_cluster()
    settings = resolve_settings(bootstrap, kafka_config)
    settings.check_reachable(timeout=10.0)
    return settings


def _running_stack_cluster() -> tuple[str | None, str | None]:
    """The cluster of the one groupscope stack running for this user, from any directory;
    (None, None) when there is none (or several), which means the embedded broker's port."""
    from backend.control_files import ControlNotFound, find_control_files

    try:
        ep = find_control_files()
    except ControlNotFound:
        return None, None
    return ep.bootstrap, ep.kafka_config


def _snapshot(args: argparse.Namespace) -> int:

    from backend.observer.observer import Observer

    obs = Observer(cluster_settings(args), args.group, topic=args.topic, sample_every=0.0)
    snap = _sampled(obs.poll_once, obs.stop, args.samples, spacing_s=1.0)
    if args.json:
        sys.stdout.write(SNAPSHOT_JSON.dump_json(snap, indent=2).decode() + "\n")
        return 0
    if snap.state == "Dead" and not snap.members and not snap.partitions:
        print(f"group {snap.group} does not exist (no members, no committed offsets)")
        return 0
    print(format_snapshot(snap))
    return 0


class _Reading(Protocol):
    """A snapshot or an overview: what a command polls, with the reason it failed."""

    @property
    def error(self) -> str | None: ...


R = TypeVar("R", bound=_Reading)


def _sampled(poll: Callable[[], R], stop: Callable[[], None], samples: int,
             spacing_s: float) -> R:
    """The last of `samples` polls `spacing_s` apart (rates and health need a window), then
    `stop` of what polled; a reading that failed is the command's one-line error."""
    import time

    try:
        result = poll()
        for _ in range(samples - 1):
            time.sleep(spacing_s)  # spacing polls is the point here, not synchronisation
            result = poll()
    finally:
        stop()
    if result.error:
        raise UserError(result.error)
    return result


def format_snapshot(snap) -> str:
    lines = [
        f"group {snap.group}  topic {snap.topic or '-'}  state {snap.state}  "
        f"protocol {snap.protocol}  assignor {snap.assignor or '-'}  health {snap.health}",
        f"members {len(snap.members)}  partitions {snap.partition_count}  "
        f"total lag {snap.total_lag}  max lag {_secs(snap.max_lag_seconds)}  "
        f"streams {len(snap.streams)}",
        "",
        f"{'MEMBER':<30} {'HOST':<18} {'PARTITIONS':<24} {'LAG':>8}",
    ]
    for m in snap.members:
        parts = ",".join(map(str, m.partitions)) or ("(idle)" if m.idle else "-")
        lines.append(f"{m.client_id[:30]:<30} {m.host[:18]:<18} {parts[:24]:<24} "
                     f"{m.lag_messages:>8}")
    kafka = len(snap.brokers) > 1  # leaders and ISRs say something only then
    lines += ["", f"{'P':>4} {'OWNER':<30} {'COMMITTED':>10} {'END':>10} {'LAG':>8} "
                  f"{'LAG S':>8} HEALTH" + ("  LEADER ISR" if kafka else "")]
    for p in snap.partitions:
        committed = "-" if p.committed is None else str(p.committed)
        side = ""
        if kafka and p.replicas:
            side = (f"  {'-' if p.leader is None else p.leader:>6} "
                    f"{','.join(map(str, p.isr)) or '-'}")
        lines.append(f"{p.partition:>4} {(p.owner or '-')[:30]:<30} {committed:>10} "
                     f"{p.end:>10} {p.lag_messages:>8} {_secs(p.lag_seconds):>8} "
                     f"{p.health:<6}{side}".rstrip())
    if kafka:
        lines += ["", f"brokers ({snap.under_replicated} under-replicated, "
                      f"{snap.offline_partitions} offline partitions of {snap.topic}):"]
        for b in snap.brokers:
            lines.append(f"  {b.broker_id:>4} {'up' if b.up else 'DOWN':<4} "
                         f"{(b.address or '-'):<22} leads {b.leaders}, holds {b.replicas}, "
                         f"{b.out_of_sync} out of ISR")
    if snap.rebalances:
        lines += ["", "recent rebalances:"]
        for r in snap.rebalances[-5:]:
            dur = "in progress" if r.end_ms is None else f"{(r.end_ms - r.start_ms) / 1000:.1f}s"
            lines.append(f"  {dur}, moved {len(r.moved)}, joined {list(r.joined)}, "
                         f"left {list(r.left)} ({r.reason})")
    return "\n".join(lines)


def _secs(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}s"


def _groups(args: argparse.Namespace) -> int:

    from backend.contracts.overview import GROUP_ROWS_JSON
    from backend.observer.overview import OverviewWatcher

    watcher = OverviewWatcher(cluster_settings(args))
    overview = _sampled(watcher.refresh_once, watcher.stop, args.samples, spacing_s=2.0)
    if args.json:
        sys.stdout.write(GROUP_ROWS_JSON.dump_json(overview.rows, indent=2).decode() + "\n")
        return 0
    print(format_groups(overview.rows))
    for line in overview.lacks:  # what this cluster cannot have, said once, not as an error
        print(f"note: {line}")
    return 0


def format_groups(rows) -> str:
    """The overview as a terminal table: one line per group, errors in place of numbers."""
    if not rows:
        return "no consumer groups"
    lines = [f"{'GROUP':<40} {'STATE':<19} {'PROTOCOL':<8} {'MEMBERS':>7} {'LAG':>10} "
             f"{'LAG S':>8} HEALTH"]
    for r in rows:
        if r.error:
            lines.append(f"{r.group[:40]:<40} {'-':<19} {r.protocol:<8} {'-':>7} {'-':>10} "
                         f"{'-':>8} ERR  {r.error}")
            continue
        lag = "-" if r.lag_messages is None else str(r.lag_messages)
        lines.append(f"{r.group[:40]:<40} {r.state[:19]:<19} {r.protocol:<8} {r.members:>7} "
                     f"{lag:>10} {_secs(r.max_lag_seconds):>8} {r.health}")
    return "\n".join(lines)

"""`groupscope snapshot` and `groupscope groups`: the observer from a terminal, read-only."""

from __future__ import annotations

import argparse
import os
import sys

from backend.cli_common import UserError, add_cluster_args
from backend.contracts import DEFAULT_GROUP, SNAPSHOT_JSON


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("snapshot", help="print one read-only snapshot of a consumer group",
                       description="Describe a consumer group without joining it: members, "
                                   "ownership, committed and end offsets, lag in messages and "
                                   "seconds, streams, health.")
    add_cluster_args(p)
    p.add_argument("--group", default=DEFAULT_GROUP, help=f"group id (default {DEFAULT_GROUP})")
    p.add_argument("--topic", default=None,
                   help="topic to show (default: the group's topic with most partitions)")
    p.add_argument("--json", action="store_true", help="print the Snapshot as JSON")
    p.add_argument("--samples", type=int, default=2, metavar="N",
                   help="polls 1 s apart before printing, so health has a window (default 2)")
    p.set_defaults(func=_snapshot)

    p = sub.add_parser("groups", help="list the cluster's consumer groups with state and lag",
                       description="Every consumer group the principal may describe, with its "
                                   "protocol, state, member count and total lag.")
    add_cluster_args(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_groups)


def _settings(args: argparse.Namespace):
    from backend.cluster.settings import ENV_BOOTSTRAP, ENV_KAFKA_CONFIG, resolve_settings

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
    from backend.supervisor.auth import ControlNotFound, find_control_files

    try:
        ep = find_control_files()
    except ControlNotFound:
        return None, None
    return ep.bootstrap, ep.kafka_config


def _snapshot(args: argparse.Namespace) -> int:
    import time

    from backend.observer.observer import Observer

    if args.samples < 1:
        raise UserError("--samples must be at least 1")
    obs = Observer(_settings(args), args.group, topic=args.topic, sample_every=0.0)
    try:
        snap = obs.poll_once()
        for _ in range(args.samples - 1):
            time.sleep(1.0)  # spacing polls is the point here, not synchronisation
            snap = obs.poll_once()
    finally:
        obs.stop()
    if snap.error:
        raise UserError(snap.error)
    if args.json:
        sys.stdout.write(SNAPSHOT_JSON.dump_json(snap, indent=2).decode() + "\n")
        return 0
    if snap.state == "Dead" and not snap.members and not snap.partitions:
        print(f"group {snap.group} does not exist (no members, no committed offsets)")
        return 0
    print(format_snapshot(snap))
    return 0


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
    lines += ["", f"{'P':>4} {'OWNER':<30} {'COMMITTED':>10} {'END':>10} {'LAG':>8} "
                  f"{'LAG S':>8} HEALTH"]
    for p in snap.partitions:
        committed = "-" if p.committed is None else str(p.committed)
        lines.append(f"{p.partition:>4} {(p.owner or '-')[:30]:<30} {committed:>10} "
                     f"{p.end:>10} {p.lag_messages:>8} {_secs(p.lag_seconds):>8} {p.health}")
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
    from backend.observer.collect import Collector

    collector = Collector(_settings(args))
    try:
        rows = _group_rows(collector)
    finally:
        collector.close()
    return _print_groups(args, rows)


def _group_rows(collector) -> list[dict]:
    from backend.observer.collect import CollectError
    from backend.observer.derive import lag_messages

    rows: list[dict] = []
    try:
        listed = collector.list_groups()
    except Exception as exc:
        raise UserError(f"cannot list groups: {exc}") from None
    for gid, _state, _gtype in listed:
        try:
            obs = collector.collect(gid)
        except CollectError as exc:
            rows.append({"group": gid, "error": str(exc)})
            continue
        lag = sum(lag_messages(obs.committed.get(tp), end, obs.start_offsets.get(tp, 0))
                  for tp, end in obs.end_offsets.items())
        rows.append({"group": gid, "protocol": obs.protocol, "state": obs.state,
                     "members": len(obs.members), "topics": list(obs.topics), "lag": lag})
    return rows


def _print_groups(args: argparse.Namespace, rows: list[dict]) -> int:
    import orjson

    if args.json:
        sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    if not rows:
        print("no consumer groups")
        return 0
    print(f"{'GROUP':<40} {'PROTOCOL':<9} {'STATE':<20} {'MEMBERS':>7} {'LAG':>10}")
    for r in rows:
        if "error" in r:
            print(f"{r['group'][:40]:<40} error: {r['error']}")
            continue
        print(f"{r['group'][:40]:<40} {r['protocol']:<9} {r['state']:<20} "
              f"{r['members']:>7} {r['lag']:>10}")
    return 0

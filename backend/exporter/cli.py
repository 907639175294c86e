"""`groupscope exporter`: Prometheus /metrics (and optional alerts) for every consumer group.

Imports inside functions keep `groupscope --help` and the other subcommands from loading the
always-on watcher (backend/exporter/serve.py: prometheus_client, the memory, NumPy), which
only `exporter` uses.
"""

from __future__ import annotations

import argparse

from backend.cli_common import add_command, positive
from backend.exporter.options import (
    DEFAULT_ADDRESS,
    DEFAULT_INTERVAL_S,
    DEFAULT_MAX_GROUPS,
    DEFAULT_PORT,
    add_group_filter_args,
    group_filter,
    tcp_port,
)
from backend.history.cli import add_recording_args, recording
from backend.observer.cli import cluster_settings
from backend.proc import StopSignals

EXPORTER_HELP = "serve Prometheus /metrics for every consumer group (read-only)"
EXPORTER = ("Watch every consumer group of a cluster read-only and serve their lag, "
            "health, members and rebalances as Prometheus metrics, optionally with "
            "alert rules. Nothing is joined, committed or changed on the cluster.")


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "exporter", _exporter, cluster=True, help=EXPORTER_HELP,
                    description=EXPORTER)
    p.add_argument("--port", type=tcp_port, default=DEFAULT_PORT,
                   help=f"HTTP port of /metrics (default {DEFAULT_PORT})")
    p.add_argument("--address", default=DEFAULT_ADDRESS,
                   help=f"address to serve on (default {DEFAULT_ADDRESS}: this machine only; "
                        "0.0.0.0 for every interface)")
    p.add_argument("--metrics-access", metavar="FILE",
                   help="TLS and basic auth or a bearer token for /metrics, from a TOML file "
                        "(docs/production.md#protect-metrics); default: open to whoever "
                        "reaches the address")
    p.add_argument("--alerts", metavar="FILE", help="alert rules (TOML) to evaluate every cycle")
    p.add_argument("--per-partition", action="store_true",
                   help="also export committed offset, end offset and lag per partition "
                        "(one series per group and partition: mind the cardinality)")
    p.add_argument("--interval", type=positive(float), default=DEFAULT_INTERVAL_S, metavar="S",
                   help=f"seconds between refreshes of every group (default "
                        f"{DEFAULT_INTERVAL_S:g})")
    p.add_argument("--max-groups", type=positive(int), default=DEFAULT_MAX_GROUPS, metavar="N",
                   help=f"export at most N groups, the first by name; the rest are counted in "
                        f"groupscope_exporter_dropped_groups_total (default {DEFAULT_MAX_GROUPS})")
    add_group_filter_args(p)
    add_recording_args(p)


def _exporter(args: argparse.Namespace) -> int:
    from backend.exporter.serve import always_on

    starting = True

    def interrupt_start_up() -> None:
        """A stop signal during the reachability check or the first bind ends the start at
        once (exit 130); once serving, it ends the wait below (exit 0)."""
        if starting:
            raise KeyboardInterrupt

    with StopSignals(on_stop=interrupt_start_up) as signals, always_on(
            lambda: cluster_settings(args), metrics_port=args.port, metrics_address=args.address,
            alerts_file=args.alerts, per_partition=args.per_partition,
            max_groups=args.max_groups, interval=args.interval,
            history=recording(args), role="exporter",
            metrics_access=args.metrics_access,
            include=group_filter(args.groups, args.exclude_groups)) as on:
        starting = False
        print(f"exporting {on.watcher.settings.describe()} read-only: {on.describe()}",
              flush=True)
        signals.wait()
    return 0

"""`groupscope`: one entry point; each package registers its own subcommands.

A package adds a `cli.py` with `register(subparsers)`; each subcommand sets `func`, which
receives the parsed args and returns an exit code. Known errors print one line, no traceback.
The helpers those modules share live in `backend.cli_common`, so nothing imports this file.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from backend.cli_common import UserError
from backend.kafka.jars import JarResolutionError
from backend.kafka.properties import KafkaConfigError
from backend.kafka.settings import ClusterUnreachable
from backend.netutil import PortBusyError

# Order here is the order in `groupscope --help`.
COMMAND_MODULES = (
    "backend.stack.cli",  # up, broker, spark, web
    "backend.fleet.cli",  # produce
    "backend.replica.cli",  # replica
    "backend.supervisor.cli",  # backend, ctl
    "backend.observer.cli",  # snapshot, groups, watch
    "backend.offsets.cli",  # offsets reset, offsets delete
    "backend.chaos.cli",  # chaos
    "backend.lab.cli",  # lab
    "backend.exporter.cli",  # exporter
    "backend.history.cli",  # history
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="groupscope",
        description="Watch Kafka consumer groups live; run PySpark replicas to rebalance.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (UserError, KafkaConfigError, ClusterUnreachable, PortBusyError,
            JarResolutionError) as exc:
        print(f"groupscope {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

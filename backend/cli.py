"""`groupscope`: one entry point; each package registers its own subcommands.

A package adds a `cli.py` with `register(subparsers)`; each subcommand sets `func`, which
receives the parsed args and returns an exit code. Known errors print one line, no traceback.
The helpers those modules share live in `backend.cli_common`, so nothing imports this file.

With GROUPSCOPE_ARGV_LOG set to a file, every invocation appends its argv there as one JSON
line: `make test` sets it, so it can tell which commands the guides show were run by no test.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
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
ARGV_LOG = "GROUPSCOPE_ARGV_LOG"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="groupscope",
        description="Watch Kafka consumer groups live; run PySpark replicas to rebalance.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def record_argv(argv: list[str]) -> None:
    """Append argv to $GROUPSCOPE_ARGV_LOG, if set. One short write to a file opened for
    appending lands whole even with many processes writing; a file this process may not write
    (another user's, a namespace's) costs the record, never the command."""
    path = os.environ.get(ARGV_LOG)
    if path:
        with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(argv) + "\n")


def main(argv: list[str] | None = None) -> int:
    record_argv(list(sys.argv[1:] if argv is None else argv))
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

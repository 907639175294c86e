"""`groupscope`: one entry point; each package registers its own subcommands.

A package adds a `cli.py` with `register(subparsers)`; each subcommand sets `func`, which
receives the parsed args and returns an exit code. Known errors print one line, no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Order here is the order in `groupscope --help`.
COMMAND_MODULES = (
    "backend.stack.cli",  # up, broker, spark, web
    "backend.fleet.cli",  # produce
    "backend.replica.cli",  # replica
    "backend.supervisor.cli",  # backend, ctl
    "backend.observer.cli",  # snapshot, groups, watch
    "backend.chaos.cli",  # chaos
)


class UserError(Exception):
    """An error the user can fix; printed as one line, exit code 2."""


def positive(kind: type[int] | type[float]):
    """An argparse type: a number of `kind` above 0, with a one-line error otherwise."""
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not value > 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return value
    return parse


def add_cluster_args(parser: argparse.ArgumentParser) -> None:
    """--bootstrap / --kafka-config, shared by every command that talks to Kafka."""
    parser.add_argument("--bootstrap", metavar="HOST:PORT",
                        help="external Kafka cluster (env GROUPSCOPE_BOOTSTRAP); "
                             "omit for the embedded broker")
    parser.add_argument("--kafka-config", metavar="FILE",
                        help="client.properties with security.protocol, sasl.*, ssl.* "
                             "(env GROUPSCOPE_KAFKA_CONFIG)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="groupscope",
        description="Watch Kafka consumer groups live; run PySpark replicas to rebalance.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and name.startswith(exc.name):
                continue  # package not built yet
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from backend.cluster.properties import KafkaConfigError
    from backend.cluster.settings import ClusterUnreachable
    from backend.netutil import PortBusyError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (UserError, KafkaConfigError, ClusterUnreachable, PortBusyError) as exc:
        print(f"groupscope {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    # Run the imported module's main, so `python -m backend.cli` raises and catches the
    # same UserError class the subcommand modules import.
    from backend.cli import main as _main

    sys.exit(_main())

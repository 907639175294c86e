"""What every subcommand module shares: the user-error type and argument helpers.

A leaf module (it imports nothing of groupscope), so a package's `cli.py` can use it without
importing the top-level `backend.cli` that imports every package.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


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


def add_command(sub: argparse._SubParsersAction, name: str,
                run: Callable[[argparse.Namespace], int] | None, *, help: str,
                description: str, cluster: bool = False) -> argparse.ArgumentParser:
    """The parser of `groupscope NAME`: `run` is what backend/cli.py calls with the parsed
    arguments (None: the caller sets it), and `cluster` puts the cluster options first, where
    every command that talks to Kafka lists them."""
    p = sub.add_parser(name, help=help, description=description)
    if run is not None:
        p.set_defaults(func=run)
    if cluster:
        add_cluster_args(p)
    return p

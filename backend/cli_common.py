"""What every subcommand module shares: the user-error type and argument helpers.

A leaf module (it imports nothing of groupscope), so a package's `cli.py` can use it without
importing the top-level `backend.cli` that imports every package.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable


class UserError(Exception):
    """An error the user can fix; printed as one line, exit code 2."""


# ---- durations, as every option and file of groupscope writes them ------------------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
DURATION_HINT = "a duration like '30s', '5m', '1h' or '1h30m'"


def parse_duration(text: str) -> int:
    """'5m' -> 300000: milliseconds, the unit of `Overview.taken_ms`."""
    s = text.strip()
    if not s or _DURATION_PART.sub("", s):
        raise ValueError(f"{text!r} is not {DURATION_HINT}")
    return round(sum(float(n) * _UNIT_MS[u] for n, u in _DURATION_PART.findall(s)))


def format_duration(ms: int | float) -> str:
    """300000 -> '5m', 5400000 -> '1h30m': the inverse of `parse_duration`, for messages."""
    ms = int(ms)
    if ms < 1000:
        return f"{ms}ms" if ms else "0s"
    s = ms // 1000
    parts = [(s // 86400, "d"), (s % 86400 // 3600, "h"), (s % 3600 // 60, "m"), (s % 60, "s"),
             (ms % 1000, "ms")]
    return "".join(f"{n}{u}" for n, u in parts if n)


def duration(text: str) -> int:
    """An argparse type: a duration (`parse_duration`), in milliseconds."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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

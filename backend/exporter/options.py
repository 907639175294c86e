"""The exporter's command-line defaults and argument types, light to import.

Every `groupscope` call imports each package's `cli.py` to build its parser, so what they
need from this package lives here, away from prometheus_client and the Kafka client.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

DEFAULT_PORT = 9308  # the port Kafka lag exporters conventionally use
DEFAULT_ADDRESS = "127.0.0.1"  # this machine only, unless told otherwise
DEFAULT_INTERVAL_S = 10.0
DEFAULT_MAX_GROUPS = 10_000


def tcp_port(text: str) -> int:
    """An argparse type: a TCP port number, with a one-line error otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"a port is 1 to 65535, got {value}")
    return value


def group_pattern(text: str) -> re.Pattern[str]:
    """An argparse type: a regular expression over group ids, with a one-line error."""
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"not a regular expression: {text!r} ({exc})") from None


def add_group_filter_args(p: argparse.ArgumentParser) -> None:
    """--groups / --exclude-groups, the same for `exporter` and `watch`."""
    p.add_argument("--groups", type=group_pattern, metavar="REGEX",
                   help="watch only the groups whose whole id matches (default: every group); "
                        "the others are neither described nor exported")
    p.add_argument("--exclude-groups", type=group_pattern, metavar="REGEX",
                   help="leave out the groups whose whole id matches (after --groups)")


def group_filter(groups: re.Pattern[str] | None,
                 exclude: re.Pattern[str] | None) -> Callable[[str], bool] | None:
    """The watcher's `include` predicate for the two options; None: every group.

    Whole-id matches, as Prometheus's relabelling regexes are anchored: `orders-.*` is the
    groups starting `orders-`, not every group with `orders-` somewhere in it."""
    if groups is None and exclude is None:
        return None

    def include(group: str) -> bool:
        return ((groups is None or groups.fullmatch(group) is not None)
                and (exclude is None or exclude.fullmatch(group) is None))
    return include

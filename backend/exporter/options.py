"""The exporter's command-line defaults and argument types, light to import.

Every `groupscope` call imports each package's `cli.py` to build its parser, so what they
need from this package lives here, away from prometheus_client and the Kafka client.
"""

from __future__ import annotations

import argparse

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

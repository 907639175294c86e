"""The dashboard's own log lines, on the web process's stderr with a time and a tag.

Streamlit configures only its own loggers, so a page's logger would otherwise reach the log
through Python's last-resort handler: warnings only, with no time. Refusals, sign-ins and
offsets writes must be in the log, each line saying when.
"""

from __future__ import annotations

import logging
import sys


def dashboard_log(name: str, tag: str) -> logging.Logger:
    """`name`'s logger, writing INFO and above to stderr as `<time> [<tag>] <message>`."""
    log = logging.getLogger(name)
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(f"%(asctime)s [{tag}] %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log

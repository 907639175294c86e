"""The per-stream summary, one message at a time, for the peers groupscope is compared with.

The raw-loop variant and the Quix Streams app both fold messages with this one function, so
their work is the same by construction. Plain JSON types only (Quix keeps it in its state
store); it imports nothing so it runs under the Quix venv's interpreter too.
"""

from __future__ import annotations

FIELDS = ("speed_kmh", "rpm", "gear", "engine_temp_c", "lat", "lon")


def update(s: dict | None, value: dict) -> dict:
    """Fold one telemetry message into stream summary `s` (None: a new stream); return it."""
    if s is None:
        s = {"count": 0, "last_seq": -1, "dups": 0, "gaps": 0,
             "fields": {f: [0, 0.0, 0.0, None, None] for f in FIELDS}}
    seq = value["seq"]
    if seq <= s["last_seq"]:
        s["dups"] += 1
    else:
        s["gaps"] += seq - s["last_seq"] - 1
        s["last_seq"] = seq
    s["count"] += 1
    for f in FIELDS:
        x = value[f]
        st = s["fields"][f]
        st[0] += 1
        st[1] += x
        st[2] += x * x
        st[3] = x if st[3] is None else min(st[3], x)
        st[4] = x if st[4] is None else max(st[4], x)
    return s

"""The peer: a Quix Streams app computing groupscope's per-stream summary in its own state.

Runs under its own interpreter (Quix Streams pins an older confluent-kafka than groupscope,
so it lives in a separate venv; see bench/README.md). Per stream: count, per numeric field
count/sum/sumsq/min/max, last seq, duplicates and gaps, kept in Quix's RocksDB state with a
changelog topic, committed every second (groupscope's default micro-batch interval).

    python bench/quix_app.py BOOTSTRAP GROUP TOPIC at-least-once|exactly-once STATE_DIR
"""

from __future__ import annotations

import sys

from quixstreams import Application

FIELDS = ("speed_kmh", "rpm", "gear", "engine_temp_c", "lat", "lon")


def summarise(value: dict, state) -> None:
    s = state.get("summary", None) or {"count": 0, "last_seq": -1, "dups": 0, "gaps": 0,
                                       "fields": {f: [0, 0.0, 0.0, None, None] for f in FIELDS}}
    seq = value["seq"]
    if seq <= s["last_seq"]:
        s["dups"] += 1
    else:
        if seq > s["last_seq"] + 1:
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
    state.set("summary", s)


def main() -> int:
    bootstrap, group, topic, guarantee, state_dir = sys.argv[1:6]
    app = Application(broker_address=bootstrap, consumer_group=group,
                      auto_offset_reset="earliest", processing_guarantee=guarantee,
                      commit_interval=1.0, state_dir=state_dir, loglevel="WARNING")
    sdf = app.dataframe(app.topic(topic, value_deserializer="json"))
    sdf.update(summarise, stateful=True)
    app.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
from row_summary import update  # bench/ is sys.path[0] when run as a script


def summarise(value: dict, state) -> None:
    state.set("summary", update(state.get("summary", None), value))


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

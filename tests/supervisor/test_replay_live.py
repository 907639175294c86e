"""The demo's replay on a real stack: broker, Spark, the supervisor and its replica.

A preview changes nothing and counts per car exactly what it counts per partition; applying
it stops the replica, moves the committed offsets to the beginning, starts the replica
again, and the Spark summaries then count every record read again as a duplicate, no more
and no fewer, with no gap. `ctl replay` prints the same preview, its other targets preview
what they say, `--apply` does it, and the event feed's topic says who moved what where.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from backend.chaos.verify import read_summaries
from backend.contracts import events_topic
from backend.contracts.control import ReplayAnswer, ReplayPreview
from backend.netutil import wait_until
from tests.replica.harness import EventLog
from tests.supervisor.conftest import REPO


def _totals(kafka, group: str) -> tuple[int, int, int]:
    """(records summarised, duplicates, gaps) over every stream."""
    s = read_summaries(kafka, group).values()
    return (sum(int(x.get("count", 0)) for x in s), sum(int(x.get("duplicates", 0)) for x in s),
            sum(int(x.get("gaps", 0)) for x in s))


@pytest.mark.slow  # a minute, mostly waiting for the replica: the second lane
@pytest.mark.timeout(300)
def test_a_replay_to_the_beginning_is_read_again_as_duplicates_and_nothing_is_lost(
        backend_factory, kafka, spark_remote) -> None:
    suffix = uuid.uuid4().hex[:8]
    group, topic = f"replay-{suffix}", f"telemetry-{suffix}"
    # one replica: no rebalance re-reads anything, so every duplicate is the replay's
    b = backend_factory(group, topic, "--spark-remote", spark_remote, "--replicas", "1",
                        "--partitions", "2", "--streams", "6", "--rate", "100",
                        "--no-standby")
    events = EventLog(kafka, events_topic(group))

    def ctl(*args: str) -> str:  # as the workshop guide types it
        done = subprocess.run([sys.executable, "-m", "backend.cli", "ctl", "--data-dir",
                               str(b.data_dir), *args], cwd=REPO, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, f"ctl {' '.join(args)}: {done.stderr}"
        return done.stdout

    try:
        wait_until(lambda: _totals(kafka, group)[0] >= 300, 120, interval=1.0,
                   what="300 records summarised")
        preview = b.client.replay_preview("earliest")
        assert preview.group_state == "Stable" and preview.replays >= 300
        assert [m.partition for m in preview.partitions] == [0, 1]
        assert all(m.new == m.log_start for m in preview.partitions)
        assert preview.cars_complete
        assert sum(c.replays for c in preview.cars) == preview.replays  # the same records
        assert len(preview.cars) == 6 and all(c.replays > 0 for c in preview.cars)
        shown = ctl("replay", "--to", "earliest")
        assert shown.startswith(f"PREVIEW (nothing changed): group {group} on {topic} "
                                "to earliest")
        assert "add --apply to do it" in shown and preview.cars[-1].car in shown
        # the guide's other previews: a time on some partitions, a shift back
        some = ReplayPreview.model_validate_json(
            ctl("replay", "--to-datetime", "2m ago", "--partitions", "1", "--json"))
        assert [m.partition for m in some.partitions] == [1]
        back = ReplayPreview.model_validate_json(ctl("replay", "--shift-by", "-50", "--json"))
        assert all(0 < m.replays <= 50 and m.skips == 0 for m in back.partitions)

        _, dups_before, _ = _totals(kafka, group)
        answer = ReplayAnswer.model_validate_json(
            ctl("replay", "--to", "earliest", "--apply", "--json"))
        assert answer.read_back_matches and not answer.refused
        assert answer.stopped == ["ada"] and answer.started == ["ada"]
        assert all(m.new == m.log_start for m in answer.applied.partitions)
        assert answer.applied.replays >= preview.replays  # the fleet went on producing

        want = dups_before + answer.applied.replays
        wait_until(lambda: _totals(kafka, group)[1] >= want, 120, interval=1.0,
                   what=f"{answer.applied.replays} records read again")
        _, dups, gaps = _totals(kafka, group)
        assert (dups, gaps) == (want, 0)
        told = wait_until(lambda: events.of("offsets_reset"), 30, what="the replay's event")
        assert told[0]["by"] == "ctl" and told[0]["target"] == "earliest"
        assert told[0]["replays"] == answer.applied.replays
    finally:
        events.close()

"""The share group's replicas under a real supervisor, beside the consumer group's, on one
topic of two partitions: started, scaled and killed through the control API and `ctl`.

Three replicas of each: the consumer group's third owns no partition (the golden rule),
every share-group replica is assigned partitions and summarises records.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.contracts.control import ScaleAnswer
from backend.netutil import wait_until
from tests.supervisor.conftest import REPO, Backend, start_backend, stop_backend

WITHIN_S = 120.0


@pytest.fixture
def both(kafka, spark_remote, tmp_path: Path) -> Iterator[Backend]:
    suffix = uuid.uuid4().hex[:8]
    b = start_backend(kafka, tmp_path / "data", f"side-{suffix}", f"telemetry-{suffix}",
                      "--spark-remote", spark_remote, "--replicas", "3", "--partitions", "2",
                      "--streams", "6", "--rate", "100", "--no-standby",
                      "--share-group", f"queue-{suffix}")
    try:
        yield b
    finally:
        stop_backend(b)


def _ctl(b: Backend, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "backend.cli", "ctl", "--data-dir",
                           str(b.data_dir), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.timeout(300)
def test_share_replicas_beyond_the_partitions_all_work_where_the_consumer_groups_idle(
        both: Backend) -> None:
    b = both
    started = ScaleAnswer.model_validate_json(_ctl(b, "share", "scale", "3", "--json")).started
    assert len(started) == 3

    def settled():
        st = b.status()
        share = st.share
        consumers_own = sorted(len(r.partitions) for r in st.running)
        sharers = [r for r in share.running if r.member and r.partitions]
        return (st, share) if consumers_own == [0, 1, 1] and len(sharers) == 3 else None

    _, share = wait_until(settled, WITHIN_S, interval=1.0,
                           what="consumer replicas 1+1+0 partitions, three sharers assigned")
    logs = b.data_dir / "share-replicas"
    wait_until(lambda: all("share batch:" in (logs / f"{n}.log").read_text(errors="replace")
                           for n in started), WITHIN_S,
               what="every share replica summarising a batch")
    assert share.members == 3

    victim = started[1]
    assert _ctl(b, "share", "kill", victim).startswith(f"{victim}: ")
    def shows_the_kill() -> str | None:
        text = _ctl(b, "status")
        return text if "share group" in text and "SIGKILL" in text else None

    text = wait_until(shows_the_kill, 30, what="status showing the killed share replica")
    assert f"share group {share.group}" in text
    still = [r.name for r in b.status().share.running]
    assert sorted(still) == sorted(set(started) - {victim})

    refused = subprocess.run([sys.executable, "-m", "backend.cli", "ctl", "--data-dir",
                              str(b.data_dir), "share", "kill"], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert refused.stderr.strip().count("\n") == 0 and "NAME" in refused.stderr

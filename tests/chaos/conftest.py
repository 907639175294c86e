"""`groupscope chaos` run in the test's own process, as the guides show it.

A second Python would only add its start-up; `backend.cli.main` is what the installed command
runs. The data directory (where `chaos` keeps the replicas' logs, and finds the cluster it
may kill nodes of) is the test's own, kept in test-artifacts/ under the run's name.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.broker.nodes import MAILBOX, EmbeddedCluster
from backend.cli import main

# The live runs' common shape: 24 cars on 6 partitions at 300 msg/s, 3 replicas (1 to 4),
# an action every 3-6 s, 150 s to drain.
LOAD = ("--streams", "24", "--partitions", "6", "--rate", "300", "--replicas", "3",
        "--min-replicas", "1", "--max-replicas", "4", "--every", "3", "6",
        "--drain-timeout", "150")


@pytest.fixture
def chaos(spark_remote: str, artifacts_dir: Path, unique: str,
          monkeypatch: pytest.MonkeyPatch) -> Callable[..., dict[str, Any]]:
    """chaos(bootstrap, *options) runs `groupscope chaos` and returns its JSON report, having
    checked the exit code says what the report does."""
    data = artifacts_dir / f"chaos-{unique}"
    data.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("GROUPSCOPE_DATA", str(data))

    def run(bootstrap: str, *options: str) -> dict[str, Any]:
        report = data / "report.json"
        code = main(["chaos", "--bootstrap", bootstrap, "--spark-remote", spark_remote, *LOAD,
                     "--name", f"chaos-{unique}", "--json", str(report), *options])
        result: dict[str, Any] = json.loads(report.read_bytes())
        assert code == (0 if result["ok"] else 1)
        return result

    run.data = data  # type: ignore[attr-defined]
    return run


@contextlib.contextmanager
def nodes_served(cluster: EmbeddedCluster, data: Path) -> Iterator[None]:
    """The session's cluster answering node requests from `data`/broker, as `groupscope
    broker` answers them from its data directory: what `chaos --broker-kills` asks it."""
    link = data / "broker"
    link.symlink_to(cluster.data_dir, target_is_directory=True)
    (cluster.data_dir / MAILBOX).mkdir(exist_ok=True)
    stop = threading.Event()

    def serve() -> None:
        while not stop.wait(0.25):
            cluster.serve_requests()

    server = threading.Thread(target=serve, name="node-requests", daemon=True)
    server.start()
    try:
        yield
    finally:
        stop.set()
        server.join(60)
        cluster.serve_requests()  # one asked as the server stopped
        link.unlink()

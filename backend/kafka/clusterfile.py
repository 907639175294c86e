"""`cluster.json`: what the `groupscope broker` process tells other processes of its nodes.

The cluster process (backend/broker/nodes.py) writes it into its data directory while it
runs: its pid, its nodes with their ports and pids, and the cluster's bootstrap. Reading it is
a client's business (the settings find every node's address here, so a client still
bootstraps with node 1 down), which is why it lives on the client side and the runtime
imports it, not the other way round.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from backend.paths import data_dir

CLUSTER_FILE = "cluster.json"  # nodes, ports, pids: what the supervisor reads


def read_cluster(broker_dir: Path) -> dict | None:
    """`cluster.json` of a running cluster process, or None (none, or its process is gone)."""
    try:
        data = json.loads((Path(broker_dir) / CLUSTER_FILE).read_text())
        os.kill(int(data["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return data


def running_bootstrap(port: int) -> str | None:
    """Every node's address of the embedded cluster running from this stack's data directory
    whose first node listens on `port`, or None (no such cluster)."""
    cluster = read_cluster(data_dir() / "broker")
    if cluster is None or cluster.get("brokers", 1) < 2:
        return None
    first = str(cluster.get("bootstrap", "")).split(",")[0]
    return cluster["bootstrap"] if first.endswith(f":{port}") else None

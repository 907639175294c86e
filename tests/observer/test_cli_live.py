"""`groupscope snapshot` and `groupscope groups` against the real broker."""

from __future__ import annotations

import json

import pytest

from backend.cli import main
from backend.contracts import SNAPSHOT_JSON
from backend.netutil import free_port, wait_until
from tests.observer.conftest import create_topic


@pytest.mark.timeout(120)
def test_snapshot_json_and_groups_list_a_live_group(kafka, unique, members_factory,
                                                   producer_factory, capsys):
    topic, group = f"cli-{unique}", f"cli-group-{unique}"
    create_topic(kafka, topic, 3)
    producer_factory(topic, rate=30.0)
    members_factory(group, topic, "consumer").start("cli-a")
    boot = ["--bootstrap", kafka.bootstrap]

    def snapshot():
        capsys.readouterr()
        assert main(["snapshot", "--group", group, "--json", "--samples", "1", *boot]) == 0
        snap = SNAPSHOT_JSON.validate_json(capsys.readouterr().out)
        ok = (snap.state == "Stable" and len(snap.members) == 1
              and all(p.committed is not None for p in snap.partitions))
        return snap if ok else None

    snap = wait_until(snapshot, timeout=60, interval=0.5, what="a stable one-member group")
    assert snap.group == group and snap.topic == topic and snap.protocol == "consumer"
    assert snap.members[0].client_id == "cli-a"
    assert sorted(snap.members[0].partitions) == [0, 1, 2]
    assert {s.stream_id for s in snap.streams} >= {"car-00", "car-01"}

    assert main(["groups", "--json", *boot]) == 0
    rows = {r["group"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[group]["members"] == 1 and rows[group]["protocol"] == "consumer"
    assert rows[group]["state"] == "Stable" and rows[group]["lag_messages"] >= 0
    assert rows[group]["health"] in ("OK", "WARN")

    assert main(["snapshot", "--group", group, "--samples", "1", *boot]) == 0
    text = capsys.readouterr().out
    assert f"group {group}" in text and "cli-a" in text


def test_snapshot_user_errors_are_one_line(capsys):
    port = free_port()
    assert main(["snapshot", "--bootstrap", f"127.0.0.1:{port}", "--samples", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("groupscope snapshot:") and "\n" not in err
    assert "Traceback" not in err

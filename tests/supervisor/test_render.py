"""`groupscope ctl status` rendering: aligned table, stale and external members, colour."""

from __future__ import annotations

import re

from backend.contracts.control import (
    ExternalMember,
    FleetState,
    ReplicaInfo,
    ReplicaOptions,
    Status,
)
from backend.pool.names import colour_for
from backend.supervisor.cli import render_status, table


def _replica(name: str, state: str, member: bool, parts: tuple[int, ...], **kw) -> ReplicaInfo:
    return ReplicaInfo(name=name, colour=colour_for(name), state=state, pid=100 + len(name),
                       started_at=1000.0, ended_at=kw.pop("ended_at", None),
                       returncode=kw.pop("returncode", None),
                       exit_signal=kw.pop("exit_signal", None), protocol="classic",
                       assignor="range", exactly_once=False, member=member, partitions=parts,
                       **kw)


STATUS = Status(
    group="g", topic="telemetry", partitions=6, options=ReplicaOptions(),
    replicas=(_replica("ada", "running", True, (0, 1, 2)),
              _replica("bruno", "killed", True, (3, 4), ended_at=1010.0, returncode=-9,
                       exit_signal="SIGKILL")),
    external=(ExternalMember(client_id="visitor", member_id="m-1", host="/10.0.0.9",
                             colour=colour_for("visitor"), partitions=(5,)),),
    group_state="Stable",
    fleet=FleetState(running=True, topic="telemetry", streams=12, target_rate=None, rate=10.0,
                     delivered=5, queued=0, failed=0),
    max_replicas=64)


def test_status_table_rows_and_alignment() -> None:
    text = render_status(STATUS)
    lines = text.splitlines()
    assert lines[0] == ("group g (Stable) on topic telemetry, 6 partitions; "
                        "1 replicas running, 1 external")
    header, ada, bruno, visitor = lines[1:5]
    assert header.split()[:6] == ["NAME", "STATE", "PID", "UPTIME", "MEMBER", "PARTITIONS"]
    assert ada.split()[:6] == ["ada", "running", "103", ada.split()[3], "yes", "0,1,2"]
    assert bruno.split()[:6] == ["bruno", "killed", "105", "10s", "stale", "3,4"]
    assert bruno.split()[-1] == "SIGKILL"
    assert visitor.split()[:2] == ["visitor", "external"] and "host /10.0.0.9" in visitor
    # columns line up: every row's STATE starts where the header's does
    col = header.index("STATE")
    assert all(row[col - 2:col] == "  " and row[col] != " " for row in (ada, bruno, visitor))
    assert "target unlimited msg/s" in text
    assert "\x1b[" not in text


def test_colour_paints_only_the_names() -> None:
    text = render_status(STATUS, colour=True)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert plain == render_status(STATUS)
    ada_rgb = ";".join(str(int(colour_for("ada")[i:i + 2], 16)) for i in (1, 3, 5))
    assert f"\x1b[1;38;2;{ada_rgb}mada\x1b[0m" in text
    assert text.count("\x1b[0m") == 3  # ada, bruno, visitor


def test_table_handles_empty_rows() -> None:
    assert table(["A", "BB"], []) == "A  BB"
    assert table(["A", "B"], [["xyz", "1"]]) == "A    B\nxyz  1"


def test_status_shows_each_replica_cap_and_membership_and_the_options() -> None:
    capped = STATUS.model_copy(update={
        "replicas": (_replica("ada", "running", True, (0, 1), static=True, max_rate=50.0),
                     _replica("bruno", "running", True, (2,))),
        "external": (),
        "options": ReplicaOptions(static=True, max_rate=50.0)})
    lines = render_status(capped).splitlines()
    header, ada, bruno = lines[1:4]
    cap = header.index("CAP")
    assert ada[cap:].split()[0] == "50/s" and bruno[cap:].split()[0] == "-"
    assert "classic/range/static" in ada and "classic/range/static" not in bruno
    assert lines[-2] == ("new replicas: classic/range, at-least-once, static; "
                         "capacity: at most 50 msg/s each")
    assert "capacity: no cap" in render_status(STATUS)

"""Process control against real group members (the stand-in consumer), real broker.

Fast checks of what does not need Spark: a kill takes the replica's own children, a SIGKILLed
supervisor takes its replicas (PR_SET_PDEATHSIG), external members are visible but not
controllable, fleet and topic controls report real numbers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backend.contracts import summaries_topic
from backend.fleet.simulator import stream_ids
from backend.kafka.partitioner import partition_for
from backend.netutil import wait_until
from backend.paths import cache_dir
from backend.proc import run as run_process
from backend.proc import spawn
from backend.supervisor.client import ControlError
from tests.supervisor.conftest import REPO, SESSION_TIMEOUT_S, STANDIN, pid_alive


def _ctl(backend, *args: str) -> subprocess.CompletedProcess:
    return run_process([sys.executable, "-m", "backend.cli", "ctl", "--data-dir",
                        str(backend.data_dir), *args], cwd=REPO, capture_output=True,
                       text=True, timeout=60)


def test_kill_takes_children_and_a_killed_supervisor_takes_its_replicas(
        backend_factory, standin_command, unique, tmp_path: Path) -> None:
    b = backend_factory(f"g-{unique}", f"t-{unique}", "--replicas", "2", "--no-fleet",
                        "--stop-grace", "5", replica_command=standin_command)
    wait_until(lambda: b.members() == ["ada", "bruno"], 60, what="ada and bruno in the group")
    st = b.status()
    pids = {r.name: r.pid for r in st.replicas}
    child_dir = Path(standin_command[-1])
    child = int(wait_until(lambda: (child_dir / "ada.pid").read_text(), 10, what="child pid"))
    assert pid_alive(child)

    b.client.kill("ada")
    wait_until(lambda: b.status().replicas[-1].state == "killed", 10, what="ada reaped")
    ada = next(r for r in b.status().replicas if r.name == "ada")
    assert (ada.exit_signal, ada.pid, ada.alive) == ("SIGKILL", pids["ada"], False)
    assert not pid_alive(pids["ada"])
    assert not pid_alive(child), "the replica's own child outlived the kill"
    t0 = time.monotonic()
    wait_until(lambda: b.members() == ["bruno"], SESSION_TIMEOUT_S + 10,
               what="the broker to drop ada after its session timeout")
    assert time.monotonic() - t0 <= SESSION_TIMEOUT_S + 10

    # the supervisor itself is SIGKILLed: no handler runs, PDEATHSIG still ends bruno
    os.kill(b.proc.pid, signal.SIGKILL)
    b.proc.wait(10)
    wait_until(lambda: not pid_alive(pids["bruno"]), 10, what="bruno to die with its supervisor")
    # its control.json is left behind; ctl says what happened instead of a connection error
    stale = _ctl(b, "status")
    assert stale.returncode == 2 and "no longer running" in stale.stderr, stale.stderr


def test_external_member_is_visible_but_not_controllable(
        backend_factory, standin_command, unique, kafka) -> None:
    b = backend_factory(f"g-{unique}", f"t-{unique}", "--replicas", "1", "--no-fleet",
                        replica_command=standin_command)
    visitor = spawn(
        [sys.executable, str(STANDIN), "--id", "visitor", "--group", b.group, "--topic",
         b.topic, "--bootstrap", kafka.bootstrap], cwd=REPO, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: b.members() == ["ada", "visitor"], 60, what="visitor joins")
        st = wait_until(lambda: (s := b.status()).external and s, 10, what="external listed")
        assert [m.client_id for m in st.external] == ["visitor"]
        assert [r.name for r in st.replicas] == ["ada"] and st.replicas[0].member
        assert sorted(st.replicas[0].partitions + st.external[0].partitions) == list(range(6))
        for action in (b.client.kill, b.client.stop, b.client.restart):
            with pytest.raises(ControlError) as err:
                action("visitor")
            assert err.value.status == 409 and "external" in str(err.value)
        assert visitor.poll() is None  # untouched

        table = _ctl(b, "status")
        assert table.returncode == 0, table.stderr
        line = next(ln for ln in table.stdout.splitlines() if ln.startswith("visitor"))
        assert "external" in line
        data = json.loads(_ctl(b, "status", "--json").stdout)
        assert [m["client_id"] for m in data["external"]] == ["visitor"]
        refused = _ctl(b, "kill", "visitor")
        assert refused.returncode == 1 and "external" in refused.stderr
    finally:
        visitor.terminate()
        visitor.wait(30)


def test_fleet_and_partitions_report_real_numbers(
        backend_factory, standin_command, unique, kafka) -> None:
    b = backend_factory(f"g-{unique}", f"t-{unique}", "--replicas", "0", "--streams", "6",
                        "--rate", "20", "--commit", "auto", replica_command=standin_command)
    st = b.status()
    assert st.fleet.running and st.fleet.streams == 6 and st.partitions == 6
    assert st.options.commit == "auto"
    wait_until(lambda: b.status().fleet.delivered > 0, 30, what="the fleet to deliver")

    assert b.client.set_rate(50).target_rate == 50
    assert b.client.set_streams(9).streams == 9
    out = _ctl(b, "streams", "10")
    assert out.returncode == 0 and "10 streams" in out.stdout

    change = b.client.add_partitions(8)
    expected = [(s, partition_for(s, 6), partition_for(s, 8)) for s in stream_ids(10)
                if partition_for(s, 6) != partition_for(s, 8)]
    assert (change.before, change.after, change.streams_checked) == (6, 8, 10)
    assert [(m.stream, m.was, m.now) for m in change.moved] == expected and expected
    from backend.kafka.clients import quiet_admin

    md = quiet_admin(kafka).list_topics(timeout=10)
    assert len(md.topics[b.topic].partitions) == 8
    assert len(md.topics[summaries_topic(b.group)].partitions) == 8
    with pytest.raises(ControlError) as err:
        b.client.add_partitions(4)
    assert err.value.status == 409 and b.status().partitions == 8

    table = _ctl(b, "partitions", "9")
    assert table.returncode == 0, table.stderr
    assert "8 -> 9 partitions" in table.stdout

    bad = _ctl(b, "scale", "abc")
    assert bad.returncode == 2 and "N must be a whole number" in bad.stderr
    bad = _ctl(b, "scale", "-1")
    assert bad.returncode == 1 and "refused (422)" in bad.stderr and "not -1" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert b.status().replicas == ()

    assert not b.client.fleet_stop().running
    with pytest.raises(ControlError) as err:
        b.client.fleet_stop()
    assert err.value.status == 409
    assert _ctl(b, "fleet", "start").returncode == 0
    assert b.status().fleet.running


def test_the_workshop_guides_option_lines_set_what_they_say(
        backend_factory, standin_command, unique) -> None:
    """The workshop guide's `ctl options` and `ctl capacity` lines, as a presenter types them,
    change the options the supervisor reports (no replica runs: nothing restarts)."""
    b = backend_factory(f"g-{unique}", f"t-{unique}", "--replicas", "0", "--no-fleet",
                        replica_command=standin_command)
    for line, expect in (
            (("options", "--protocol", "consumer", "--assignor", "uniform"),
             {"protocol": "consumer", "assignor": "uniform"}),
            (("options", "--static"), {"static": True}),
            (("options", "--commit", "before-processing"), {"commit": "before-processing"}),
            (("capacity", "50"), {"max_rate": 50.0})):
        done = _ctl(b, *line)
        assert done.returncode == 0, f"ctl {' '.join(line)}: {done.stderr}"
        options = b.status().options.model_dump()
        assert {key: options[key] for key in expect} == expect, (line, options)
    refused = _ctl(b, "options", "--protocol", "classic", "--assignor", "uniform")
    assert refused.returncode == 1 and "uniform" in refused.stderr
    assert b.status().options.protocol == "consumer"


def test_ctl_and_snapshot_find_the_stack_from_any_directory(
        backend_factory, standin_command, unique, tmp_path: Path) -> None:
    """No --data-dir, no GROUPSCOPE_DATA, run from a directory with no .groupscope: the
    supervisor's entry in the per-user list of running stacks is enough."""
    # a cache of its own keeps other stacks out of the list; the jars are borrowed, not
    # fetched again (that took 40 s)
    cache = tmp_path / "cache"
    cache.mkdir()
    for entry in cache_dir().iterdir():
        if entry.name not in ("running", "logs"):
            (cache / entry.name).symlink_to(entry)
    b = backend_factory(f"g-{unique}", f"t-{unique}", "--replicas", "1", "--no-fleet",
                        replica_command=standin_command, env={"GROUPSCOPE_CACHE": str(cache)})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("GROUPSCOPE_DATA", "GROUPSCOPE_BOOTSTRAP", "GROUPSCOPE_KAFKA_CONFIG")}
    env.update(GROUPSCOPE_CACHE=str(cache), PYTHONPATH=str(REPO))

    def run(*args: str) -> subprocess.CompletedProcess:
        return run_process([sys.executable, "-m", "backend.cli", *args], cwd=elsewhere,
                           env=env, capture_output=True, text=True, timeout=60)

    status = run("ctl", "--json", "status")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["group"] == b.group
    snap = run("snapshot", "--group", b.group, "--json", "--samples", "1")
    assert snap.returncode == 0, snap.stderr
    assert json.loads(snap.stdout)["group"] == b.group
    assert not (elsewhere / ".groupscope").exists()

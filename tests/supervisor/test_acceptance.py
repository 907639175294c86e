"""The control API end to end: it drives real `groupscope replica` processes on a real broker.

One supervisor (a real `groupscope backend` process) for the module, with real replicas on
the real Spark Connect engine and the fleet simulator producing. The tests run in order:
refusals first (nothing may change), then scale / kill / stop / restart, each time waiting
until the broker's membership matches, then SIGTERM of the supervisor.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from backend.contracts.control import ReplicaInfo
from backend.contracts.history import (
    EPISODES_JSON,
    HISTORY_FILE,
    KILLED,
    SCALED,
    STARTED,
    STOPPED,
    Cause,
    Episode,
)
from backend.netutil import wait_until
from backend.supervisor.client import ControlClient, ControlError
from tests.supervisor.conftest import (
    SESSION_TIMEOUT_S,
    Backend,
    pid_alive,
    pids_with_arg,
    start_backend,
    stop_backend,
)

# A replica has to start Python, open a Spark Connect session and join; on a loaded 2-core
# machine several starting at once take a while. A crash is bounded by the session timeout
# (plus the rebalance); a graceful stop first finishes its batch and commits, and is bounded
# by the supervisor's grace period (then SIGKILL, then the session timeout).
JOIN_TIMEOUT_S = 150.0
STOP_GRACE_S = 30.0
CRASH_TIMEOUT_S = SESSION_TIMEOUT_S + 10.0
LEAVE_TIMEOUT_S = STOP_GRACE_S + SESSION_TIMEOUT_S
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def backend(kafka, spark_remote, tmp_path_factory) -> Iterator[Backend]:
    import uuid

    suffix = uuid.uuid4().hex[:8]
    b = start_backend(kafka, tmp_path_factory.mktemp("supervisor"), f"accept-{suffix}",
                      f"telemetry-{suffix}", "--spark-remote", spark_remote,
                      "--replicas", "3", "--streams", "6", "--rate", "20",
                      "--stop-grace", str(STOP_GRACE_S))
    try:
        yield b
    finally:
        stop_backend(b)
        if TIMINGS:
            print("\nsupervisor acceptance timings (s): " +
                  ", ".join(f"{k}={v:.1f}" for k, v in TIMINGS.items()))


def _expect_members(b: Backend, names: list[str], timeout: float, label: str) -> float:
    """Wait until the broker reports exactly `names`; return how long it took."""
    t0 = time.monotonic()
    try:
        wait_until(lambda: b.members() == sorted(names), timeout, interval=0.25,
                   what=f"group members {sorted(names)} ({label})")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; broker has {b.members()}; supervisor says "
                             f"{[(r.name, r.state) for r in b.status().replicas]}\n"
                             f"{b.log_tail()}") from None
    took = time.monotonic() - t0
    TIMINGS[label] = took
    return took


def _running(b: Backend) -> list[str]:
    return sorted(r.name for r in b.status().replicas if r.state == "running")


def _exited(b: Backend, name: str) -> ReplicaInfo:
    """The replica's record once its process has ended and been reaped."""
    def check() -> ReplicaInfo | None:
        r = next(r for r in b.status().replicas if r.name == name)
        return None if r.alive else r

    t0 = time.monotonic()
    info = wait_until(check, STOP_GRACE_S + 10, what=f"{name} to exit")
    TIMINGS[f"{name} exit after leaving"] = time.monotonic() - t0
    return info


def _fingerprint(b: Backend) -> tuple:
    """Everything a refused request must leave untouched."""
    st = b.status()
    fleet = st.fleet
    return (tuple((r.name, r.pid, r.state, r.restarts) for r in st.replicas),
            st.options, st.partitions, fleet and (fleet.target_rate, fleet.streams, fleet.running),
            tuple(e.action + e.replica for e in st.recent))


def _raw(b: Backend, method: str, path: str, body: bytes | None = None,
         token: str | None = "default", headers: dict[str, str] | None = None
         ) -> tuple[int, dict]:
    assert b.client is not None
    h = {"Content-Type": "application/json", **(headers or {})}
    if token == "default":
        token = b.client.token
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(b.client.url + path, data=body, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_starts_three_replicas_by_default(backend: Backend) -> None:
    _expect_members(backend, ["ada", "bruno", "chloe"], JOIN_TIMEOUT_S, "initial 3 join")
    st = backend.status()
    assert _running(backend) == ["ada", "bruno", "chloe"]
    assert all(r.member for r in st.replicas)
    owned = sorted(p for r in st.replicas for p in r.partitions)
    assert owned == list(range(6)), owned  # every partition has exactly one owner
    assert st.fleet and st.fleet.running
    # the replicas are what the brief says: `groupscope replica` on the real engine
    for r in st.replicas:
        cmdline = psutil.Process(r.pid).cmdline()
        assert "replica" in cmdline and r.name in cmdline, cmdline
    # the first joined alone: the others were started only after it said it was joining
    by_name = {r.name: r for r in st.replicas}
    first = by_name["ada"]
    assert first.log_file is not None
    joining = next(ln for ln in Path(first.log_file).read_text().splitlines()
                   if "; joining " in ln)
    joined_at = datetime.strptime(joining[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    for other in ("bruno", "chloe"):
        assert by_name[other].started_at is not None
        assert by_name[other].started_at > joined_at, (other, joining)


@pytest.mark.parametrize("method, path, body, token, status, fragment", [
    ("POST", "/replicas/nobody/kill", b"", "default", 404, "no replica named 'nobody'"),
    ("POST", "/replicas/nobody/stop", b"", "default", 404, "no replica named"),
    ("POST", "/replicas/nobody/restart", b"", "default", 404, "no replica named"),
    ("POST", "/replicas/..%2f..%2fetc/kill", b"", "default", 404, "no such endpoint"),
    ("POST", "/scale", b'{"replicas": -1}', "default", 422, "greater than or equal to 0, not -1"),
    ("POST", "/scale", b'{"replicas": 10000}', "default", 422, "not 10000"),
    ("POST", "/scale", b'{"replicas": "5"}', "default", 422, "valid integer, not '5'"),
    ("POST", "/scale", b'{"replicas": 2.5}', "default", 422, "valid integer"),
    ("POST", "/scale", b'{"replicas": true}', "default", 422, "not True"),
    ("POST", "/scale", b'{"replicas": null}', "default", 422, "not None"),
    ("POST", "/scale", b"{}", "default", 422, "missing field 'replicas'"),
    ("POST", "/scale", b'{"replicas": 1, "force": true}', "default", 422, "unknown field"),
    ("POST", "/scale", b'{"replicas": 1', "default", 422, "not valid JSON"),
    ("POST", "/scale", b"[1]", "default", 422, "valid dictionary"),
    ("POST", "/scale", b'{"replicas": 1}', None, 401, "missing Authorization"),
    ("POST", "/scale", b'{"replicas": 1}', "not-the-token", 403, "wrong token"),
    ("POST", "/replicas/ada/kill", b"", None, 401, "missing Authorization"),
    ("POST", "/replicas/ada/kill", b"", "not-the-token", 403, "wrong token"),
    ("POST", "/fleet/rate", b'{"rate": "fast"}', "default", 422, "valid number"),
    ("POST", "/fleet/rate", b'{"rate": -5}', "default", 422, "not -5"),
    ("POST", "/fleet/streams", b'{"streams": 0}', "default", 422, "greater than or equal to 1"),
    ("POST", "/partitions", b'{"partitions": "8"}', "default", 422, "valid integer"),
    ("POST", "/partitions", b'{"partitions": 3}', "default", 409, "never remove"),
    ("POST", "/options", b'{"protocol": "eager"}', "default", 422, "'classic' or 'consumer'"),
    ("POST", "/options", b'{"protocol": "consumer", "assignor": "roundrobin"}', "default",
     422, "does not work with the consumer protocol"),
    ("POST", "/options", b'{"exactly_once": "yes"}', "default", 422, "valid boolean"),
    ("POST", "/nothing-here", b"{}", "default", 404, "no such endpoint"),
    ("GET", "/scale", None, "default", 405, "GET is not allowed on /scale"),
    ("POST", "/replicas", b'{"name": "x"}', "default", 422, "unknown field 'name'"),
    ("DELETE", "/replicas", None, "default", 405, "not allowed"),
])
def test_invalid_requests_are_refused_and_change_nothing(
        backend: Backend, method: str, path: str, body: bytes | None, token: str | None,
        status: int, fragment: str) -> None:
    before = _fingerprint(backend)
    code, payload = _raw(backend, method, path, body, token)
    assert code == status, payload
    assert fragment in payload["error"], payload
    assert _fingerprint(backend) == before


def test_oversized_and_foreign_host_requests_are_refused(backend: Backend) -> None:
    before = _fingerprint(backend)
    code, payload = _raw(backend, "POST", "/scale", b" " * (70 * 1024))
    assert code == 413, payload
    code, payload = _raw(backend, "POST", "/scale", b'{"replicas": 1}',
                         headers={"Host": "attacker.example:80"})
    assert code == 403, payload
    assert _fingerprint(backend) == before


def test_openapi_describes_every_route(backend: Backend) -> None:
    doc = backend.client.openapi()
    assert doc["openapi"].startswith("3.")
    for path in ("/status", "/replicas", "/replicas/{name}/kill", "/replicas/{name}/stop",
                 "/replicas/{name}/restart", "/scale", "/options", "/fleet/rate",
                 "/fleet/streams", "/partitions"):
        assert path in doc["paths"], path
    assert doc["paths"]["/scale"]["post"]["security"] == [{"bearer": []}]


def test_scale_kill_stop_restart_match_the_broker(backend: Backend) -> None:
    b = backend
    c: ControlClient = b.client
    _expect_members(b, ["ada", "bruno", "chloe"], JOIN_TIMEOUT_S, "initial 3 join")

    out = c.scale(5)
    assert (out.started, out.stopping) == (("dmitri", "elif"), ())
    _expect_members(b, ["ada", "bruno", "chloe", "dmitri", "elif"], JOIN_TIMEOUT_S,
                    "scale 3->5 join")

    out = c.scale(2)
    assert out.started == () and sorted(out.stopping) == ["chloe", "dmitri", "elif"]
    _expect_members(b, ["ada", "bruno"], LEAVE_TIMEOUT_S, "scale 5->2 leave")
    gone = ("chloe", "dmitri", "elif")

    def exited() -> dict | None:
        d = {r.name: r for r in b.status().replicas if r.name in gone}
        return d if len(d) == 3 and not any(r.alive for r in d.values()) else None

    stopped = wait_until(exited, STOP_GRACE_S + 10, what="three stopped replicas to exit")
    assert {r.state for r in stopped.values()} == {"stopped"}
    assert all(r.returncode == 0 and not r.forced for r in stopped.values()), stopped

    # kill: a crash; the broker notices after the session timeout
    bruno_pid = c.kill("bruno").pid
    _expect_members(b, ["ada"], CRASH_TIMEOUT_S, "kill bruno")
    assert not pid_alive(bruno_pid)
    bruno = _exited(b, "bruno")
    assert (bruno.state, bruno.exit_signal) == ("killed", "SIGKILL")
    with pytest.raises(ControlError) as err:
        c.kill("bruno")
    assert err.value.status == 409

    # restart a killed replica: same name, new process
    restarted = c.restart("bruno")
    assert restarted.pid != bruno_pid and restarted.restarts == 1
    _expect_members(b, ["ada", "bruno"], JOIN_TIMEOUT_S, "restart killed bruno")

    # stop: graceful leave, immediate rebalance
    c.stop("ada")
    _expect_members(b, ["bruno"], LEAVE_TIMEOUT_S, "stop ada")
    ada = _exited(b, "ada")
    assert ada.state == "stopped" and ada.returncode == 0

    # restart a running replica: leaves, comes back as a new member under the same name
    old_member = b.member_ids()["bruno"]
    old_pid = next(r.pid for r in b.status().replicas if r.name == "bruno")
    c.restart("bruno")
    t0 = time.monotonic()
    wait_until(lambda: b.member_ids().get("bruno", old_member) != old_member
               and b.members() == ["bruno"], JOIN_TIMEOUT_S, interval=0.25,
               what="bruno back as a new member")
    TIMINGS["restart running bruno"] = time.monotonic() - t0
    bruno = next(r for r in b.status().replicas if r.name == "bruno")
    assert bruno.state == "running" and bruno.pid != old_pid and bruno.restarts == 2
    assert not pid_alive(old_pid)


def test_the_memory_says_what_the_presenter_did_to_each_replica(backend: Backend) -> None:
    """The backend keeps the memory: `groupscope history` names each action of the test
    above on the episode it caused."""
    b = backend

    def episodes() -> list[Episode]:
        out = subprocess.run(
            [sys.executable, "-m", "backend.cli", "history", "--group", b.group, "--history",
             str(b.data_dir / HISTORY_FILE), "--bootstrap", b.kafka.bootstrap, "--since", "1h",
             "--json"], capture_output=True, text=True, timeout=60, check=True)
        return list(EPISODES_JSON.validate_json(out.stdout))

    def by(kind: str, replica: str) -> list[Cause]:
        return [c for e in episodes() for c in e.causes if c.kind == kind
                and c.member == replica]

    # the last restart's episode may still be written when this test starts
    wait_until(lambda: by(STOPPED, "ada"), 30, what="ada's stop in the memory")
    # one episode has the kill; on a loaded machine the group may not settle between the
    # actions above, and then they all fall in one rebalance, the kill its main cause
    (kill,) = [e for e in episodes() if KILLED in {c.kind for c in e.causes}]
    assert kill.cause == KILLED and "bruno" in kill.left
    assert "bruno killed (SIGKILL) by the presenter" in kill.causes[0].evidence
    # the scale's episodes may be written after the stop's on a loaded machine (CI: none yet)
    def scale_told() -> bool:
        eps = episodes()
        named = {n for e in eps for n in (*e.joined, *e.left)}
        # chloe ran from the start-up; dmitri and elif joined and were stopped at once, and a
        # starved observer may have had no look in the second or two one was listed: it has
        # no episode to be named in then. Every replica an episode names has its scale.
        return all(any(c.kind == SCALED and c.member == r for e in eps for c in e.causes)
                   for r in ("dmitri", "elif", "chloe") if r == "chloe" or r in named)

    try:
        wait_until(scale_told, 30, what="the scale to dmitri, elif and chloe in the memory")
    except TimeoutError as exc:
        did = ", ".join(f"{int(a.ts * 1000)} {a.action} {a.replica}"
                        for a in b.status().recent)
        raise AssertionError(f"{exc}; the supervisor did: {did}; the memory holds:\n"
                             + _told(episodes())) from None
    started = by(STARTED, "chloe")  # at the start-up, after ada (whose join began the group)
    assert started and all("at the demo's start-up" in c.evidence for c in started)


def _told(episodes: list[Episode]) -> str:
    """The episodes as a failure shows them: times, members, causes."""
    return "\n".join(
        f"  {e.start_ms}..{e.end_ms} {e.seen_as}: joined {list(e.joined)} left {list(e.left)}; "
        + "; ".join(f"{c.kind} {c.member}: {c.evidence}" for c in e.causes)
        for e in episodes)


def test_sigterm_of_the_supervisor_leaves_no_replica(backend: Backend) -> None:
    """Two replicas: bruno in the group, ada just started (SIGTERM catches it mid-start)."""
    b = backend
    assert b.client.scale(2).started == ("ada",)
    pids = [r.pid for r in b.status().replicas if r.alive]
    assert len(pids) == 2 and all(pid_alive(p) for p in pids)
    t0 = time.monotonic()
    os.kill(b.proc.pid, signal.SIGTERM)
    code = b.proc.wait(STOP_GRACE_S + 30)
    TIMINGS["supervisor SIGTERM to exit"] = time.monotonic() - t0
    assert code == 0, b.log_tail()
    left = [p for p in pids if pid_alive(p)]
    assert left == [], f"replica processes left behind: {left}"
    assert pids_with_arg("--group", b.group) == []
    assert not (b.data_dir / "control.json").exists()
    assert not (b.data_dir / "control.token").exists()
    _expect_members(b, [], LEAVE_TIMEOUT_S, "after supervisor SIGTERM")

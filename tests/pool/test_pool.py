"""ReplicaPool process control with plain child processes (no Kafka needed for these rules).

The replica command here is a short Python program; the pool appends the replica arguments
to it, which `python -c` simply ignores. Each test shuts its pool down in `finally`.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from backend.contracts.control import ReplicaOptions
from backend.netutil import wait_until
from backend.pool.processes import InvalidRequest, LaunchConfig, PoolError, ReplicaPool
from tests.supervisor.conftest import pid_alive

SLEEPER = "import time\nwhile True: time.sleep(1)"
# ignores SIGTERM, then says so in the file named by its first argument after -c
STUBBORN = ("import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "open(sys.argv[1], 'w').close()\nwhile True: time.sleep(1)")


def _reaped(pid: int) -> bool:
    """True once the pid is no child of ours any more, not even a zombie (checked without
    reaping it, so the pool's own reaper is never robbed)."""
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return False


def _execed(pid: int, code: str) -> bool:
    """The shim has exec'd the replica command (so PR_SET_PDEATHSIG is in force)."""
    return psutil.Process(pid).cmdline()[1:3] == ["-c", code]


@pytest.fixture
def make_pool(tmp_path: Path) -> Iterator:
    pools: list[ReplicaPool] = []

    def make(code: str, grace: float = 5.0, max_replicas: int = 8,
             args: tuple[str, ...] = (), standby: bool = False) -> ReplicaPool:
        cfg = LaunchConfig(group="g", topic="t", bootstrap="127.0.0.1:1",
                           command=(sys.executable, "-c", code, *args),
                           log_dir=tmp_path / "logs",
                           stop_grace=grace, standby=standby, standby_delay=0.2)
        pool = ReplicaPool(cfg, ReplicaOptions(), max_replicas=max_replicas)
        pools.append(pool)
        return pool

    try:
        yield make
    finally:
        for p in pools:
            p.shutdown(grace=2.0)


def test_crash_is_recorded_and_restart_revives_the_name(make_pool) -> None:
    pool = make_pool("import sys; sys.exit(3)")
    first = pool.start()
    assert first.name == "ada"
    assert pool.wait_for(lambda rs: not rs[0].alive, 10)
    ada = pool.get("ada")
    assert (ada.state, ada.returncode, ada.crashes, ada.exit_signal) == ("crashed", 3, 1, None)
    assert _reaped(first.pid)
    again = pool.restart("ada")
    assert again.name == "ada" and again.pid != first.pid and again.restarts == 1
    assert pool.wait_for(lambda rs: not rs[0].alive, 10)
    assert pool.get("ada").crashes == 2
    log = (Path(pool.config.log_dir) / "ada.log").read_text()
    assert log.count("start ada:") == 2 and "--id ada" in log


def test_stop_escalates_to_sigkill_after_the_grace_period(make_pool, tmp_path: Path) -> None:
    ready = tmp_path / "ignoring-sigterm"
    pool = make_pool(STUBBORN, grace=1.0, args=(str(ready),))
    pid = pool.start().pid
    wait_until(ready.exists, 10, what="the replica to ignore SIGTERM")
    assert pool.stop("ada").state == "stopping"
    assert pool.wait_for(lambda rs: not rs[0].alive, 10)
    ada = pool.get("ada")
    assert (ada.state, ada.forced, ada.exit_signal) == ("stopped", True, "SIGKILL")
    assert _reaped(pid)
    with pytest.raises(PoolError) as err:
        pool.stop("ada")
    assert err.value.status == 409


def test_scale_names_limits_and_newest_first(make_pool) -> None:
    pool = make_pool(SLEEPER, max_replicas=4)
    assert pool.scale(3) == {"started": ["ada", "bruno", "chloe"], "stopping": []}
    assert pool.scale(3) == {"started": [], "stopping": []}
    assert pool.scale(1) == {"started": [], "stopping": ["chloe", "bruno"]}
    assert pool.wait_for(lambda rs: [r.name for r in rs if r.alive] == ["ada"], 10)
    for bad in (-1, 5, 10_000, True, "2", 2.0):
        with pytest.raises(InvalidRequest):
            pool.scale(bad)  # type: ignore[arg-type]
    assert pool.live_names() == ["ada"]
    # freed names are reused, lowest first
    assert pool.scale(3)["started"] == ["bruno", "chloe"]
    with pytest.raises(PoolError):
        pool.kill("nobody")


def test_replicas_survive_the_thread_that_asked_for_them(make_pool) -> None:
    """PDEATHSIG follows the forking thread: spawning from a request thread must not kill."""
    pool = make_pool(SLEEPER)
    started: list[int] = []

    def request() -> None:  # like an HTTP request thread: asks, waits for the exec, ends
        pid = pool.start().pid
        wait_until(lambda: _execed(pid, SLEEPER), 10, what="the shim to exec the replica")
        started.append(pid)

    t = threading.Thread(target=request)
    t.start()
    t.join()
    pid = started[0]
    # give a wrongly parented child time to receive its death signal, measured by a condition
    assert not pool.wait_for(lambda rs: not rs[0].alive, 1.0)
    assert pid_alive(pid)


def test_restart_running_and_shutdown_reaps_everything(make_pool) -> None:
    pool = make_pool(SLEEPER)
    pool.scale(3)
    old = pool.get("bruno").pid
    assert pool.restart("bruno").state == "restarting"
    assert pool.wait_for(lambda rs: any(r.name == "bruno" and r.alive and r.pid != old
                                        for r in rs), 10)
    assert pool.get("bruno").restarts == 1 and _reaped(old)
    pids = [r.pid for r in pool.replicas() if r.alive]
    pool.shutdown(grace=5.0)
    assert all(_reaped(p) for p in pids)
    assert {r.state for r in pool.replicas()} == {"stopped"}
    with pytest.raises(PoolError, match="shutting down"):
        pool.start()


def test_options_apply_to_new_replicas_only(make_pool) -> None:
    pool = make_pool(SLEEPER)
    pool.start()
    opts = pool.set_options(protocol="consumer")
    assert (opts.protocol, opts.assignor) == ("consumer", "uniform")
    with pytest.raises(InvalidRequest):
        pool.set_options(assignor="cooperative-sticky")
    assert pool.options == opts
    pool.set_options(exactly_once=True)
    pool.start()
    ada, bruno = pool.get("ada"), pool.get("bruno")
    assert (ada.protocol, ada.exactly_once) == ("classic", False)
    assert (bruno.protocol, bruno.assignor, bruno.exactly_once) == ("consumer", "uniform", True)
    wait_until(lambda: psutil.Process(bruno.pid).cmdline()[-2:] == ["--commit",
                                                                   "transactional"], 10,
               what="bruno's command line")
    pool.set_options(commit="before-processing")
    assert (pool.options.commit, pool.options.protocol) == ("before-processing", "consumer")
    with pytest.raises(InvalidRequest, match="means commit transactional, not auto"):
        pool.set_options(exactly_once=True, commit="auto")
    assert pool.options.commit == "before-processing"  # a refusal changes nothing
    # a restart is the same replica again: it keeps its own options
    pool.restart("ada")
    assert pool.wait_for(lambda rs: any(r.name == "ada" and r.restarts == 1 and r.alive
                                        for r in rs), 10)
    ada = pool.get("ada")
    assert (ada.protocol, ada.assignor, ada.exactly_once) == ("classic", "range", False)


def _cmdline(pool: ReplicaPool, name: str) -> list[str]:
    """[] while the pid is between processes (exited, a zombie, not yet respawned)."""
    try:
        return psutil.Process(pool.get(name).pid).cmdline()
    except psutil.Error:
        return []


def _cap_in_cmdline(pool: ReplicaPool, name: str, cap: str | None) -> bool:
    """The replica's command line (once the shim has exec'd it) asks for `cap`, or no cap."""
    args = _cmdline(pool, name)
    if "-c" not in args:
        return False  # still the shim
    if cap is None:
        return "--max-rate" not in args
    return "--max-rate" in args and args[args.index("--max-rate") + 1] == cap


def test_capacity_applies_to_running_replicas_by_restarting_them(make_pool) -> None:
    pool = make_pool(SLEEPER)
    pool.start()
    pool.start()
    opts, restarting = pool.set_capacity(50.0)
    assert opts.max_rate == 50.0 and restarting == ["ada", "bruno"]
    assert pool.wait_for(lambda rs: sorted((r.name, r.restarts) for r in rs if r.alive
                                           and r.state == "running")
                         == [("ada", 1), ("bruno", 1)], 20)
    for name in ("ada", "bruno"):
        assert pool.get(name).max_rate == 50.0
        wait_until(lambda n=name: _cap_in_cmdline(pool, n, "50.0"), 10,
                   what=f"{name}'s command line with the cap")
    assert pool.set_capacity(50.0)[1] == []  # the same cap again restarts nothing
    pool.start()  # a new replica takes the cap too
    wait_until(lambda: _cap_in_cmdline(pool, "chloe", "50.0"), 10, what="chloe's cap")
    # a stopped replica revived later comes back with the cap then in force
    pool.stop("chloe")
    assert pool.wait_for(lambda rs: any(r.name == "chloe" and not r.alive for r in rs), 10)
    _, restarting = pool.set_capacity(None)
    assert restarting == ["ada", "bruno"]
    pool.restart("chloe")
    for name in ("ada", "bruno", "chloe"):
        wait_until(lambda n=name: pool.get(n).alive and _cap_in_cmdline(pool, n, None), 20,
                   what=f"{name} without a cap")
        assert pool.get(name).max_rate is None


def test_static_option_is_for_new_replicas(make_pool) -> None:
    pool = make_pool(SLEEPER)
    pool.start()
    assert pool.set_options(static=True).static
    assert pool.set_options(exactly_once=True).static  # other options keep it
    pool.start()
    assert not pool.get("ada").static and pool.get("bruno").static
    wait_until(lambda: "--static" in _cmdline(pool, "bruno"), 10, what="bruno's --static")


# A stand-in for `groupscope replica`: with --standby it says it is ready, waits for its order
# on stdin, moves its output to the order's log and says which replica it became; either way
# it then sleeps like a replica. Its arguments start after `-c CODE`.
STANDBY_STANDIN = """
import json, os, sys, time
args = sys.argv[1:]
if '--standby' in args:
    print('standby ready', flush=True)
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    order = json.loads(line)
    fd = os.open(order['log'], os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    args = order['argv']
print('I am', args[args.index('--id') + 1], '(standby flag)' if '--standby' in args else '',
      flush=True)
while True:
    time.sleep(1)
"""


def _standby_pid(pool: ReplicaPool, log_dir: Path) -> int:
    """The waiting standby's pid, once it has said it is ready."""
    log = log_dir / "standby.log"
    wait_until(lambda: log.exists() and "standby ready" in log.read_text(), 10,
               what="a standby ready")
    standby = pool._standby
    assert standby is not None and standby.poll() is None
    return standby.pid


def test_a_start_takes_the_warm_standby_and_a_new_one_follows(make_pool, tmp_path) -> None:
    logs = tmp_path / "logs"
    pool = make_pool(STANDBY_STANDIN, standby=True)
    first = pool.start()  # cold: no standby yet
    standby = _standby_pid(pool, logs)
    assert standby != first.pid
    second = pool.start()
    assert second.pid == standby  # the standby became the replica: no new process
    text = (logs / f"{second.name}.log").read_text()
    assert f"start {second.name} from the warm standby (pid {standby})" in text
    wait_until(lambda: f"I am {second.name}" in (logs / f"{second.name}.log").read_text(), 10,
               what="the standby running as the replica it was ordered to be")
    said = [ln for ln in (logs / f"{second.name}.log").read_text().splitlines()
            if ln.startswith("I am")]
    assert said == [f"I am {second.name} "]  # its order's arguments, without --standby
    wait_until(lambda: pool._standby is not None and pool._standby.pid != standby, 10,
               what="the next standby")
    nxt = _standby_pid(pool, logs)
    pool.shutdown(grace=2.0)
    for pid in (first.pid, second.pid, nxt):
        assert not pid_alive(pid)


def test_a_standby_that_died_waiting_leaves_the_start_cold(make_pool, tmp_path) -> None:
    pool = make_pool(STANDBY_STANDIN, standby=True)
    pool.start()
    standby = _standby_pid(pool, tmp_path / "logs")
    os.kill(standby, 9)
    wait_until(lambda: not psutil.pid_exists(standby)
               or psutil.Process(standby).status() == psutil.STATUS_ZOMBIE, 10)
    started = pool.start()
    assert started.pid != standby and started.state == "running"
    wait_until(lambda: f"I am {started.name}"
               in (tmp_path / "logs" / f"{started.name}.log").read_text(), 10,
               what="a cold start instead")


def test_no_standby_unless_asked(make_pool, tmp_path) -> None:
    pool = make_pool(STANDBY_STANDIN)
    pool.start()
    assert not pool.wait_for(lambda rs: False, 1.0)  # longer than the standby delay
    assert pool._standby is None and not (tmp_path / "logs" / "standby.log").exists()

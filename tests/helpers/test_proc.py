"""backend/proc.py's rules, on plain processes (no Kafka, no JVM): a child dies with the thread
that spawned it however that ends, stop signals are waited for without locks and a stuck
shutdown is cut short by the watchdog, and the replica command line is the one the CLI parses.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from backend import proc as proc_module
from backend.netutil import wait_until
from backend.pool.processes import replica_argv
from backend.proc import StopSignals, process_args, spawn, terminate

REPO = Path(__file__).resolve().parents[2]


def _gone(pid: int, created: float) -> bool:
    """That process (pid and creation time, so a reused pid does not count) has ended."""
    try:
        proc = psutil.Process(pid)
        return proc.create_time() != created or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _python(code: str) -> subprocess.Popen[str]:
    """A Python child of this test running `code`; its stdout is read line by line."""
    return spawn([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, text=True,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def _sleeper_pid(parent: subprocess.Popen[str]) -> tuple[int, float]:
    """The pid the parent printed, once that child has exec'd `sleep`."""
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    wait_until(lambda: psutil.Process(pid).name() == "sleep", 10, what="the shim to exec")
    return pid, psutil.Process(pid).create_time()


def test_a_child_dies_with_its_parent_even_when_the_parent_is_sigkilled() -> None:
    parent = _python("""
        import threading
        from backend.proc import spawn
        print(spawn(["sleep", "300"]).pid, flush=True)
        threading.Event().wait()
    """)
    try:
        pid, created = _sleeper_pid(parent)
        parent.kill()  # no handler, no cleanup: only the death signal can end the child
        wait_until(lambda: _gone(pid, created), 10, what="the orphan to die")
    finally:
        terminate(parent, 1)


def test_the_death_signal_follows_the_thread_that_spawned_the_child() -> None:
    """Why the supervisor spawns from one long-lived thread: a short-lived one takes its
    children with it when it ends, although the process goes on."""
    parent = _python("""
        import threading
        import psutil
        from backend.netutil import wait_until
        from backend.proc import spawn

        def short_lived():
            pid = spawn(["sleep", "300"]).pid
            # the shim has asked for the signal once it has exec'd; until then the child
            # would follow the next thread, because it was not yet tied to this one
            wait_until(lambda: psutil.Process(pid).name() == "sleep", 10)
            print(pid, flush=True)

        t = threading.Thread(target=short_lived)
        t.start()
        t.join()
        threading.Event().wait()
    """)
    try:
        pid, created = _sleeper_pid(parent)
        wait_until(lambda: _gone(pid, created), 10, what="the child of the ended thread to die")
        assert parent.poll() is None
    finally:
        terminate(parent, 1)


def test_spawn_refuses_a_command_that_is_not_there() -> None:
    with pytest.raises(FileNotFoundError):
        spawn(["groupscope-no-such-program"])
    shim = spawn(["/no/such/program"], stderr=subprocess.PIPE, text=True)
    _, err = shim.communicate(timeout=10)
    assert shim.returncode == 127 and "cannot run /no/such/program" in err


def test_the_watchdog_ends_a_shutdown_that_hangs() -> None:
    child = _python("""
        import threading
        from backend.proc import StopSignals
        with StopSignals(hard_stop_after=1.0) as signals:
            print("waiting", flush=True)
            signals.wait()
            threading.Event().wait()  # a flush to a broker that is gone, say
    """)
    try:
        assert child.stdout is not None and child.stdout.readline() == "waiting\n"
        t0 = time.monotonic()
        child.send_signal(signal.SIGTERM)
        code = child.wait(10)
        took = time.monotonic() - t0
        assert code == 1 and 1.0 <= took < 5, (code, took)
        assert child.stderr is not None and "still running 1s after SIGTERM" in child.stderr.read()
    finally:
        terminate(child, 1)


def test_stop_signals_record_the_first_signal_only_and_restore_the_handlers() -> None:
    before = signal.getsignal(signal.SIGTERM)
    calls: list[int] = []
    with StopSignals(on_stop=lambda: calls.append(1), hard_stop_after=None) as signals:
        assert not signals.wait(alive=lambda: False)  # what it watches ended first
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGINT)  # a second Ctrl-C changes nothing
        assert signals.wait() and signals.received == signal.SIGTERM and calls == [1]
    assert signal.getsignal(signal.SIGTERM) is before


def test_wait_until_gives_up_at_once_when_told_to() -> None:
    tries: list[int] = []

    def died() -> None:
        if tries:
            raise RuntimeError("child exited")

    with pytest.raises(RuntimeError, match="child exited"):
        wait_until(lambda: tries.append(1), 60, interval=0.01, abort=died)
    assert tries == [1]


def test_the_replica_command_line_is_what_the_replica_cli_parses() -> None:
    from backend.cli import build_parser

    argv = replica_argv("ada", "g", "t", "127.0.0.1:9092", protocol="consumer",
                        assignor="uniform", exactly_once=True, spark_remote="sc://h:1",
                        extra=("--batch-ms", "500"))
    assert argv[:4] == [sys.executable, "-m", "backend.cli", "replica"]
    args = build_parser().parse_args(argv[3:])
    assert (args.id, args.group, args.topic, args.bootstrap) == ("ada", "g", "t",
                                                                 "127.0.0.1:9092")
    assert (args.protocol, args.assignor, args.exactly_once) == ("consumer", "uniform", True)
    assert (args.spark_remote, args.batch_ms) == ("sc://h:1", 500)
    # left out, the replica's own defaults apply
    assert "--protocol" not in replica_argv("ada", "g", "t", "b")


def test_a_watchdog_that_saw_no_signal_retires_with_its_block() -> None:
    def watchdogs() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "stop-watchdog"]

    with StopSignals():
        assert len(watchdogs()) == 1
    wait_until(lambda: not watchdogs(), 5, what="the watchdog thread to end")


def test_process_args_reads_a_retitled_process_as_ps_shows_it(tmp_path: Path) -> None:
    """A standby replica retitles itself once it knows its name; psutil alone would return
    that title as one argument padded with empty ones."""
    ready = tmp_path / "ready"
    code = ("import setproctitle, sys, time; "
            "setproctitle.setproctitle('python -m backend.cli replica --id ada --group g'); "
            f"open({str(ready)!r}, 'w').close(); time.sleep(60)")
    child = spawn([sys.executable, "-c", code])
    try:
        wait_until(ready.exists, 10, what="the child retitled")
        proc = psutil.Process(child.pid)
        assert process_args(proc) == ["python", "-m", "backend.cli", "replica", "--id", "ada",
                                      "--group", "g"]
        assert process_args(psutil.Process()) == [a for a in psutil.Process().cmdline() if a]
    finally:
        terminate(child, 5)


def test_run_past_its_timeout_is_not_held_by_a_grandchild_keeping_the_pipes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A timed-out child is killed and `run` returns (raising) soon after, even though a
    grandchild that does not die with it still holds the output pipe open."""
    monkeypatch.setattr(proc_module, "AFTER_KILL_S", 1.0)
    pid_file = tmp_path / "grandchild.pid"
    child = textwrap.dedent(f"""
        import subprocess, sys, time
        g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pid_file)!r}, "w").write(str(g.pid))
        time.sleep(60)
    """)
    started = time.monotonic()
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc_module.run([sys.executable, "-c", child], timeout=2.0, capture_output=True)
        assert time.monotonic() - started < 10.0
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)

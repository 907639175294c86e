"""`make test`'s runner: when it splits the suite into lanes and when it leaves pytest alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression  # how `-m` reads an expression

from backend.proc import run as run_process
from backend.proc import spawn
from tests.lanes import BESIDE, MAIN, chooses_tests, failures_in, wait_or_abort

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("args", [
    [], ["-ra", "--durations=15"], ["-x", "-q"], ["--durations", "15"], ["-p", "no:randomly"],
])
def test_plain_options_run_the_lanes(args):
    assert not chooses_tests(args)


@pytest.mark.parametrize("args", [
    ["-m", "not browser"], ["-k", "replica"], ["--lf"], ["-ra", "tests/helpers/test_proc.py"],
    ["tests/helpers/test_proc.py::test_spawn_runs_the_command"], ["tests/observer"],
    ["--deselect=tests/helpers/test_proc.py::x"],
])
def test_options_that_choose_tests_run_one_plain_pytest(args):
    assert chooses_tests(args)


@pytest.mark.parametrize("marks", [set(), {"slow"}, {"idle"}, {"slow", "idle"},
                                   {"browser", "stack"}, {"slow", "browser"}])
def test_every_test_runs_in_exactly_one_lane(marks):
    lanes = [MAIN, *(expression for _name, expression in BESIDE)]
    matching = [e for e in lanes if Expression.compile(e).evaluate(lambda m: m in marks)]
    assert len(matching) == 1, (marks, matching)


def test_a_lane_past_the_deadline_is_aborted_with_its_stacks_and_fails_the_run(capfd):
    """A hung lane prints where it hangs and ends the run, instead of outlasting CI."""
    script = ("import sys, time\n"
              "def stuck_in_teardown():\n"
              "    time.sleep(120)\n"
              "print('a test ran', flush=True)\n"
              "stuck_in_teardown()\n")
    lane = spawn([sys.executable, "-X", "faulthandler", "-c", script],
                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    os.set_blocking(lane.stdout.fileno(), False)
    seen: list[bytes] = []

    def follow() -> None:
        seen.append(lane.stdout.read() or b"")

    started = time.monotonic()
    code = wait_or_abort(lane, "slow", started + 2.0, follow)
    assert code == -signal.SIGABRT
    assert time.monotonic() - started < 30
    out = b"".join(seen).decode()
    assert "a test ran" in out and "stuck_in_teardown" in out, out
    assert "the slow lane is still running" in capfd.readouterr().out


def test_a_dead_session_broker_ends_the_run_before_the_next_test(tmp_path, monkeypatch):
    """Every later test would wait out its timeout on a broker that is gone: the run ends
    at the next test's setup instead, naming the service, its exit code and its log."""
    from types import SimpleNamespace

    from tests import conftest

    dead = subprocess.Popen([sys.executable, "-c", "raise SystemExit(137)"])
    dead.wait()
    gone = SimpleNamespace(process=dead, log_file=tmp_path / "broker.log")
    monkeypatch.setitem(conftest._SESSION_SERVICES, "broker", gone)
    with pytest.raises(pytest.exit.Exception) as ended:
        conftest.pytest_runtest_setup(SimpleNamespace(nodeid="tests/x.py::test_next"))
    assert "the session's broker exited with code 137 before tests/x.py::test_next" \
        in str(ended.value) and str(tmp_path / "broker.log") in str(ended.value)
    assert ended.value.returncode == 1

    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        monkeypatch.setitem(conftest._SESSION_SERVICES, "broker",
                            SimpleNamespace(process=running, log_file=gone.log_file))
        conftest.pytest_runtest_setup(SimpleNamespace(nodeid="tests/x.py::test_next"))
    finally:
        running.kill()
        running.wait()


@pytest.mark.parametrize("outcome, code", [("pass", 0), ("fail", 1)])
def test_a_finished_run_exits_with_its_verdict_whatever_a_test_left_running(
        tmp_path, outcome, code):
    """A thread a test left behind (or an exit handler) would hold the process after the
    summary; the run ends after the grace (here 2 s) with its own exit status, and names
    the thread."""
    (tmp_path / "test_left.py").write_text(
        "import threading, time\n"
        "def test_leaves_a_thread():\n"
        "    threading.Thread(target=time.sleep, args=(120,), name='lingerer').start()\n"
        f"    assert {outcome!r} == 'pass'\n")
    started = time.monotonic()
    done = run_process([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "tests.prompt_exit", str(tmp_path / "test_left.py")],
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO),
                                          "GROUPSCOPE_EXIT_GRACE_S": "2"},
                       timeout=60, capture_output=True, text=True)
    assert done.returncode == code, done.stdout[-2000:] + done.stderr[-2000:]
    assert time.monotonic() - started < 30
    assert "1 thread(s) still running at exit: lingerer" in done.stderr
    assert "not exited 2 s after the run ended" in done.stderr


def test_a_lanes_failures_are_read_back_from_its_junit_report_with_their_reasons(tmp_path):
    (tmp_path / "test_two.py").write_text(
        "def test_passes():\n    pass\n\n"
        "def test_fails():\n    seen = {0, 1, 2}\n    assert seen == {2}, 'only the victim'\n")
    report = tmp_path / "lane.xml"
    done = run_process([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                        f"--junitxml={report}", str(tmp_path / "test_two.py")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout
    (failed,) = failures_in(report, tail_lines=8)
    assert failed[0] == "FAILURE test_two::test_fails"
    assert "only the victim" in failed[1] and len(failed[1].splitlines()) <= 8
    assert failures_in(tmp_path / "missing.xml") == []
    (tmp_path / "cut.xml").write_text("<testsuites><testsuite>")  # a lane killed mid-write
    assert failures_in(tmp_path / "cut.xml") == []


def test_an_aborted_lane_still_says_why_its_tests_failed(tmp_path, monkeypatch, capsys):
    import tests.lanes as lanes

    monkeypatch.setattr(lanes, "ARTIFACTS", tmp_path)
    (tmp_path / "failed-test_kill-call.txt").write_text(
        "tests/x.py::test_kill (call)\n" + "\n".join(f"frame {i}" for i in range(50))
        + "\nE   assert 2 == 1\n")
    lanes.print_failures(["slow"], tail_lines=5)  # no slow-lane.xml: it was aborted
    out = capsys.readouterr().out
    assert "tests/x.py::test_kill (call)" in out and "E   assert 2 == 1" in out
    assert "frame 10" not in out  # the end of the text only
    assert out.rstrip().endswith("tests/x.py::test_kill (call): assert 2 == 1")
    (tmp_path / "slow-lane.xml").write_text("<testsuites/>")
    lanes.print_failures(["slow"])  # a lane that wrote its report is read from it alone
    assert capsys.readouterr().out == ""


def test_a_failure_in_one_line_names_the_test_file_line_and_the_error():
    from tests.lanes import digest

    text = ("Timeout 90000ms exceeded.\n    def helper():\n"
            "tests/system/room/test_room_stack.py:130: in test_a_laptop\n"
            "    save_shot(page)\n.venv/lib/site.py:58: in run\n"
            "E   playwright._impl._errors.TimeoutError: Page.screenshot: Timeout\n"
            "E   Call log:\n")
    assert digest("slow lane: FAILURE t::a", text) == (
        "slow lane: FAILURE t::a at tests/system/room/test_room_stack.py:130: "
        "playwright._impl._errors.TimeoutError: Page.screenshot: Timeout")
    assert digest("x", "only a message") == "x: "

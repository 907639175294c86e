"""`make test`'s runner: when it splits the suite into lanes and when it leaves pytest alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from backend.proc import spawn
from tests.lanes import chooses_tests, wait_or_abort


@pytest.mark.parametrize("args", [
    [], ["-ra", "--durations=15"], ["-x", "-q"], ["--durations", "15"], ["-p", "no:randomly"],
])
def test_plain_options_run_two_lanes(args):
    assert not chooses_tests(args)


@pytest.mark.parametrize("args", [
    ["-m", "not browser"], ["-k", "replica"], ["--lf"], ["-ra", "tests/helpers/test_proc.py"],
    ["tests/helpers/test_proc.py::test_spawn_runs_the_command"], ["tests/observer"],
    ["--deselect=tests/helpers/test_proc.py::x"],
])
def test_options_that_choose_tests_run_one_plain_pytest(args):
    assert chooses_tests(args)


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

"""The whole suite in three lanes at once: `make test`'s runner.

The tests marked `slow` take a minute or more each and spend much of it waiting: soaks, chaos
runs, Kafka nodes killed and restarted, a laptop joining the room. Run after the rest they
made a forty-minute suite; run beside it, in a second pytest process, their waiting overlaps
the rest's work, and the marks are chosen so the lanes take about as long (bench/README.md,
"The test suite's time"). The tests marked `idle` mostly wait while they last (an
idle topic watched for a minute, a Groups page left open, a storm timed, a lock-out window):
a third lane, since on two cores busy with the other two they cost little beside them. The
lanes share the machine and one Spark engine (below): each has its own broker fixture, its
own temporary folders,
and every process a test starts is tagged, reaped and dies with its parent as in one lane.

Why not pytest-xdist: its workers take the next test as they free up, so two CPU-heavy tests
(two stacks starting Spark) can run at once on two cores, where here lanes of mostly waiting
tests run beside a lane of working ones; and each xdist worker would start its own session
broker and Spark as a lane does, so it would share no more.

    python -m tests.lanes [pytest options]

The lanes share one Spark engine, started here before them and stopped after them, instead of
one each: two engine starts fewer and two engines fewer at rest (the saving was not visible in
the run's per-process CPU, within its noise: bench/README.md, "The test suite's time"). Its
Connect sessions are each client's own, and the tests that stop or restart an engine start
their own. Its log is kept in test-artifacts/ when the run fails.

The main lane (`-m "not slow and not idle"`) prints as it runs; each other lane's output goes
to test-artifacts/<name>-lane.log, is printed once the main lane is done and then followed as
it grows. The run passes only if every lane passes, and a lane that collected no test fails
it (pytest's exit code 5). A run that failed ends by printing every lane's failures again,
each with the end of its text (from the lane's JUnit report, test-artifacts/<name>-lane.xml):
a CI that keeps only the start and the end of a long output still shows why each test failed.
Options that choose tests (`-m`, `-k`, paths, node ids, `--lf`)
mean one ordinary pytest run instead. GROUPSCOPE_ONE_LANE=1 forces that too.

Once every lane has passed, the run also fails if a `groupscope` command the README or a
guide shows was run by no test (tests/guides.py says what counts): every invocation of the
lanes records its argv in test-artifacts/argv.jsonl (backend.cli.record_argv), and a guide's
line that none of them covers is named, with its page and line.

A hang must fail the run, not outlast CI's limit in silence. pytest-timeout ends a test that
runs too long, but not a teardown stuck after that, nor anything outside a test; so the
lanes share one deadline (LIMIT_S: three times a lane's time on the machine of 2026-11-29,
enough for one 2.4x slower, whose lanes ran past 45 min; inside CI's 90 minutes). A lane
still running then gets SIGABRT: pytest's faulthandler prints every thread's stack into its
output, the lane dies, its children with it, and the run fails naming it; the tests that had
failed in it are printed from the failed-*.txt each left in test-artifacts/ as it failed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO
from xml.etree import ElementTree

from backend.cli import ARGV_LOG, build_parser
from backend.engine.server import SparkConnectServer
from backend.netutil import FREE_SLICE_ENV, free_port
from backend.proc import STOP_BUDGET_S, reap, run, send, spawn
from tests.conftest import ARTIFACTS, SHARED_SPARK_ENV
from tests.guides import all_commands, recorded, unexercised

ROOT = Path(__file__).resolve().parent.parent
# the lanes beside the main one: (name, marker expression); the main lane takes the rest
BESIDE = (("slow", "slow and not idle"), ("idle", "idle"))
MAIN = "not slow and not idle"
LIMIT_S = float(os.environ.get("GROUPSCOPE_LANES_LIMIT_S", 70 * 60))
FOLLOW_EVERY_S = 2.0
FAILURE_TAIL_LINES = 30
DIGEST_CHARS = 240
WHOLE = 10**9  # failures_in's tail_lines for a failure's whole text
CHOOSING = ("-m", "-k", "--lf", "--last-failed", "--ff", "--failed-first", "--sw",
            "--stepwise", "--deselect")


def chooses_tests(args: list[str]) -> bool:
    """Whether the options already select tests (then lanes would second-guess them)."""
    for arg in args:
        if arg.split("=", 1)[0] in CHOOSING:
            return True
        if not arg.startswith("-") and (ROOT / arg.split("::", 1)[0]).exists():
            return True
    return False


def pytest_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", *args]


def one_lane(args: list[str]) -> int:
    return run(pytest_argv(*args), cwd=ROOT).returncode


def wait_or_abort(lane: subprocess.Popen[bytes], name: str, deadline: float,
                  follow: Callable[[], None] = lambda: None) -> int:
    """The lane's exit code; past `deadline` (time.monotonic) it is aborted with its stacks
    printed (see the module docstring) and the code says so. `follow` runs while waiting."""
    while lane.poll() is None:
        if time.monotonic() >= deadline:
            print(f"\nlanes: the {name} lane is still running after {LIMIT_S / 60:.0f} min: "
                  "aborting it; its threads' stacks follow its output", flush=True)
            send(lane, signal.SIGABRT)
            reap(lane, 30.0)
            break
        follow()
        with contextlib.suppress(subprocess.TimeoutExpired):
            lane.wait(FOLLOW_EVERY_S)
    follow()
    return lane.returncode


def lane_log(name: str) -> Path:
    return ARTIFACTS / f"{name}-lane.log"


def lane_report(name: str) -> Path:
    return ARTIFACTS / f"{name}-lane.xml"


def failures_in(report: Path, tail_lines: int = FAILURE_TAIL_LINES) -> list[tuple[str, str]]:
    """(test id, its failure's message and the end of its text, `tail_lines` in all) for
    every test of a JUnit report that failed or erred; none when the report is missing or
    unreadable (a lane killed before it wrote one: its output says why)."""
    try:
        root = ElementTree.parse(report).getroot()
    except (OSError, ElementTree.ParseError):
        return []
    found = []
    for case in root.iter("testcase"):
        for bad in (*case.findall("failure"), *case.findall("error")):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            said = (bad.get("message") or "").strip().splitlines()[:1]
            text = (bad.text or "").rstrip().splitlines()
            found.append((f"{bad.tag.upper()} {name}",
                          "\n".join(said + text[-(tail_lines - len(said)):])))
    return found


def digest(test: str, text: str) -> str:
    """One line for a failure: the test, where in a test file it failed (the deepest frame
    of a tests/ file) and the first line of its error."""
    lines = text.splitlines()
    where = next((ln.split(":", 2)[0] + ":" + ln.split(":", 2)[1] for ln in reversed(lines)
                  if ln.startswith("tests/") and ln.split(":", 2)[1:2] != []
                  and ln.split(":", 2)[1].isdigit()), "")
    error = next((ln[1:].strip() for ln in lines if ln.startswith("E ")),
                 lines[1] if len(lines) > 1 else "")
    return f"{test}{' at ' + where if where else ''}: {error[:DIGEST_CHARS]}"


def print_failures(names: list[str], tail_lines: int = FAILURE_TAIL_LINES) -> None:
    """Every lane's failures once more, at the very end of the run's output; for a lane with
    no report (aborted at the deadline), what its failed tests left as they failed. Last, a
    line per failure: a CI that shows only the output's last lines still names them all."""
    found: list[tuple[str, str]] = []
    for name in names:
        whole = failures_in(lane_report(name), tail_lines=WHOLE)
        for (test, text), (_, all_of_it) in zip(failures_in(lane_report(name)), whole,
                                                strict=True):
            print(f"\nlanes: {name} lane: {test}\n{text}", flush=True)
            found.append((f"{name} lane: {test}", all_of_it))
    if not all(lane_report(name).exists() for name in names):
        for path in sorted(ARTIFACTS.glob("failed-*.txt")):
            lines = path.read_text(errors="replace").splitlines()
            text = "\n".join(lines[:1] + lines[1 - tail_lines:])
            print(f"\nlanes: {path.name}\n{text}", flush=True)
            found.append((lines[0] if lines else path.name,
                          "\n".join(lines[:1] + [ln for ln in lines if ln.startswith("E ")][:1]
                                     + [ln for ln in lines if ln.startswith("tests/")])))
    if found:
        print(f"\nlanes: {len(found)} failed, one line each:", flush=True)
        for test, text in found:
            print("  " + digest(test, text), flush=True)


def argv_log() -> Path:
    return ARTIFACTS / "argv.jsonl"


def guides_exercised() -> bool:
    """Whether every `groupscope` line of the README and the guides was run by some test of
    this run (see the module docstring); the ones that were not are printed."""
    shown = [command for command in all_commands() if command.program == "groupscope"]
    missing = unexercised(build_parser(), shown, recorded(argv_log()))
    if not missing:
        print(f"lanes: each of the guides' {len(shown)} groupscope commands was run by a test",
              flush=True)
        return True
    print(f"lanes: {len(missing)} groupscope commands the guides show were run by no test "
          "(the same subcommand with at least these options):", flush=True)
    for command in missing:
        print(f"  {command.where}: {command.text}", flush=True)
    return False


@contextlib.contextmanager
def shared_engine() -> Iterator[list[int]]:
    """The lanes' Spark engine, launched (not awaited: each lane waits for it when a test
    first needs it) and described to them in SHARED_SPARK_ENV; stopped on the way out, its
    log copied to the artifacts unless the run's exit code (appended to the yielded list)
    says it passed."""
    work = Path(tempfile.mkdtemp(prefix="groupscope-lanes-spark-"))
    engine = SparkConnectServer(work, port=free_port())
    engine.launch()
    assert engine.process is not None
    os.environ[SHARED_SPARK_ENV] = f"{engine.port} {engine.ui_port} {engine.process.pid} {work}"
    codes: list[int] = []
    try:
        yield codes
    finally:
        engine.stop(STOP_BUDGET_S)
        if codes != [0]:
            with contextlib.suppress(OSError):
                shutil.copy(engine.log_file, ARTIFACTS / "lanes-spark-engine.log")
        shutil.rmtree(work, ignore_errors=True)


def run_lanes(args: list[str]) -> int:
    """The main lane in the foreground, the lanes of BESIDE in the background, each into its
    log; once the main lane is done each log is printed in turn, then followed as it grows."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    argv_log().unlink(missing_ok=True)
    os.environ[ARGV_LOG] = str(argv_log())
    os.environ[FREE_SLICE_ENV] = f"{len(BESIDE) + 1}/{len(BESIDE) + 2}"  # this runner's own
    with shared_engine() as codes:
        codes.append(_run_lanes(args))
        return codes[0]


def _slice(i: int) -> dict[str, str]:
    """Lane i's environment: its own slice of the free ports (netutil.port_pool); the last
    slice is this runner's own (the shared engine's ports)."""
    return dict(os.environ, **{FREE_SLICE_ENV: f"{i}/{len(BESIDE) + 2}"})


def _run_lanes(args: list[str]) -> int:
    lanes: list[subprocess.Popen[bytes]] = []
    deadline = time.monotonic() + LIMIT_S

    def stop_lanes(signum: int, _frame: object) -> None:
        for lane in lanes:
            send(lane, signum)
        for lane in lanes:
            reap(lane, 30.0)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop_lanes)
    signal.signal(signal.SIGHUP, stop_lanes)
    for name in ("main", *(n for n, _ in BESIDE)):  # no report of an earlier run is read
        lane_report(name).unlink(missing_ok=True)
    for stale in ARTIFACTS.glob("failed-*.txt"):
        stale.unlink()
    with contextlib.ExitStack() as files:
        shown = []
        for name, expression in BESIDE:
            log = files.enter_context(lane_log(name).open("wb"))
            shown.append(files.enter_context(lane_log(name).open("rb")))
            # no cache writes but the main lane's, so lanes never race on .pytest_cache
            lanes.append(spawn(pytest_argv("-m", expression, "-p", "no:cacheprovider",
                                           f"--junitxml={lane_report(name)}", *args),
                               cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, env=_slice(len(lanes) + 1)))
            print(f"lanes: the {name} tests run beside this one; their output: "
                  f"{lane_log(name)}", flush=True)
        codes: dict[str, int] = {}
        try:
            main = spawn(pytest_argv("-m", MAIN, f"--junitxml={lane_report('main')}", *args),
                         cwd=ROOT, env=_slice(0))
            lanes.append(main)
            codes["main"] = wait_or_abort(main, "main", deadline)
            started = time.monotonic()
            for (name, _), lane, out in zip(BESIDE, lanes, shown, strict=False):
                def follow(out: BinaryIO = out) -> None:  # what the lane wrote since the last look
                    sys.stdout.write(out.read().decode(errors="replace"))
                    sys.stdout.flush()

                print(f"\n{'=' * 30} {name} lane {'=' * 30}", flush=True)
                if lane.poll() is None:
                    print(f"lanes: the {name} lane so far, then as it goes", flush=True)
                codes[name] = wait_or_abort(lane, name, deadline, follow)
        except KeyboardInterrupt:  # Ctrl-C reached every lane (one process group)
            for lane in lanes:
                reap(lane, 30.0)
            return 130
    waited = time.monotonic() - started
    print("lanes: " + ", ".join(f"{name} lane exit {code}" for name, code in codes.items())
          + f" (waited {waited:.0f} s for the others after the main lane)", flush=True)
    failed = next((code for code in codes.values() if code), 0)
    if failed:
        print_failures([name for name, code in codes.items() if code])
    if not failed and not guides_exercised():
        return 1
    return failed


def main(args: list[str]) -> int:
    if os.environ.get("GROUPSCOPE_ONE_LANE") == "1" or chooses_tests(args):
        try:
            return one_lane(args)
        except KeyboardInterrupt:  # pytest got the Ctrl-C too and has said its part
            return 130
    return run_lanes(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

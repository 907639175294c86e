"""`groupscope up`'s scheduling, on small real processes (no Kafka, no JVM): types that need
nothing start together, a type starts only once what it needs is ready, a failing start stops
everything with one line, Ctrl-C while starting leaves no process, stop order is the reverse
of NEEDS. The whole stack's start and stop are tested in tests/system/test_stack.py."""

from __future__ import annotations

import io
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import pytest

from backend.netutil import free_port, wait_until
from backend.proc import STOP_WITHIN_S, spawn
from backend.stack.launcher import NEEDS, StackLauncher, Step, levels, stop_waves
from backend.stack.procfile import ProcfileError, read_procfile
from tests.conftest import STACK_ENV, stack_processes

REPO = Path(__file__).resolve().parents[2]
SLEEPER = 'python -c "import time; time.sleep(120)"'
# SIGABRT half a second after start, as librdkafka's assertions end a process; no core file
ABORT = ("import os, resource, time; resource.setrlimit(resource.RLIMIT_CORE, (0, 0)); "
         "time.sleep(0.5); os.abort()")


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch) -> str:
    """Every child inherits STACK_ENV=<token>; teardown SIGKILLs any still alive (a failed
    test leaves nothing behind) after the test has checked there are none."""
    token = uuid.uuid4().hex
    monkeypatch.setenv(STACK_ENV, token)
    yield token
    for proc in stack_processes(token):
        proc.kill()


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GROUPSCOPE_DATA", str(tmp_path / "data"))
    return tmp_path


def _procfile(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "Procfile"
    path.write_text(textwrap.dedent(text))
    return path


def _index(timeline: list[Step], name: str, event: str) -> int:
    return next(i for i, s in enumerate(timeline) if (s.name, s.event) == (name, event))


# ---- the plan: pure ------------------------------------------------------------------------

def test_the_stack_starts_broker_and_spark_together_and_stops_in_reverse():
    names = [p.name for p in read_procfile()]
    assert levels(names, NEEDS) == {"broker": 0, "spark": 0, "backend": 1, "web": 1}
    assert stop_waves(names, NEEDS) == [["web", "backend"], ["spark", "broker"]]


def test_a_need_outside_the_procfile_or_a_cycle_is_one_line_naming_it():
    with pytest.raises(ProcfileError, match=r"^app needs db, which is not a Procfile process"):
        levels(["app"], {"app": ("db",)})
    with pytest.raises(ProcfileError, match=r"cycle: (a -> b -> a|b -> a -> b)$"):
        levels(["a", "b"], {"a": ("b",), "b": ("a",)})
    assert stop_waves(["a", "b", "c"], {"c": ("b",), "b": ("a",)}) == [["c"], ["b"], ["a"]]


def test_procfile_lines_honcho_would_skip_are_refused(tmp_path):
    assert [p.name for p in read_procfile(_procfile(tmp_path, "# c\n\nweb-1: run it\n"))] == [
        "web-1"]
    for bad, why in (("  web: x\n", "expected 'name: command'"),
                     ("my web: x\n", "expected 'name: command'"),
                     ("web: x\nweb: y\n", "'web' is defined twice")):
        (tmp_path / "Procfile").write_text(bad)
        with pytest.raises(ProcfileError, match=why):
            read_procfile(tmp_path / "Procfile")


# ---- the launcher on small processes --------------------------------------------------------

def test_independent_types_start_together_and_a_dependent_after_both(data, marker):
    """`svc` becomes ready only once `eng` runs: had the launcher waited for `svc` before
    starting `eng`, it would never get there."""
    eng_started = data / "eng.started"
    touch = f"import pathlib, time; pathlib.Path('{eng_started}').touch(); time.sleep(120)"
    procfile = _procfile(data, f"""\
        svc: {SLEEPER}
        eng: python -c "{touch}"
        app: {SLEEPER}
        """)
    launcher = StackLauncher(out=io.StringIO(), procfile=procfile,
                             needs={"app": ("svc", "eng")},
                             probes={"svc": eng_started.exists})
    try:
        launcher.start_all()
        assert len(stack_processes(marker)) == 3
    finally:
        launcher.stop_all()
    steps = launcher.timeline
    assert _index(steps, "eng", "starting") < _index(steps, "svc", "ready")
    assert _index(steps, "svc", "starting") < _index(steps, "eng", "ready")
    assert _index(steps, "app", "starting") > max(_index(steps, "svc", "ready"),
                                                  _index(steps, "eng", "ready"))
    stopping = [s.name for s in steps if s.event == "stopping"]
    assert stopping == ["app", "eng", "svc"]
    assert stack_processes(marker) == []


def test_a_type_that_serves_early_frees_its_dependents_before_it_is_ready(data, marker):
    """`eng` accepts connections at once but is ready only once `app` runs (as Spark's real
    query waits on nothing, but is no longer what the backend waits for): had the launcher
    held `app` back until `eng` was ready, it would never get there; and start_all returns
    only once `eng` is ready after all."""
    app_started = data / "app.started"
    touch = f"import pathlib, time; pathlib.Path('{app_started}').touch(); time.sleep(120)"
    procfile = _procfile(data, f"""\
        eng: {SLEEPER}
        app: python -c "{touch}"
        """)
    launcher = StackLauncher(out=io.StringIO(), procfile=procfile, needs={"app": ("eng",)},
                             probes={"eng": app_started.exists},
                             serving={"eng": lambda: True})
    try:
        launcher.start_all()
    finally:
        launcher.stop_all()
    steps = launcher.timeline
    assert (_index(steps, "eng", "serving") < _index(steps, "app", "starting")
            < _index(steps, "eng", "ready"))
    assert {(s.name, s.event) for s in steps} >= {("eng", "ready"), ("app", "ready")}
    assert stack_processes(marker) == []


def test_the_backend_waits_only_for_spark_to_listen(data, monkeypatch):
    """The stack's own probes: Spark frees the backend once its Connect port accepts, the
    broker only once it answers (it has no early probe)."""
    port = free_port()
    monkeypatch.setenv("GROUPSCOPE_SPARK_PORT", str(port))
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    launcher = StackLauncher(out=io.StringIO())
    assert launcher._serving_probe("broker") is None
    assert launcher._serving_probe("web") is None
    listens = launcher._serving_probe("spark")
    assert listens is not None and listens() is False
    with socket.create_server(("127.0.0.1", port)):
        assert listens() is True


def test_a_type_that_fails_to_start_stops_the_others_with_one_line(data, marker):
    procfile = _procfile(data, f"""\
        svc: {SLEEPER}
        eng: python -c "import sys; sys.exit(3)"
        app: {SLEEPER}
        """)
    out = io.StringIO()
    launcher = StackLauncher(out=out, procfile=procfile, needs={"app": ("svc", "eng")},
                             probes={"svc": lambda: False, "eng": lambda: False})
    assert launcher.run() == 1
    lines = out.getvalue().splitlines()
    assert [line for line in lines if line.startswith("groupscope up:")] == [
        "groupscope up: eng exited with code 3 while starting"], lines
    assert ("svc", "stopping") in [(s.name, s.event) for s in launcher.timeline]
    assert "app" not in {s.name for s in launcher.timeline}
    assert lines[-1] == "groupscope stopped"
    assert stack_processes(marker) == []


def test_a_crashed_type_starts_again_until_it_crashes_too_often(data, marker):
    """Killed by a signal it did not ask for (here SIGABRT, as librdkafka's assertions end a
    process): started again while the rest runs on, three times; the fourth crash within
    the window stops the stack with one line."""
    procfile = _procfile(data, f"""\
        svc: {SLEEPER}
        app: python -c "{ABORT}"
        """)
    out = io.StringIO()
    launcher = StackLauncher(out=out, procfile=procfile, needs={"app": ("svc",)},
                             probes={"svc": lambda: True, "app": lambda: True},
                             restartable={"app"})
    assert launcher.run() == 1
    lines = out.getvalue().splitlines()
    again = [line for line in lines if "killed by SIGABRT; starting it again" in line]
    assert [line.split("(")[1] for line in again] == [
        "1 of 3 in 10 min)", "2 of 3 in 10 min)", "3 of 3 in 10 min)"], lines
    assert "     app | crashed 4 times in 10 min; not starting it again" in lines
    assert "app exited with code -6; stopping the stack" in lines
    events = [(s.name, s.event) for s in launcher.timeline]
    assert events.count(("app", "ready")) == 4 and events.count(("svc", "starting")) == 1
    assert stack_processes(marker) == []


def test_a_type_that_ends_by_itself_or_is_not_restartable_stops_the_stack(data, marker):
    for app, restartable in (('python -c "import sys, time; time.sleep(0.5); sys.exit(0)"',
                              {"app"}),
                             (f'python -c "{ABORT}"', ())):
        procfile = _procfile(data, f"""\
            svc: {SLEEPER}
            app: {app}
            """)
        out = io.StringIO()
        launcher = StackLauncher(out=out, procfile=procfile, probes={"app": lambda: True},
                                 restartable=restartable)
        assert launcher.run() == 1
        assert "starting it again" not in out.getvalue()
        assert "app exited with code" in out.getvalue().splitlines()[-3]
        assert stack_processes(marker) == []


def test_ctrl_c_while_types_start_together_leaves_no_process(data, marker):
    procfile = _procfile(data, f"""\
        svc: {SLEEPER}
        eng: {SLEEPER}
        app: {SLEEPER}
        """)
    script = textwrap.dedent(f"""\
        import sys
        from pathlib import Path
        from backend.stack.launcher import StackLauncher
        sys.exit(StackLauncher(procfile=Path({str(procfile)!r}), needs={{"app": ("svc", "eng")}},
                               probes={{"svc": lambda: False, "eng": lambda: False}}).run())
        """)
    up = spawn([sys.executable, "-c", script], cwd=REPO, text=True, stdin=subprocess.DEVNULL,
               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(up.stdout), daemon=True)
    reader.start()
    try:
        # both started (the launcher, svc and eng carry the marker), neither ready: the
        # launcher waits on two probes at once
        wait_until(lambda: (sum(" | starting:" in line for line in lines) == 2
                            and len(stack_processes(marker)) == 3) or up.poll() is not None,
                   timeout=60, what="svc and eng to start")
        assert up.poll() is None, "".join(lines)
        up.send_signal(signal.SIGINT)
        assert up.wait(STOP_WITHIN_S) == 130, "".join(lines)
        reader.join(10)
        assert "groupscope stopped\n" in lines, "".join(lines)
        assert not any("app | starting" in line for line in lines)
        assert stack_processes(marker) == []
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()


def test_ctrl_c_between_a_fork_and_its_bookkeeping_still_stops_that_child(data, marker,
                                                                            monkeypatch):
    """The interrupt lands the instant the child exists but before the launcher has it on
    its list (a race a loaded machine once hit): it is held until the child is listed, so
    the stop still finds it."""
    import backend.stack.launcher as launcher_module

    procfile = _procfile(data, f"""\
        svc: {SLEEPER}
        app: {SLEEPER}
        """)
    out = io.StringIO()
    launcher = StackLauncher(out=out, procfile=procfile, needs={"app": ("svc",)},
                             probes={"svc": lambda: False})
    real_spawn = launcher_module.spawn

    def spawn_then_interrupt(*args, **kwargs):
        popen = real_spawn(*args, **kwargs)
        launcher._interrupt_start_up()  # what the SIGINT handler calls
        return popen

    monkeypatch.setattr(launcher_module, "spawn", spawn_then_interrupt)
    assert launcher.run() == 130
    assert [(s.name, s.event) for s in launcher.timeline] == [
        ("svc", "starting"), ("svc", "stopping")], out.getvalue()
    assert stack_processes(marker) == []


# ---- the engine's heap -----------------------------------------------------------------------

def test_the_spark_heap_is_demo_sized_pretouched_and_set_in_one_place(tmp_path):
    from backend.engine.server import DEFAULT_DRIVER_MEMORY, DRIVER_JIT, SparkConnectServer
    from backend.stack.config import StackConfig

    assert StackConfig().spark_memory == DEFAULT_DRIVER_MEMORY == "480m"
    cmd = SparkConnectServer(tmp_path, driver_memory=StackConfig(
        spark_memory_setting="2G").spark_memory).command()
    assert cmd[cmd.index("--driver-memory") + 1] == "2g"
    java_options = next(a for a in cmd if a.startswith("spark.driver.extraJavaOptions="))
    assert "-Xms2g -XX:+AlwaysPreTouch" in java_options  # flat RSS: the whole heap up front
    assert DRIVER_JIT in java_options  # the client compiler alone
    assert "-XX:ReservedCodeCacheSize=" in DRIVER_JIT  # not the client's 48 MiB: Spark fills it
    assert "spark.connect.session.planCache.enabled=false" in cmd
    assert "spark.sql.resultQueryStage.maxThreadThreshold=64" in cmd


@pytest.mark.parametrize("value", ["449m", "1gb", "lots", "0g"])
def test_a_bad_spark_heap_is_one_line_naming_the_variable(value, monkeypatch):
    from backend.cli_common import UserError
    from backend.stack.config import StackConfig

    monkeypatch.setenv("GROUPSCOPE_SPARK_MEMORY", value)
    config = StackConfig.from_env()  # other commands never read it, so never fail on it
    with pytest.raises(UserError, match=rf"^GROUPSCOPE_SPARK_MEMORY={value}: .* at least 450m$"):
        _ = config.spark_memory

"""`groupscope up` end to end: it serves the dashboard and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import psutil
import pytest

from backend.cli import build_parser
from backend.cli import main as cli_main
from backend.contracts import DEFAULT_GROUP, INPUT_TOPIC
from backend.kafka.clients import quiet_admin
from backend.netutil import free_port, wait_until
from backend.proc import STOP_WITHIN_S, run, spawn
from backend.supervisor.client import ControlClient
from tests.conftest import stack_processes

EXPECTED_COMMANDS = {"up", "broker", "spark", "web", "watch", "produce", "replica", "backend",
                     "ctl", "snapshot", "groups", "exporter", "offsets"}


def _processes_with_marker(marker: str) -> list[int]:
    """Every live process whose environment carries `marker` (children inherit it)."""
    key, _, value = marker.partition("=")
    found = []
    for proc in psutil.process_iter():
        try:
            if (proc.environ().get(key) == value and proc.status() != psutil.STATUS_ZOMBIE
                    and proc.pid != os.getpid()):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def test_help_lists_every_subcommand_and_each_has_help(capsys):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert EXPECTED_COMMANDS <= set(sub.choices)
    out = run([sys.executable, "-m", "backend.cli", "--help"],
              capture_output=True, text=True, timeout=60).stdout
    # each subcommand's help through the CLI's own entry point, in this process: a process
    # each cost 25 s of the suite's busiest lane and showed nothing more
    for name in EXPECTED_COMMANDS:
        assert name in out
        with pytest.raises(SystemExit) as exit_:
            cli_main([name, "--help"])
        assert exit_.value.code == 0, name
        assert f"groupscope {name}" in capsys.readouterr().out


def test_up_serves_the_dashboard_and_ctrl_c_leaves_no_process(tmp_path, stack):
    marker = f"GROUPSCOPE_TEST_MARKER={uuid.uuid4().hex}"
    web_port = free_port()
    env = dict(
        os.environ,
        GROUPSCOPE_DATA=str(tmp_path / "data"),
        GROUPSCOPE_KAFKA_PORT=str(free_port()),
        GROUPSCOPE_SPARK_PORT=str(free_port()),
        GROUPSCOPE_WEB_PORT=str(web_port),
        GROUPSCOPE_TEST_MARKER=marker.split("=", 1)[1],
    )
    for key in ("GROUPSCOPE_BOOTSTRAP", "GROUPSCOPE_KAFKA_CONFIG", "SPARK_REMOTE"):
        env.pop(key, None)
    up, lines, reader = _up(env=env)
    try:
        _wait_up(up, lines, 240)
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/_stcore/health", timeout=5) as r:
            assert r.read().decode().strip() == "ok"
        assert any(f"http://localhost:{web_port}" in line for line in lines)
        assert len(_processes_with_marker(marker)) >= 4  # up, broker, spark, backend, web …
        # the launcher's own timeline, as it printed it: Spark started before the broker was
        # ready (they start together), the backend only once the broker was ready and Spark
        # accepted connections, and `up` was done only once Spark had answered a query too
        assert _at(lines, "spark | starting:") < _at(lines, "broker | ready in"), lines
        assert _at(lines, "backend | starting:") > max(
            _at(lines, "broker | ready in"), _at(lines, "spark | accepting connections")), lines
        assert _at(lines, "spark | ready in") < _at(lines, "groupscope is up"), lines
        assert _at(lines, "web | starting:") > _at(lines, "broker | ready in"), lines
        # without --room, nothing of the stack listens beyond this machine
        listening = _listening(_processes_with_marker(marker))
        assert {port for _, port in listening} >= {web_port}, listening
        assert all(_loopback(host) for host, _ in listening), listening

        t0 = time.monotonic()
        up.send_signal(signal.SIGINT)  # what Ctrl-C delivers
        assert up.wait(STOP_WITHIN_S + 30) in (0, 130)
        took = time.monotonic() - t0
        print(f"up stopped {took:.1f} s after SIGINT")
        assert took <= STOP_WITHIN_S, f"up took {took:.1f} s to stop:\n" + "".join(lines[-30:])
        reader.join(10)
        wait_until(lambda: not _processes_with_marker(marker), timeout=30,
                   what="every process of the stack to exit")
        assert any("groupscope stopped" in line for line in lines)
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
        for pid in _processes_with_marker(marker):
            os.kill(pid, signal.SIGKILL)


def test_up_with_a_failing_engine_stops_the_broker_and_leaves_nothing(tmp_path, stack):
    """Spark cannot listen (its port is taken) while the broker starts beside it: `up` says
    so in one line, stops the broker and starts nothing that needs either."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        env = _up_env(tmp_path, GROUPSCOPE_SPARK_PORT=str(held.getsockname()[1]))
        result = run([sys.executable, "-m", "backend.cli", "up"], env=env, text=True,
                     capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
    lines = result.stdout.splitlines()
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in lines if line.startswith("groupscope up:")]
    assert errors == ["groupscope up: spark exited with code 2 while starting"], lines
    assert _at(lines, "broker | starting:") < _at(lines, "broker | stopping"), lines
    assert not any(" | starting:" in line for line in lines
                   if line.split("|")[0].strip() in ("backend", "web")), lines
    assert lines[-1] == "groupscope stopped"
    assert stack_processes(stack) == []


def _up_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """`up`'s environment for a test: its own data dir and free ports, no external cluster."""
    env = dict(os.environ, GROUPSCOPE_DATA=str(tmp_path / "data"),
               GROUPSCOPE_KAFKA_PORT=str(free_port()), GROUPSCOPE_SPARK_PORT=str(free_port()),
               GROUPSCOPE_WEB_PORT=str(free_port()))
    env.update(extra)
    for key in ("GROUPSCOPE_BOOTSTRAP", "GROUPSCOPE_KAFKA_CONFIG", "SPARK_REMOTE"):
        env.pop(key, None)
    return env


def _up(*args: str, env: dict[str, str]
        ) -> tuple[subprocess.Popen[str], list[str], threading.Thread]:
    """`groupscope up ARGS` in a session of its own, its output gathered line by line."""
    up = spawn([sys.executable, "-m", "backend.cli", "up", *args], env=env,
               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
               text=True, start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(up.stdout or ()), daemon=True)
    reader.start()
    return up, lines, reader


def _wait_up(up: subprocess.Popen[str], lines: list[str], timeout: float) -> None:
    wait_until(lambda: any("groupscope is up" in line for line in lines) or up.poll(),
               timeout=timeout, what="`groupscope up` to report ready")
    assert up.poll() is None, "".join(lines)


def _at(lines: list[str], text: str) -> int:
    """Index of the first line of `up`'s output that is `text` after its padded name."""
    return next(i for i, line in enumerate(lines) if line.strip().startswith(text))


def _loopback(host: str) -> bool:
    """127.0.0.0/8 or ::1, also as an IPv4-mapped IPv6 address (a JVM's sockets show so)."""
    address = ipaddress.ip_address(host)
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def _listening(pids: list[int]) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket these processes listen on."""
    found = []
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.Error:
            continue
        found += [(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN]
    return sorted(set(found))


def test_procfile_lists_the_design_process_types_and_honcho_accepts_it():
    from backend.stack.procfile import REPO_ROOT, read_procfile

    assert [p.name for p in read_procfile()] == ["broker", "spark", "backend", "web"]
    honcho = Path(sys.executable).parent / "honcho"
    result = run([str(honcho), "check"], cwd=REPO_ROOT, capture_output=True,
                 text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "broker, spark, backend, web" in result.stderr + result.stdout


def test_watch_checks_the_properties_file_before_serving(tmp_path):
    cfg = tmp_path / "client.properties"
    cfg.write_text("security.protocol=SASL_SSL\nsasl.password s3cret-value\n")
    result = run(
        [sys.executable, "-m", "backend.cli", "watch", "--bootstrap", "127.0.0.1:1",
         "--kafka-config", str(cfg), "--port", str(free_port())],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "client.properties:2" in result.stderr
    assert "s3cret" not in result.stderr + result.stdout


def test_up_on_an_external_cluster_and_engine_runs_only_the_supervisor_and_the_page(
        tmp_path, stack, kafka, spark_remote):
    """`up --bootstrap … --kafka-config … --spark-remote …` (docs/production.md,
    docs/clusters.md) starts neither Kafka nor Spark: the launcher skips both, naming the ones
    it uses, and the supervisor runs its group there; Ctrl-C leaves nothing. The demo's topics
    and group it made on the session's broker are deleted afterwards."""
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=PLAINTEXT\n")
    up, lines, reader = _up("--bootstrap", kafka.bootstrap, "--kafka-config", str(props),
                            "--spark-remote", spark_remote, env=_up_env(tmp_path))
    try:
        _wait_up(up, lines, 180)
        assert _at(lines, f"broker | skipped: external cluster {kafka.bootstrap}") >= 0
        assert _at(lines, f"spark | skipped: SPARK_REMOTE={spark_remote}") >= 0
        status = ControlClient.discover(tmp_path / "data").status()
        assert (status.group, status.topic) == (DEFAULT_GROUP, INPUT_TOPIC)
        up.send_signal(signal.SIGINT)
        assert up.wait(STOP_WITHIN_S + 30) in (0, 130), "".join(lines[-30:])
        reader.join(10)
        wait_until(lambda: not stack_processes(stack), timeout=30,
                   what="every process of the stack to exit")
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
        admin = quiet_admin(kafka)
        for done in admin.delete_consumer_groups([DEFAULT_GROUP], request_timeout=30).values():
            with contextlib.suppress(Exception):
                done.result()
        ours = [t for t in admin.list_topics(timeout=30).topics if t.startswith(INPUT_TOPIC)]
        for done in (admin.delete_topics(ours, operation_timeout=30).values() if ours else ()):
            with contextlib.suppress(Exception):
                done.result()

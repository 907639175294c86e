"""`groupscope up` end to end: it serves the dashboard and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import psutil

from backend.cli import build_parser
from backend.netutil import free_port, wait_until
from backend.proc import STOP_WITHIN_S, run, spawn

EXPECTED_COMMANDS = {"up", "broker", "spark", "web", "watch", "produce", "replica", "backend",
                     "ctl", "snapshot", "groups"}


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


def test_help_lists_every_subcommand_and_each_has_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert EXPECTED_COMMANDS <= set(sub.choices)
    out = run([sys.executable, "-m", "backend.cli", "--help"],
              capture_output=True, text=True, timeout=60).stdout
    for name in EXPECTED_COMMANDS:
        assert name in out
        result = run([sys.executable, "-m", "backend.cli", name, "--help"],
                     capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert f"groupscope {name}" in result.stdout


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
    up = spawn(
        [sys.executable, "-m", "backend.cli", "up"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        text=True, start_new_session=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(up.stdout), daemon=True)
    reader.start()
    try:
        wait_until(lambda: any("groupscope is up" in line for line in lines) or up.poll(),
                   timeout=240, what="`groupscope up` to report ready")
        assert up.poll() is None, "".join(lines)
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/_stcore/health", timeout=5) as r:
            assert r.read().decode().strip() == "ok"
        assert any(f"http://localhost:{web_port}" in line for line in lines)
        assert len(_processes_with_marker(marker)) >= 4  # up, broker, spark, backend, web …
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

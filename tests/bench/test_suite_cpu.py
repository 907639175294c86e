"""bench/suite_cpu.py: what it calls a process, and one run of a short command end to end.
Not a performance test: no number is compared to a target."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from backend.proc import run

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from suite_cpu import LANE, Sampler, kind_of  # noqa: E402

BURN = ("import time\ndef burn(s):\n    t = time.process_time()\n"
        "    while time.process_time() - t < s: pass")


@pytest.mark.parametrize(("cmd", "kind"), [
    ("/usr/bin/java -cp x groupscope.read.AdminReader 1", "kafka reader (java)"),
    ("/usr/lib/jvm/bin/java -Xmx1g org.apache.spark.deploy.SparkSubmit", "spark (java)"),
    ("java -cp kafka_2.13-4.3.0.jar kafka.Kafka server.properties", "kafka node (java)"),
    ("/usr/bin/chromium-headless-shell --headless", "chromium"),
    (".venv/bin/python -m pytest -m idle -ra", "pytest lane"),
    (".venv/bin/python -m streamlit run dashboard/app.py", "web (streamlit)"),
    (".venv/bin/python -I -m backend.cli replica --id ada --group g", "replica"),
    (".venv/bin/python -m backend.cli exporter --interval 2", "groupscope exporter"),
    ("", "[kdamond.0]"),
])
def test_a_process_is_named_by_what_it_runs(cmd: str, kind: str) -> None:
    assert kind_of(cmd, "kdamond.0") == kind


def test_a_short_command_is_run_and_its_cpu_counted(tmp_path: Path) -> None:
    out = tmp_path / "cpu.json"
    proc = run([sys.executable, str(REPO / "bench" / "suite_cpu.py"), "--interval", "0.2",
                "--json", str(out), "--", sys.executable, "-c", BURN + "\nburn(1.5)"],
               cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["exit"] == 0 and data["command_cpu_s"] >= 1.4, data
    assert data["busy_cpu_s"] >= data["command_cpu_s"] - 0.2, data
    assert "| kind |" in proc.stdout and "unattributed" in proc.stdout


def test_a_live_process_is_charged_its_cpu_by_kind() -> None:
    """The sampler's reading of a process that burned 1.5 s of CPU and still lives (read
    after the burn, so the machine's load cannot make the reading early)."""
    child = subprocess.Popen([sys.executable, "-c", BURN + "\nburn(1.5)\nprint('done', "
                              "flush=True)\nimport time\ntime.sleep(60)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "done"
        sampler = Sampler(interval=1.0)
        sampler.sample()
        key = next(k for k in sampler.last if k[0] == child.pid)
        assert sampler.last[key] >= 1.4
        assert sampler.named[key][0] == "python, other"  # its lane: whichever runs this
    finally:
        child.kill()
        child.wait()


def test_a_lanes_pytest_is_told_by_its_report():
    cmd = ("/r/.venv/bin/python -m pytest -m slow and not idle -p no:cacheprovider "
           "--junitxml=/r/test-artifacts/slow-lane.xml -ra")
    assert LANE.search(cmd).group(1) == "slow"
    assert LANE.search("/r/.venv/bin/python -m pytest tests/x.py") is None

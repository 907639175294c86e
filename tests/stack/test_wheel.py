"""The built wheel, installed apart from the checkout, reads a cluster with a Java runtime only.

`pip wheel` of a copy of the tracked files (as `make wheel` does) gives a wheel that carries
the Kafka reader and the offsets writer compiled, the dashboard's pages and its Streamlit
settings. Installed into a new virtualenv and run from another directory, with a `java` that
has no `javac` beside it and nothing else on PATH, and Kafka's jars taken from a directory
named by GROUPSCOPE_KAFKA_JARS (no download): `groupscope groups`, the exporter and `watch`
serve the session's broker, and nothing is compiled.

The new environment takes groupscope's dependencies from the test's own (a `.pth` line), not
from the package index: what is under test is the wheel's own content, and installing
pyspark and Streamlit again would cost minutes of every run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import urllib.request
import zipfile
from pathlib import Path

import pytest

from backend.classdata import java
from backend.kafka.jars import kafka_lib_dir
from backend.netutil import free_port, wait_until
from backend.proc import STOP_WITHIN_S, abort_if_exited, run, spawn, terminate
from tests.exporter.conftest import value, wait_exported
from tests.exporter.test_exporter_live import produce_exactly
from tests.observer.conftest import create_topic
from tests.observer.seed import seed_groups

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ("backend/kafka/javaadmin/java/prebuilt/AdminReader.jar",
           "backend/offsets/java/prebuilt/OffsetsWriter.jar",
           "backend/kafka/javaadmin/java/AdminReader.java",
           "dashboard/screens/groups.py", "dashboard/.streamlit/config.toml")


def build_wheel(tmp: Path) -> Path:
    src, dist = tmp / "src", tmp / "dist"
    listed = run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    tracked = listed.stdout.decode().split("\0")
    for name in filter(None, tracked):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, src / name)
    done = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                "--quiet", "--wheel-dir", str(dist), str(src)], capture_output=True, text=True,
               timeout=300, env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    assert done.returncode == 0, done.stderr + done.stdout
    (wheel,) = dist.glob("groupscope-*.whl")
    return wheel


def install(wheel: Path, tmp: Path) -> tuple[Path, dict[str, str]]:
    """A new virtualenv with the wheel, and the environment to run it in: a Java runtime
    without a JDK, Kafka's jars from a named directory, its own cache and data."""
    venv = tmp / "venv"
    assert run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
               timeout=120).returncode == 0
    done = run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                "install", "--no-deps", "--quiet", str(wheel)], capture_output=True, text=True,
               timeout=300, env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"))
    assert done.returncode == 0, done.stderr + done.stdout
    purelib = run([str(venv / "bin" / "python"), "-c",
                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                  capture_output=True, text=True, timeout=60).stdout.strip()
    Path(purelib, "dependencies-of-the-test.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n")
    jre = tmp / "jre" / "bin"
    jre.mkdir(parents=True)
    (jre / "java").write_text(f'#!/bin/sh\nexec "{java()}" "$@"\n')
    (jre / "java").chmod(0o755)
    env = {"PATH": f"{jre}{os.pathsep}{venv / 'bin'}", "HOME": str(tmp / "home"),
           "GROUPSCOPE_KAFKA_JARS": str(kafka_lib_dir()),
           "GROUPSCOPE_CACHE": str(tmp / "cache"), "GROUPSCOPE_DATA": str(tmp / "data"),
           "LANG": "C.UTF-8"}
    assert shutil.which("javac", path=env["PATH"]) is None
    return venv, env


@pytest.mark.slow  # a wheel built and installed, three commands of it: the second lane
@pytest.mark.timeout(600)
def test_the_wheel_installs_and_reads_a_cluster_with_a_java_runtime_only(
        kafka, unique, tmp_path) -> None:
    topic, group = f"wheel-{unique}", f"wheel-group-{unique}"
    create_topic(kafka, topic, 2)
    produce_exactly(kafka, topic, (7, 5))
    seed_groups(kafka, {group: {(topic, 0): 2, (topic, 1): 5}})

    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert set(SHIPPED) <= names, sorted(set(SHIPPED) - names)
    venv, env = install(wheel, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    groupscope = str(venv / "bin" / "groupscope")
    where = run([str(venv / "bin" / "python"), "-c", "import backend; print(backend.__file__)"],
                cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60)
    assert where.stdout.startswith(str(venv)), where  # the wheel's groupscope, not the clone's

    done = run([groupscope, "groups", "--bootstrap", kafka.bootstrap, "--json", "--samples",
                "1"], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    rows = {r["group"]: r for r in json.loads(done.stdout)}
    assert rows[group]["lag_messages"] == 5 and rows[group]["state"] == "Empty"
    # the wheel's reader ran as shipped: nothing compiled into the new environment
    assert not list((venv / "share").glob("groupscope/kafka-reader-*"))

    port = free_port()
    logs = [tmp_path / "exporter.log", tmp_path / "watch.log"]
    with open(logs[0], "wb") as log:
        exporter = spawn([groupscope, "exporter", "--bootstrap", kafka.bootstrap, "--port",
                          str(port), "--interval", "1", "--no-history"], cwd=elsewhere,
                         env=env, stdout=log, stderr=subprocess.STDOUT)
    web = free_port()
    with open(logs[1], "wb") as log:
        watch = spawn([groupscope, "watch", "--bootstrap", kafka.bootstrap, "--port", str(web),
                       "--no-history"], cwd=elsewhere, env=env, stdout=log,
                      stderr=subprocess.STDOUT)
    try:
        s = wait_exported(port, 90, cluster=kafka.bootstrap, group=group, topic=topic)
        assert value(s, "groupscope_group_lag_messages", cluster=kafka.bootstrap,
                     group=group, topic=topic) == 5

        def page_up() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{web}/_stcore/health",
                                        timeout=5) as answer:
                return answer.read() == b"ok"

        wait_until(page_up, 90, interval=0.5, what="the installed watch's page",
                   abort=abort_if_exited(watch, "watch", lambda: logs[1].read_text()))
        exporter.send_signal(signal.SIGTERM)
        assert exporter.wait(STOP_WITHIN_S) == 0, logs[0].read_text()
    finally:
        terminate(exporter, 5.0)
        terminate(watch, 5.0)
    text = "".join(p.read_text(errors="replace") for p in logs)
    assert "Traceback" not in text and "javac" not in text, text

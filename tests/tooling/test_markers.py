"""tests/markers.py on a throwaway test tree, in a child pytest.

Only a child run shows a session's exit status and summary. Its fixtures are stand-ins named
like the real roots, and its `java` is answered by the guard's shim, so nothing here starts a
JVM or a browser: this is how `make unit` keeps proof that its own guard still fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CONFTEST = '''
import pytest

pytest_plugins = ["tests.markers"]


@pytest.fixture
def broker():
    return "a stand-in: nothing is started"


@pytest.fixture
def built_on_the_broker(broker):
    return broker
'''

TESTS = '''
import subprocess


def test_needs_the_broker(built_on_the_broker):
    pass


def test_starts_java_behind_the_markers_back():
    subprocess.run(["sh", "-c", "java -version"], capture_output=True)
'''


def _child_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_probe.py").write_text(TESTS)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("GROUPSCOPE_UNIT_ONLY", None)  # the child selects its own tests
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_a_fixture_built_on_a_root_fixture_gets_its_marker(tmp_path: Path) -> None:
    result = _child_pytest(tmp_path, "--collect-only", "-m", "broker")
    assert "test_needs_the_broker" in result.stdout, result.stdout
    assert "behind_the_markers_back" not in result.stdout, result.stdout


def test_a_light_session_that_runs_java_fails_and_names_the_test(tmp_path: Path) -> None:
    result = _child_pytest(tmp_path, "-m", "not broker")
    assert "1 passed" in result.stdout, result.stdout  # the test itself does not notice
    assert result.returncode == 1, result.stdout
    assert "test_starts_java_behind_the_markers_back: java run by a descendant" in result.stdout

"""The Status page's Spark executors: rows and headline from Spark's list, and the page on a
real engine."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from backend.netutil import free_port, wait_until
from backend.spark.executors import ExecutorInfo
from dashboard.views.executors import executor_rows, headline
from tests.dashboard.conftest import APP, page_text

DRIVER = ExecutorInfo("driver", "127.0.0.1:40001", True, 0, 0, 0, 0)


def test_a_cluster_lists_the_driver_then_each_executor_with_its_state_and_tasks():
    executors = [DRIVER,
                 ExecutorInfo("0", "127.0.0.1:40002", True, 1, 1, 120, 0),
                 ExecutorInfo("1", "127.0.0.1:40003", False, 1, 0, 80, 2, "Worker shutting down")]
    rows = executor_rows(executors)
    assert [(r["executor"], r["state"], r["cores"], r["active tasks"], r["completed tasks"],
             r["failed tasks"]) for r in rows] == [
        ("driver", "active", 0, 0, 0, 0),
        ("0", "active", 1, 1, 120, 0),
        ("1", "dead: Worker shutting down", 1, 0, 80, 2)]
    assert rows[1]["host"] == "127.0.0.1:40002"
    assert headline(executors) == ("**1** executor(s) beside the driver, **1** core(s) for "
                                   "tasks, 1 gone")


def test_local_mode_is_the_driver_alone_on_its_cores():
    local = [ExecutorInfo("driver", "127.0.0.1:40001", True, 2, 0, 37, 0)]
    assert headline(local) == "local mode: the driver runs every task, on **2** core(s)"
    assert executor_rows(local)[0]["completed tasks"] == 37


def test_the_ids_spark_gives_are_ordered_driver_first_then_by_number():
    from backend.spark.executors import _order

    found = [ExecutorInfo.from_json({"id": i, "hostPort": "h:1", "isActive": True})
             for i in ("10", "driver", "2")]
    assert [e.id for e in sorted(found, key=_order)] == ["driver", "2", "10"]


@pytest.fixture
def engine_only(monkeypatch, tmp_path, fresh_pollers, spark_remote):
    for key in ("GROUPSCOPE_KAFKA_CONFIG", "GROUPSCOPE_READONLY", "GROUPSCOPE_SPARK_UI"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("GROUPSCOPE_BOOTSTRAP", f"127.0.0.1:{free_port()}")  # no Kafka needed
    monkeypatch.setenv("SPARK_REMOTE", spark_remote)
    monkeypatch.setenv("GROUPSCOPE_DATA", str(tmp_path))
    return spark_remote


def test_the_status_page_lists_the_local_engines_driver(engine_only):
    at = AppTest.from_file(APP, default_timeout=30)
    at.switch_page("screens/status.py")

    def listed() -> str | None:
        at.run()
        assert not at.exception, at.exception
        text = page_text(at)
        return text if "local mode: the driver runs every task" in text else None

    text = wait_until(listed, 60, interval=0.5, what="the executors on the Status page")
    assert "Spark executors" in text
    assert "completed tasks" in text and "driver" in text

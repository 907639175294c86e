"""The Groups page's watcher: the process's always-on one when it watches the same cluster,
else one of its own that stops when nobody reads it (no broker needed: nothing is polled)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from backend.exporter.shared import register_process_watcher
from backend.kafka.settings import KafkaSettings
from backend.netutil import free_port, wait_until
from backend.observer.overview import OverviewWatcher
from dashboard.checks import ClusterTarget
from dashboard.pollers import SharedOverview, same_cluster


@pytest.fixture
def dead_bootstrap() -> str:
    return f"127.0.0.1:{free_port()}"


@pytest.fixture
def process_watcher(dead_bootstrap) -> Iterator[OverviewWatcher]:
    watcher = OverviewWatcher(KafkaSettings(bootstrap=dead_bootstrap))  # never started here
    register_process_watcher(watcher)
    try:
        yield watcher
    finally:
        register_process_watcher(None)


def test_same_cluster_ignores_order_case_and_spaces():
    assert same_cluster("a:9092,B:9093", " b:9093 , a:9092")
    assert not same_cluster("a:9092", "a:9093")
    assert not same_cluster("", "")


def test_the_process_watcher_of_the_same_cluster_is_read_and_never_stopped(
        process_watcher, dead_bootstrap):
    shared = SharedOverview(ClusterTarget(dead_bootstrap), idle_stop_s=0.0)
    assert shared.watcher() is process_watcher
    shared.prioritise(["a", "b"])
    assert process_watcher._priority == ("a", "b")
    shared.stop()
    assert process_watcher._thread is None and not process_watcher._stop.is_set()


def test_another_cluster_gets_its_own_watcher_stopped_when_idle(process_watcher):
    other = f"127.0.0.1:{free_port()}"
    shared = SharedOverview(ClusterTarget(other), interval_s=60.0, idle_stop_s=0.5)
    try:
        own = shared.watcher()
        assert own is not None and own is not process_watcher
        assert own.settings.bootstrap == other and own._thread is not None
        assert shared.watcher() is own  # one per cluster, however many reads
        # the first cycle fails fast against a closed port and is published as an error
        overview = wait_until(lambda: shared.latest(wait_s=0.1), 30, what="a first overview")
        assert overview.error and "refused" in overview.error
        # nobody reads: the watchdog stops it; the next read starts a fresh one
        wait_until(lambda: own._stop.is_set() or None, 10, what="the idle watcher stopped")
        assert shared.watcher() is not own
    finally:
        shared.stop()


def test_a_bad_properties_file_is_an_error_not_a_crash(tmp_path):
    bad = tmp_path / "client.properties"
    bad.write_text("this line has no equals sign\n")
    shared = SharedOverview(ClusterTarget("127.0.0.1:1", str(bad)))
    assert shared.latest() is None
    assert shared.error and "\n" not in shared.error

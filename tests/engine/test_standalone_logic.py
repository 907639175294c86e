"""The standalone cluster's pure parts: reading a worker's complaint, the driver's settings."""

from __future__ import annotations

from backend.engine.standalone import StandaloneCluster, unreachable_reason

EARLIER_RUN = (
    "26/11/24 13:43:09 WARN Worker: Failed to connect to master 127.0.0.1:47999\n"
    "org.apache.spark.SparkException: Exception thrown in awaitResult: \n"
    "Caused by: java.io.IOException: Failed to connect to /127.0.0.1:47999\n"
    "Caused by: java.net.ConnectException: finishConnect(..) failed with error(-111): "
    "Connection refused\n"
    "26/11/24 13:43:23 ERROR Worker: RECEIVED SIGNAL TERM\n"
)
THIS_RUN = "26/11/24 14:00:01 INFO Worker: Successfully registered with master spark://x\n"


def test_a_workers_complaint_names_the_last_cause_and_only_this_runs_log_counts(tmp_path):
    log = tmp_path / "worker-1.log"
    log.write_text(EARLIER_RUN)
    assert unreachable_reason(log) == "Connection refused"
    start = log.stat().st_size  # the worker is spawned again, appending to the same log
    with open(log, "a") as f:
        f.write(THIS_RUN)
    assert unreachable_reason(log, start) is None
    assert unreachable_reason(tmp_path / "missing.log") is None


def test_the_driver_asks_for_one_one_core_executor_per_worker(tmp_path):
    cluster = StandaloneCluster(tmp_path, workers=3)
    confs = cluster.driver_confs()
    assert (confs["spark.executor.cores"], confs["spark.cores.max"]) == ("1", "3")
    assert confs["spark.executor.memory"] == "480m"
    assert confs["spark.scheduler.minRegisteredResourcesRatio"] == "1.0"
    assert cluster.master_url == f"spark://127.0.0.1:{cluster.master_port}"
    worker = cluster.worker_command(2, cluster.master_url)
    assert worker[-1] == cluster.master_url
    assert worker[worker.index("--memory") + 1] == "480m"  # exactly one executor's worth
    assert worker[worker.index("--host") + 1] == "127.0.0.1"

"""The embedded Spark Connect server, started from the jars inside the pyspark package."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from backend.netutil import ensure_port_free
from backend.proc import STOP_BUDGET_S, ServiceProcess, ServiceStartError

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002


class EngineStartError(ServiceStartError):
    pass


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class SparkConnectServer:
    """`local[*]`, UI off, few shuffle partitions: tuned for small per-batch aggregations."""

    work_dir: Path
    port: int = DEFAULT_PORT
    host: str = "127.0.0.1"
    driver_memory: str = "1g"
    shuffle_partitions: int = 2
    token: str | None = field(default=None, repr=False)  # required of every client when set
    _service: ServiceProcess = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._service = ServiceProcess("Spark Connect server", (self.log_file,),
                                       EngineStartError)

    @property
    def remote(self) -> str:
        """Where local clients reach it (loopback when it listens on every interface)."""
        host = "127.0.0.1" if self.host == "0.0.0.0" else self.host
        return f"sc://{host}:{self.port}"

    @property
    def log_file(self) -> Path:
        return Path(self.work_dir) / "spark.log"

    def command(self) -> list[str]:
        confs = {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.connect.grpc.binding.address": self.host,
            # the driver's own RPC stays on loopback whatever address gRPC listens on
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.local.dir": str(Path(self.work_dir) / "tmp"),
            "spark.sql.warehouse.dir": str(Path(self.work_dir) / "warehouse"),
            # the whole heap up front, touched once: RSS is flat from the start instead of
            # creeping toward -Xmx over the first hour (what a soak would call a leak)
            "spark.driver.extraJavaOptions": f"-Dderby.system.home={self.work_dir} "
                                             f"-Xms{self.driver_memory} -XX:+AlwaysPreTouch",
            # a replica that was SIGKILLed never closes its session; free it after 3 minutes
            # instead of Spark's default hour
            "spark.connect.session.manager.defaultSessionTimeout": "3min",
        }
        cmd = [
            str(spark_home() / "bin" / "spark-submit"),
            "--class", SERVER_CLASS,
            "--master", "local[*]",
            "--name", "groupscope-engine",
            "--driver-memory", self.driver_memory,
        ]
        for key, value in confs.items():
            cmd += ["--conf", f"{key}={value}"]
        return cmd

    def start(self, timeout: float = 120.0, warm_up: bool = True) -> SparkConnectServer:
        ensure_port_free(self.host, self.port, "Spark Connect server")
        Path(self.work_dir).mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1")
        env.pop("SPARK_REMOTE", None)  # the server itself must not try to be a client
        env.pop("SPARK_CONNECT_AUTHENTICATE_TOKEN", None)
        if self.token:  # read by the server; an environment variable, not a visible argument
            env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = self.token
        self._service.spawn(self.command(), self.log_file, cwd=self.work_dir, env=env)
        self.wait_ready(timeout, warm_up)
        return self

    @property
    def process(self) -> subprocess.Popen | None:
        return self._service.popen

    def wait_ready(self, timeout: float, warm_up: bool = True) -> None:
        """Ready means a real query answers; warming up moves Spark's ≈6 s first-query cost
        here, before any replica joins a group."""
        from backend.engine.session import check_engine

        self._service.wait_ready(
            lambda: bool(check_engine(self.remote, warm_up=warm_up, timeout=10.0,
                                      token=self.token)),
            timeout, f"port {self.port}", interval=0.5)

    def stop(self, timeout: float = 30.0) -> int | None:
        return self._service.stop(timeout)

    def run_foreground(self) -> int:
        self.start()
        sys.stderr.write(f"Spark Connect ready at {self.remote} (log {self.log_file})\n")
        return self._service.run_until_signal(lambda: self.stop(STOP_BUDGET_S))

    def __enter__(self) -> SparkConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

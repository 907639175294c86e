"""Ports and switches of the embedded stack, from the environment (so honcho and `up` agree)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from backend.broker.nodes import MAX_BROKERS
from backend.cli_common import UserError
from backend.contracts.room import ENV_ROOM_ADDRESS
from backend.engine.server import DEFAULT_DRIVER_MEMORY
from backend.spark.session import DEFAULT_PORT as DEFAULT_SPARK_PORT

# Kafka refuses two IPv4 listeners on one port, so the room's listener cannot share the
# loopback listener's 9092: it takes the Kafka port + 2 unless GROUPSCOPE_ROOM_KAFKA_PORT says.
ROOM_KAFKA_PORT_OFFSET = 2
# The embedded engine's heap (`groupscope spark`). Its default, and why it is that size, is
# DEFAULT_DRIVER_MEMORY in backend/engine/server.py; more for heavier loads than the demo's.
ENV_SPARK_MEMORY = "GROUPSCOPE_SPARK_MEMORY"
# Spark refuses a driver with under 450 MiB of heap (1.5 x its 300 MiB reserve).
MIN_SPARK_MEMORY_MIB = 450
# `up --brokers N` / `groupscope broker --brokers N`: Kafka nodes on this machine
ENV_BROKERS = "GROUPSCOPE_BROKERS"
# `up --spark-workers N` / `groupscope spark --workers N`: a standalone master and N workers
ENV_SPARK_WORKERS = "GROUPSCOPE_SPARK_WORKERS"
MAX_SPARK_WORKERS = 8


@dataclass(frozen=True)
class StackConfig:
    kafka_port: int = 9092
    spark_port: int = DEFAULT_SPARK_PORT
    web_port: int = 8501
    external_kafka: bool = False
    external_spark: bool = False
    room_address: str | None = None  # `up --room`: the LAN address participants reach
    room_kafka_port: int | None = None
    spark_memory_setting: str | None = None  # GROUPSCOPE_SPARK_MEMORY as given
    brokers_setting: str | None = None  # GROUPSCOPE_BROKERS as given
    spark_workers_setting: str | None = None  # GROUPSCOPE_SPARK_WORKERS as given

    @classmethod
    def from_env(cls) -> StackConfig:
        env = os.environ
        return cls(
            kafka_port=int(env.get("GROUPSCOPE_KAFKA_PORT", "9092")),
            spark_port=int(env.get("GROUPSCOPE_SPARK_PORT", str(DEFAULT_SPARK_PORT))),
            web_port=int(env.get("GROUPSCOPE_WEB_PORT", "8501")),
            external_kafka=bool(env.get("GROUPSCOPE_BOOTSTRAP")),
            external_spark=bool(env.get("SPARK_REMOTE")),
            room_address=env.get(ENV_ROOM_ADDRESS) or None,
            room_kafka_port=int(env["GROUPSCOPE_ROOM_KAFKA_PORT"])
            if env.get("GROUPSCOPE_ROOM_KAFKA_PORT") else None,
            spark_memory_setting=env.get(ENV_SPARK_MEMORY) or None,
            brokers_setting=env.get(ENV_BROKERS) or None,
            spark_workers_setting=env.get(ENV_SPARK_WORKERS) or None,
        )

    def check(self) -> None:
        """Every setting `up` passes on, refused in one line before anything starts."""
        if self.brokers > 1 and self.external_kafka:
            raise UserError("--brokers runs an embedded Kafka cluster; it does not combine "
                            "with an external one (--bootstrap / GROUPSCOPE_BOOTSTRAP)")
        if self.brokers > 1 and self.room_address:
            raise UserError("a workshop room runs one broker: leave out --brokers with --room")
        if self.spark_workers and self.external_spark:
            raise UserError("--spark-workers runs an embedded Spark cluster; it does not "
                            "combine with an external one (--spark-remote / SPARK_REMOTE)")
        if not self.external_spark:
            _ = self.spark_memory

    @property
    def brokers(self) -> int:
        """Kafka nodes of the embedded cluster (1 unless `--brokers`), checked here so a bad
        value is one line before anything starts."""
        return _count(ENV_BROKERS, self.brokers_setting, 1, 1, MAX_BROKERS)

    @property
    def spark_workers(self) -> int:
        """Spark standalone workers behind the Connect server (0: `local[*]`, the default)."""
        return _count(ENV_SPARK_WORKERS, self.spark_workers_setting, 0, 0, MAX_SPARK_WORKERS)

    @property
    def spark_memory(self) -> str:
        """The embedded engine's heap, as the JVM writes sizes (512m, 2g); checked here, when
        Spark is started, so a bad value is one line rather than a JVM's refusal in a log."""
        value = (self.spark_memory_setting or DEFAULT_DRIVER_MEMORY).strip().lower()
        match = re.fullmatch(r"(\d+)([mg])", value)
        mib = int(match.group(1)) * (1024 if match.group(2) == "g" else 1) if match else 0
        if mib < MIN_SPARK_MEMORY_MIB:
            raise UserError(f"{ENV_SPARK_MEMORY}={self.spark_memory_setting}: give the Spark "
                            f"engine's heap as a size such as 480m or 2g, at least "
                            f"{MIN_SPARK_MEMORY_MIB}m")
        return value

    @property
    def room_kafka(self) -> int:
        """The port of the broker's listener on the room address."""
        return self.room_kafka_port or self.kafka_port + ROOM_KAFKA_PORT_OFFSET

    @property
    def web_address(self) -> str:
        """Where Streamlit listens: loopback, or every interface in a room (the presenter's
        own browser must still arrive over loopback, which is what makes it the presenter)."""
        return "0.0.0.0" if self.room_address else "127.0.0.1"

    @property
    def spark_address(self) -> str:
        """Where Spark Connect listens: loopback, or every interface in a room, where every
        client must bring the room's token."""
        return "0.0.0.0" if self.room_address else "127.0.0.1"

    @property
    def spark_remote(self) -> str:
        return os.environ.get("SPARK_REMOTE") or f"sc://127.0.0.1:{self.spark_port}"

    @property
    def dashboard_url(self) -> str:
        return f"http://localhost:{self.web_port}"


def _count(name: str, setting: str | None, default: int, lo: int, hi: int) -> int:
    if setting is None:
        return default
    try:
        value = int(setting)
    except ValueError:
        value = lo - 1
    if not lo <= value <= hi:
        raise UserError(f"{name}={setting}: give a whole number from {lo} to {hi}")
    return value

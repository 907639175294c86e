"""Ports and switches of the embedded stack, from the environment (so honcho and `up` agree)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from backend.contracts.room import ENV_ROOM_ADDRESS
from backend.engine.server import DEFAULT_PORT as DEFAULT_SPARK_PORT

# Kafka refuses two IPv4 listeners on one port, so the room's listener cannot share the
# loopback listener's 9092: it takes the Kafka port + 2 unless GROUPSCOPE_ROOM_KAFKA_PORT says.
ROOM_KAFKA_PORT_OFFSET = 2


@dataclass(frozen=True)
class StackConfig:
    kafka_port: int = 9092
    spark_port: int = DEFAULT_SPARK_PORT
    web_port: int = 8501
    external_kafka: bool = False
    external_spark: bool = False
    room_address: str | None = None  # `up --room`: the LAN address participants reach
    room_kafka_port: int | None = None

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
        )

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

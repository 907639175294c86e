"""Ports and switches of the embedded stack, from the environment (so honcho and `up` agree)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from backend.engine.server import DEFAULT_PORT as DEFAULT_SPARK_PORT


@dataclass(frozen=True)
class StackConfig:
    kafka_port: int = 9092
    spark_port: int = DEFAULT_SPARK_PORT
    web_port: int = 8501
    external_kafka: bool = False
    external_spark: bool = False

    @classmethod
    def from_env(cls) -> StackConfig:
        env = os.environ
        return cls(
            kafka_port=int(env.get("GROUPSCOPE_KAFKA_PORT", "9092")),
            spark_port=int(env.get("GROUPSCOPE_SPARK_PORT", str(DEFAULT_SPARK_PORT))),
            web_port=int(env.get("GROUPSCOPE_WEB_PORT", "8501")),
            external_kafka=bool(env.get("GROUPSCOPE_BOOTSTRAP")),
            external_spark=bool(env.get("SPARK_REMOTE")),
        )

    @property
    def spark_remote(self) -> str:
        return os.environ.get("SPARK_REMOTE") or f"sc://127.0.0.1:{self.spark_port}"

    @property
    def dashboard_url(self) -> str:
        return f"http://localhost:{self.web_port}"

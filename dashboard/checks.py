"""Real, time-bounded probes of the cluster and the engine for the Status page.

Each probe returns a plain dataclass or raises with a one-line message; the pollers run them
off the Streamlit script thread so a slow or dead cluster never blocks a page render.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from backend.contracts import BrokerView
from backend.kafka.groups import state_name
from backend.kafka.settings import (
    ENV_BOOTSTRAP,
    ENV_KAFKA_CONFIG,
    KafkaSettings,
    embedded_settings,
    quiet_logger,
    resolve_settings,
)
from backend.observer.brokers import broker_views, live_brokers, placement_of, totals
from backend.spark.session import check_engine, spark_remote

PROBE_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int
    internal: bool


@dataclass(frozen=True)
class GroupInfo:
    group_id: str
    state: str  # Stable, Empty, PreparingRebalance, ... as Kafka names them
    type: str  # classic, consumer or unknown
    simple: bool


@dataclass(frozen=True)
class ClusterOverview:
    bootstrap: str
    described: str  # KafkaSettings.describe(): safe to show, never a password
    brokers: int
    topics: tuple[TopicInfo, ...]
    groups: tuple[GroupInfo, ...]
    # every broker (up, or down but named in a replica list) counted over every topic's
    # partitions, from the same metadata answer as `topics`
    broker_views: tuple[BrokerView, ...] = ()
    under_replicated: int = 0
    offline_partitions: int = 0


@dataclass(frozen=True)
class EngineStatus:
    remote: str
    version: str


@dataclass(frozen=True)
class ClusterTarget:
    """Which cluster to probe, fully resolved so pollers can be cached per cluster."""

    bootstrap: str
    kafka_config: str | None = None
    external: bool = True

    @classmethod
    def from_env(cls) -> ClusterTarget:
        """GROUPSCOPE_BOOTSTRAP / GROUPSCOPE_KAFKA_CONFIG, else the embedded broker's port."""
        bootstrap = os.environ.get(ENV_BOOTSTRAP) or ""
        config = os.environ.get(ENV_KAFKA_CONFIG) or None
        if bootstrap or config:
            return cls(bootstrap, config, external=True)
        return cls(embedded_settings().bootstrap, None, external=False)

    def settings(self) -> KafkaSettings:
        """Resolve lazily: a bad properties file becomes a shown error, not a crash."""
        if not self.external:
            return KafkaSettings(bootstrap=self.bootstrap)
        return resolve_settings(self.bootstrap or None, self.kafka_config)

    def describe(self) -> str:
        """Safe to show: the bootstrap and security mode, never a password."""
        try:
            return self.settings().describe()
        except Exception:
            return f"{self.bootstrap or '(bootstrap from config file)'} (config not readable)"


def _enum_name(value: object) -> str:
    name = getattr(value, "name", None)
    return str(name if name is not None else value)


def probe_cluster(target: ClusterTarget, timeout: float = PROBE_TIMEOUT_S) -> ClusterOverview:
    """Broker count, topics and consumer groups; raises ClusterUnreachable within ~timeout."""
    from confluent_kafka.admin import AdminClient

    settings = target.settings()
    brokers = settings.check_reachable(timeout=timeout)
    admin = AdminClient(settings.client_config(**_quiet()))
    md = admin.list_topics(timeout=timeout)
    placements = [placement_of(pm) for t in md.topics.values() if t.error is None
                  for pm in t.partitions.values()]
    views = broker_views(live_brokers(md.brokers), placements)
    under, offline = totals(placements)
    topics = tuple(sorted(
        (TopicInfo(name, len(t.partitions), name.startswith("__"))
         for name, t in md.topics.items()),
        key=lambda t: (t.internal, t.name),
    ))
    result = admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout + 1)
    groups = tuple(sorted(
        (GroupInfo(g.group_id, state_name(getattr(g, "state", "UNKNOWN")),
                   _enum_name(getattr(g, "type", "UNKNOWN")).lower(),
                   bool(g.is_simple_consumer_group))
         for g in result.valid),
        key=lambda g: g.group_id,
    ))
    return ClusterOverview(settings.bootstrap, settings.describe(), brokers, topics, groups,
                           views, under, offline)


def probe_engine(remote: str | None = None, timeout: float = PROBE_TIMEOUT_S) -> EngineStatus:
    """Run a real Spark Connect query; raises EngineUnavailable with the reason."""
    url = spark_remote(remote)
    return EngineStatus(url, check_engine(url, timeout=timeout))


def _quiet() -> dict[str, object]:
    return {"logger": quiet_logger("groupscope.dashboard.librdkafka")}

"""Real, time-bounded probes of the cluster and the engine for the Status page.

Each probe returns a plain dataclass or raises with a one-line message; the pollers run them
off the Streamlit script thread so a slow or dead cluster never blocks a page render.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from backend.contracts import CLASSIC, BrokerView
from backend.errors import one_line
from backend.kafka.javaadmin.reader import KafkaReader, ReaderError
from backend.kafka.properties import KafkaConfigError
from backend.kafka.settings import (
    ENV_BOOTSTRAP,
    ENV_KAFKA_CONFIG,
    ClusterUnreachable,
    KafkaSettings,
    embedded_settings,
    resolve_settings,
)
from backend.observer.brokers import broker_views, totals
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
    type: str  # one of GROUP_TYPES (classic, consumer, share, streams), or unknown
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


class ClusterProbe:
    """The Status page's cluster check: the brokers that answer, every topic with where its
    partitions live, every group of every type. Read through the process's Kafka reader
    (Kafka's Java Admin, one JVM shared with the observers of the same cluster), never
    librdkafka's admin, whose process aborts when a coordinator's connection drops mid-call.
    One per cluster poller; `close` releases the reader with the poller."""

    def __init__(self, target: ClusterTarget) -> None:
        self.target = target
        self._reader: KafkaReader | None = None
        self._closed = False
        self._lock = threading.Lock()

    def __call__(self) -> ClusterOverview:
        settings = self.target.settings()
        refused = settings.refused_everywhere()
        if refused:  # answers at once, where the reader would wait out its timeout
            raise ClusterUnreachable(f"Kafka at {settings.bootstrap} refused the connection "
                                     f"({refused}): is the broker running there?")
        reader = self._open(settings)
        try:
            live = reader.cluster().brokers
            metas, _ = reader.topics()  # the topics the principal may not describe: absent
            listed, _ = reader.listing()
        except ReaderError as exc:
            raise ClusterUnreachable(_explained(settings, exc)) from None
        placements = [pl for meta in metas.values() for pl in meta.placements.values()]
        under, offline = totals(placements)
        topics = tuple(sorted((TopicInfo(name, meta.count, name.startswith("__"))
                               for name, meta in metas.items()),
                              key=lambda t: (t.internal, t.name)))
        groups = tuple(GroupInfo(g.group, g.state, g.type or "unknown",
                                 g.type == CLASSIC and not g.protocol) for g in listed)
        return ClusterOverview(settings.bootstrap, settings.describe(), len(live), topics,
                               groups, tuple(broker_views(live, placements)), under, offline)

    def _open(self, settings: KafkaSettings) -> KafkaReader:
        with self._lock:
            if self._closed:  # a probe still running as its poller was released
                raise ClusterUnreachable("the cluster check was stopped")
            if self._reader is None or self._reader.settings != settings:
                if self._reader is not None:
                    self._reader.close()
                self._reader = KafkaReader.shared(settings, "groupscope-status")
            return self._reader

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._reader is not None:
                self._reader.close()
                self._reader = None


def _explained(settings: KafkaSettings, failure: ReaderError) -> str:
    """A failed read in the words the rest of groupscope uses for a refused login, an
    untrusted certificate or a broker away: librdkafka's connection check (one metadata
    request) names which and what to fix. The reader's own line when it finds nothing."""
    try:
        settings.check_reachable(timeout=PROBE_TIMEOUT_S)
    except (ClusterUnreachable, KafkaConfigError) as why:
        return one_line(why)
    return settings.scrub(f"Kafka at {settings.bootstrap}: {failure}")


def probe_engine(remote: str | None = None, timeout: float = PROBE_TIMEOUT_S) -> EngineStatus:
    """Run a real Spark Connect query; raises EngineUnavailable with the reason."""
    url = spark_remote(remote)
    return EngineStatus(url, check_engine(url, timeout=timeout))

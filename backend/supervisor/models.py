"""What the control API returns, as dataclasses the server, the client and the CLI share.

Plain data with `to_dict` / `from_dict`, so the dashboard can use the typed client without
importing anything that spawns processes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

PROTOCOL_ASSIGNORS: dict[str, tuple[str, ...]] = {
    # classic protocol: the client-side assignors librdkafka ships
    "classic": ("range", "roundrobin", "cooperative-sticky"),
    # KIP-848 consumer protocol: the broker's server-side assignors
    "consumer": ("uniform", "range"),
}
DEFAULT_PROTOCOL = "classic"
DEFAULT_ASSIGNOR = "range"


def _pick(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass(frozen=True)
class ReplicaOptions:
    """How new replicas join: group protocol, assignor, delivery mode."""

    protocol: str = DEFAULT_PROTOCOL
    assignor: str = DEFAULT_ASSIGNOR
    exactly_once: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplicaOptions:
        return cls(**_pick(cls, data))


@dataclass(frozen=True)
class ReplicaInfo:
    """One replica the supervisor spawned (alive or not): what `ctl status` lists."""

    name: str
    colour: str
    state: str  # running | stopping | restarting | stopped | killed | crashed | exited
    pid: int | None
    started_at: float | None  # epoch seconds
    ended_at: float | None
    returncode: int | None
    exit_signal: str | None  # e.g. SIGKILL when it died from a signal
    protocol: str
    assignor: str
    exactly_once: bool
    restarts: int = 0
    crashes: int = 0
    forced: bool = False  # a graceful stop that had to be escalated to SIGKILL
    log_file: str | None = None
    # filled in from the broker's view of the group
    member: bool | None = None  # None: the broker could not be asked
    partitions: tuple[int, ...] = ()

    @property
    def alive(self) -> bool:
        return self.state in ("running", "stopping", "restarting")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["partitions"] = list(self.partitions)
        d["alive"] = self.alive
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplicaInfo:
        d = _pick(cls, data)
        d["partitions"] = tuple(d.get("partitions") or ())
        return cls(**d)


@dataclass(frozen=True)
class ExternalMember:
    """A group member the broker reports that this supervisor did not spawn: visible only."""

    client_id: str
    member_id: str
    host: str
    colour: str
    partitions: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["partitions"] = list(self.partitions)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExternalMember:
        d = _pick(cls, data)
        d["partitions"] = tuple(d.get("partitions") or ())
        return cls(**d)


@dataclass(frozen=True)
class Status:
    """Everything `GET /status` returns."""

    group: str
    topic: str
    partitions: int | None
    options: ReplicaOptions
    replicas: tuple[ReplicaInfo, ...]
    external: tuple[ExternalMember, ...]
    group_state: str | None
    fleet: dict[str, Any] | None
    max_replicas: int
    broker_error: str | None = None
    recent: tuple[dict[str, Any], ...] = field(default=())

    @property
    def running(self) -> tuple[ReplicaInfo, ...]:
        return tuple(r for r in self.replicas if r.alive)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group, "topic": self.topic, "partitions": self.partitions,
            "options": self.options.to_dict(),
            "replicas": [r.to_dict() for r in self.replicas],
            "external": [m.to_dict() for m in self.external],
            "group_state": self.group_state, "fleet": self.fleet,
            "max_replicas": self.max_replicas, "broker_error": self.broker_error,
            "recent": list(self.recent),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Status:
        return cls(
            group=data["group"], topic=data["topic"], partitions=data.get("partitions"),
            options=ReplicaOptions.from_dict(data.get("options") or {}),
            replicas=tuple(ReplicaInfo.from_dict(r) for r in data.get("replicas") or ()),
            external=tuple(ExternalMember.from_dict(m) for m in data.get("external") or ()),
            group_state=data.get("group_state"), fleet=data.get("fleet"),
            max_replicas=int(data.get("max_replicas") or 0),
            broker_error=data.get("broker_error"),
            recent=tuple(data.get("recent") or ()),
        )


@dataclass(frozen=True)
class PartitionChange:
    """Result of adding partitions: which streams now hash to a different partition."""

    topic: str
    before: int
    after: int
    moved: tuple[tuple[str, int, int], ...]  # (stream id, old partition, new partition)
    streams_checked: int

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "before": self.before, "after": self.after,
                "moved": [list(m) for m in self.moved], "streams_checked": self.streams_checked}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PartitionChange:
        return cls(topic=data["topic"], before=int(data["before"]), after=int(data["after"]),
                   moved=tuple((str(s), int(a), int(b)) for s, a, b in data.get("moved") or ()),
                   streams_checked=int(data.get("streams_checked") or 0))

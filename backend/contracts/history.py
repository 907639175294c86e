"""The memory's vocabulary: rebalance episodes with their causes and impact, state changes,
lag points and the supervisor's actions, as the recorder writes them and every reader (the
Timeline page, `groupscope history`, /metrics, the alert rules) reads them.

A cause is named only with its evidence (`Cause.evidence`, in words, and the facts it rests
on), never guessed: an episode whose observations support none says so (`NOT_OBSERVED`).
Plain frozen dataclasses like the Snapshot; pydantic reads and writes them (EPISODE_JSON).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import TypeAdapter

# ---- where and how long ------------------------------------------------------------------

HISTORY_FILE = "history.sqlite"  # under the data directory (backend.paths.data_dir)
DEFAULT_RETENTION_DAYS = 7
DEFAULT_MAX_BYTES = 1 << 30  # 1 GiB: the oldest lag goes first, then states, then episodes
# a group's total lag is recorded every cycle it changes; each partition's at most this often,
# which is what keeps a week of thousands of busy groups in a gigabyte (bench/README.md)
PARTITION_LAG_STEP_MS = 300_000

# ---- causes --------------------------------------------------------------------------------

JOINED, LEFT, EXPIRED, DEPARTED, REJOINED = "joined", "left", "expired", "departed", "rejoined"
PARTITIONS_ADDED, SUBSCRIPTION, PROTOCOL, ASSIGNOR, EPOCH = (
    "partitions added", "subscription changed", "protocol changed", "assignor changed",
    "epoch bump")
KILLED, STOPPED, SCALED, STARTED, CRASHED, RESTARTED = (
    "killed", "stopped", "scaled", "started", "crashed", "restarted")
NOT_OBSERVED = "cause not observed"

# Every cause, in the order an episode's main cause is chosen (the first it has), with the
# evidence that names it. The supervisor's own actions come first: they say who did it.
CAUSES: dict[str, str] = {
    KILLED: "groupscope's supervisor sent the replica SIGKILL (the presenter's Kill)",
    CRASHED: "the replica process ended on its own with a non-zero exit code",
    STOPPED: "the supervisor stopped the replica gracefully (SIGTERM)",
    RESTARTED: "the supervisor restarted the replica (stop, then start under the same name)",
    SCALED: "the supervisor started or stopped replicas to reach a replica count",
    STARTED: "the supervisor started a replica",
    EXPIRED: "the member stayed listed, owning its partitions, while their commits stopped "
             "with records waiting, and was removed about one session timeout later",
    LEFT: "the member was gone from one description to the next while its partitions were "
          "still being committed: it left the group itself",
    DEPARTED: "the member is gone, and nothing observed tells whether it left or expired "
              "(no records waited on its partitions)",
    JOINED: "a member id not seen before",
    REJOINED: "a static member (group.instance.id) came back under a new member id, owning "
              "the same partitions: no rebalance",
    PARTITIONS_ADDED: "a topic the group reads gained partitions",
    SUBSCRIPTION: "the topics the group's members own changed with no partitions added",
    PROTOCOL: "the group's type changed (classic to consumer, or back)",
    ASSIGNOR: "the group's partition assignor changed",
    EPOCH: "KIP-848: the group epoch moved with no member or topic change seen",
    NOT_OBSERVED: "nothing observed between the two descriptions explains the rebalance",
}
# the causes that are a member coming or going, counted by
# groupscope_group_membership_changes_total{change}
MEMBERSHIP_CHANGES: tuple[str, ...] = (JOINED, LEFT, EXPIRED, DEPARTED, REJOINED)
SUPERVISOR_CAUSES: tuple[str, ...] = (KILLED, CRASHED, STOPPED, RESTARTED, SCALED, STARTED)


def main_cause(kinds: tuple[str, ...] | list[str]) -> str:
    """The cause an episode is known by: the first of CAUSES among `kinds`."""
    present = set(kinds)
    return next((k for k in CAUSES if k in present), NOT_OBSERVED)


# ---- the supervisor's actions ----------------------------------------------------------------

# What the supervisor's replica pool says it did (`ReplicaPool._note`) -> the cause it gives an
# episode that member is in. `exit` is a crash only with no intent and a non-zero code.
ACTION_CAUSES: dict[str, str] = {
    "kill": KILLED, "stop": STOPPED, "restart": RESTARTED, "scale-up": SCALED,
    "scale-down": SCALED, "start": STARTED, "crash": CRASHED,
}


# set by `groupscope up` for a backend it starts again after a crash: the replicas that backend
# starts are restarts of the demo's, not the presenter's doing
ENV_RESTARTED_BY_UP = "GROUPSCOPE_RESTARTED_BY_UP"


@dataclass(frozen=True)
class Action:
    """One thing groupscope's supervisor did to a replica of a group, as the memory keeps it."""

    ts_ms: int
    group: str
    replica: str  # the replica's name, its members' client id
    action: str  # a key of ACTION_CAUSES
    exit_code: int | None = None  # a crash's
    # presenter (a control request), up (the demo's start-up), up-restart (the start-up of a
    # backend `up` started again), supervisor (the replica did it itself)
    by: str = "presenter"

    @property
    def cause(self) -> str:
        return ACTION_CAUSES[self.action]


# ---- the audit of writes ---------------------------------------------------------------------

@dataclass(frozen=True)
class AuditEntry:
    """One write groupscope made to a cluster (an offsets reset or delete), as the memory
    keeps it: who asked, through what, on which cluster and group, every partition's
    before → after, and the partitions the broker refused."""

    ts_ms: int
    user: str  # the signed-in user, else the browser's address, else the OS user of a command
    via: str  # "offsets page" or "offsets command"
    cluster: str  # the bootstrap servers, as the writer named the cluster
    group: str
    action: str  # the plan's action: reset, delete
    changes: tuple[str, ...]  # one per partition: "topic-3: 80 → 0"
    refused: tuple[str, ...] = ()  # one per partition: "topic-3: <the broker's error>"


# ---- episodes ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cause:
    """One cause of an episode and what shows it.

    `member` is the client id it concerns (None for a group-wide cause); `evidence` says in
    one line what was observed; the numbers it quotes are also fields, for scripts."""

    kind: str  # a key of CAUSES
    evidence: str
    member: str | None = None
    member_id: str | None = None
    host: str | None = None
    instance_id: str | None = None
    # expired: from the last commit of its partitions to the group noticing it gone
    dead_ms: int | None = None
    topic: str | None = None  # partitions added / subscription changed
    before: str | None = None  # what changed, before and after (counts, names, epochs)
    after: str | None = None
    exit_code: int | None = None  # crashed


@dataclass(frozen=True)
class Moved:
    topic: str
    partition: int
    source: str | None  # client id of the owner before, None: nobody
    target: str | None


@dataclass(frozen=True)
class Impact:
    """What an episode cost, as far as the descriptions and commits show it."""

    moved: tuple[Moved, ...] = ()
    # partitions of the group's topics with no owner, summed over the episode's seconds
    unowned_partition_seconds: float = 0.0
    # over the partitions that moved: the longest time from the last commit progress before
    # the episode to the first after it; None until every one progressed again
    gap_ms: int | None = None
    lag_before: int | None = None  # total lag at the last settled description before
    lag_peak: int | None = None  # the most it reached until the episode was final
    lag_after: int | None = None  # when the episode was final
    recovered_ms: int | None = None  # from the end until the lag was back to lag_before
    reprocessed: int = 0  # records committed again: committed offsets that went backwards
    # KIP-848: client id -> how long it owned something else than its target
    reconciling: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Episode:
    """One rebalance of one group, from the first description that saw it to the first that
    saw the group settled again, with its causes and impact.

    `final` is False while the impact may still change (the processing gap not closed, the
    lag not back): the recorder writes an episode when it ends and again when it is final."""

    cluster: str
    group: str
    start_ms: int
    end_ms: int | None  # None while the group is still rebalancing
    protocol: str  # the group's type after (before, for an open one)
    # how it was seen: "state" (left a settled state), "generation" (the epoch moved
    # between two settled polls), "assignment" (owners changed between two settled polls),
    # "reconcile" (KIP-848 targets not met), "rejoin" (a static member, nothing moved)
    seen_as: str
    causes: tuple[Cause, ...] = ()
    impact: Impact = field(default_factory=Impact)
    joined: tuple[str, ...] = ()  # client ids
    left: tuple[str, ...] = ()
    generation_before: int | None = None  # generation (classic) or group epoch
    generation_after: int | None = None
    target_epoch_before: int | None = None  # KIP-848 / share / streams
    target_epoch_after: int | None = None
    assignor: str | None = None
    final: bool = False

    @property
    def cause(self) -> str:
        return main_cause([c.kind for c in self.causes])

    @property
    def rebalance(self) -> bool:
        """A rejoin (a static member back within its session) moved nothing and is no
        rebalance: it is kept and shown, but not counted as one."""
        return self.seen_as != "rejoin"

    @property
    def duration_ms(self) -> int | None:
        return None if self.end_ms is None else self.end_ms - self.start_ms


@dataclass(frozen=True)
class StateChange:
    """A group's description changed in one of the facts the memory keeps per group."""

    ts_ms: int
    group: str
    state: str
    protocol: str
    assignor: str | None
    members: int
    generation: int | None


@dataclass(frozen=True)
class LagPoint:
    """A group's total lag at one cycle, or one partition's (topic and partition set)."""

    ts_ms: int
    lag: int
    lag_seconds: float | None = None


EPISODE_JSON: TypeAdapter[Episode] = TypeAdapter(Episode)
EPISODES_JSON: TypeAdapter[tuple[Episode, ...]] = TypeAdapter(tuple[Episode, ...])
ACTION_JSON: TypeAdapter[Action] = TypeAdapter(Action)

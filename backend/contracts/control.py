"""The control plane's contract: group choices, limits, and every request and response body.

The supervisor's FastAPI app validates with these models and generates `/openapi.json` from
them; the typed client, `groupscope ctl` and the dashboard's controls parse answers with the
same models. So a route's body, a field or a limit is written here once and nowhere else.

These are pydantic models rather than the plain dataclasses of the message contracts: they
are validation at a trust boundary (HTTP), and they are not on a per-message path (a status
call builds a few dozen of them; see `bench/README.md` for what that costs).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictInt,
    Tag,
    computed_field,
    create_model,
    field_validator,
    model_validator,
)

from backend.contracts import AFTER_SUMMARY, CLASSIC, COMMIT_MODES, CONSUMER, TRANSACTIONAL
from backend.contracts.lab import (
    DEFAULT_LAB_PROTOCOLS,
    LAB_EVENTS,
    LAB_PROTOCOLS,
    MAX_LAB_GROUPS,
    Score,
)

# ---- group choices ----------------------------------------------------------------------

PROTOCOL_ASSIGNORS: dict[str, tuple[str, ...]] = {
    # classic protocol: the client-side assignors librdkafka ships
    CLASSIC: ("range", "roundrobin", "cooperative-sticky"),
    # KIP-848 consumer protocol: the broker's server-side assignors
    CONSUMER: ("uniform", "range"),
}
DEFAULT_PROTOCOL = CLASSIC
DEFAULT_ASSIGNOR = PROTOCOL_ASSIGNORS[DEFAULT_PROTOCOL][0]
ALL_ASSIGNORS: tuple[str, ...] = tuple(
    dict.fromkeys(a for assignors in PROTOCOL_ASSIGNORS.values() for a in assignors))

# the table's assignors as a type, so a request model and /openapi.json list them
Assignor = Literal[ALL_ASSIGNORS]  # type: ignore[valid-type]


class GroupChoiceError(ValueError):
    """A protocol / assignor pair that cannot work; the message says what to choose."""


def resolve_assignor(protocol: str, assignor: str | None = None) -> str:
    """The assignor a replica joins with: `assignor`, or the protocol's default when None.

    The one check of a group choice: the CLI, the API, the chaos run and the dashboard all
    call this, so "range works with both protocols, uniform only with KIP-848" lives here.
    """
    if protocol not in PROTOCOL_ASSIGNORS:
        raise GroupChoiceError(f"unknown protocol {protocol!r}; choose one of "
                               f"{', '.join(PROTOCOL_ASSIGNORS)}")
    allowed = PROTOCOL_ASSIGNORS[protocol]
    if assignor is None:
        return allowed[0]
    if assignor not in allowed:
        raise GroupChoiceError(f"assignor {assignor!r} does not work with the {protocol} "
                               f"protocol; choose one of {', '.join(allowed)}")
    return assignor


# the commit modes as a type, so a request model and /openapi.json list them
CommitMode = Literal[tuple(COMMIT_MODES)]  # type: ignore[valid-type]


def resolve_commit(commit: str | None, exactly_once: bool | None) -> str | None:
    """The commit mode a choice means: `commit`, with `exactly_once` its older spelling (True:
    transactional; False: after-summary, once called at-least-once); None when neither is
    given. The one check of the pair, for the CLIs, the API and the replica alike."""
    if commit is not None and commit not in COMMIT_MODES:
        raise GroupChoiceError(f"unknown commit mode {commit!r}; choose one of "
                               f"{', '.join(COMMIT_MODES)}")
    if exactly_once is None:
        return commit
    older = TRANSACTIONAL if exactly_once else AFTER_SUMMARY
    if commit not in (None, older):
        raise GroupChoiceError(f"exactly-once {'on' if exactly_once else 'off'} means commit "
                               f"{older}, not {commit}: give one of them")
    return older


def _older_commit_spelling(data: Any) -> Any:
    """An answer's `exactly_once` (what these models said before commit modes) as `commit`
    when it has none; with one, `exactly_once` is what the model derives from it."""
    if isinstance(data, dict) and "exactly_once" in data:
        data = dict(data)
        exactly_once = data.pop("exactly_once")
        if data.get("commit") is None:
            data["commit"] = TRANSACTIONAL if exactly_once else AFTER_SUMMARY
    return data


# ---- limits -----------------------------------------------------------------------------

MAX_REPLICAS = 64  # replicas one supervisor runs (a deployment may set a lower cap)
MAX_RATE = 100_000.0  # messages per second: the in-process simulator, a replica's capacity
MAX_STREAMS = 10_000  # simulated streams (cars)
MAX_PARTITIONS = 1_000  # partitions the input topic may grow to
MAX_BODY_BYTES = 64 * 1024  # a control request's body

# a rate in messages per second, as a request gives it: above 0, at most MAX_RATE, finite
Rate = Annotated[float, Field(gt=0, le=MAX_RATE, allow_inf_nan=False)]

# ---- shared base ------------------------------------------------------------------------


class Answer(BaseModel):
    """A response body: immutable, and tolerant of fields a newer server adds."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class Request(BaseModel):
    """A request body: strict types (JSON `true` is not 1) and no unknown fields, so a typo is
    refused rather than looking like success."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


# ---- a warm standby replica (supervisor -> `groupscope replica --standby`) --------------

STANDBY_READY = "standby ready"  # the line a standby logs once warm, waiting for its order
STANDBY_NAME = "standby"  # its --id and log file's name until it gets its own
STANDBY_DELAY_S = 8.0  # quiet time after a replica starts before the next standby does
STANDBY_KEEP_ALIVE_S = 60.0  # a waiting standby's query: under the engine's idle timeout


class StandbyOrder(Request):
    """The one line a standby waits for on stdin: the replica's own arguments (what follows
    `groupscope replica` on a command line, the one builder's output) and the log it writes
    to from then on."""

    argv: list[str]
    log: str | None = None
    title: str | None = None  # the command line `ps` shows from then on (the cold start's)


# ---- what the supervisor reports --------------------------------------------------------

class ReplicaOptions(Answer):
    """How new replicas join: group protocol, assignor, delivery mode, static membership, and
    the capacity (rate cap) every replica of this supervisor runs with."""

    protocol: str = DEFAULT_PROTOCOL
    assignor: str = DEFAULT_ASSIGNOR
    commit: CommitMode = Field(AFTER_SUMMARY, description="when a replica commits its "
                                                          "offsets (COMMIT_MODES)")
    static: bool = Field(False, description="group.instance.id = the replica's name: a "
                                            "restart within the session timeout moves no "
                                            "partition")
    max_rate: Rate | None = Field(None, description="messages/s each replica takes at most; "
                                                    "null: no cap")

    @model_validator(mode="before")
    @classmethod
    def _older_spelling(cls, data: Any) -> Any:
        return _older_commit_spelling(data)

    @model_validator(mode="after")
    def _choice_works(self) -> ReplicaOptions:
        resolve_assignor(self.protocol, self.assignor)
        return self

    @computed_field  # type: ignore[prop-decorator]
    @property
    def exactly_once(self) -> bool:
        return self.commit == TRANSACTIONAL


ReplicaState = Literal["running", "stopping", "restarting", "stopped", "killed", "crashed",
                       "exited"]
ALIVE_STATES: tuple[str, ...] = ("running", "stopping", "restarting")


class ReplicaInfo(Answer):
    """One replica the supervisor spawned (alive or not): what `ctl status` lists."""

    name: str
    colour: str
    state: ReplicaState
    pid: int | None
    started_at: float | None = Field(description="epoch seconds")
    ended_at: float | None
    returncode: int | None
    exit_signal: str | None = Field(description="e.g. SIGKILL when it died from a signal")
    protocol: str
    assignor: str
    commit: str = AFTER_SUMMARY
    static: bool = False
    max_rate: float | None = Field(None, description="messages/s it takes at most; null: no cap")
    restarts: int = 0
    crashes: int = 0
    forced: bool = Field(False, description="a graceful stop escalated to SIGKILL")
    log_file: str | None = None
    member: bool | None = Field(None, description="in the group per the broker; null: "
                                                  "the broker could not be asked")
    partitions: tuple[int, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _older_spelling(cls, data: Any) -> Any:
        return _older_commit_spelling(data)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def alive(self) -> bool:
        return self.state in ALIVE_STATES

    @computed_field  # type: ignore[prop-decorator]
    @property
    def exactly_once(self) -> bool:
        return self.commit == TRANSACTIONAL


class ExternalMember(Answer):
    """A group member the broker reports that this supervisor did not spawn: visible only."""

    client_id: str
    member_id: str
    host: str
    colour: str
    partitions: tuple[int, ...] = ()


class FleetState(Answer):
    """The in-process car simulator."""

    running: bool
    topic: str
    streams: int
    target_rate: float | None = Field(description="messages/s; null: unlimited")
    rate: float = Field(description="measured messages/s")
    delivered: int
    queued: int
    failed: int
    last_error: str | None = None

    @field_validator("target_rate", mode="before")
    @classmethod
    def _unlimited(cls, value: float | None) -> float | None:
        return None if value is None or not math.isfinite(value) else value


class ReplicaAction(Answer):
    """One thing the supervisor did to a replica (spawn, signal, exit), newest last."""

    model_config = ConfigDict(frozen=True, extra="allow")

    ts: float
    replica: str
    action: str
    pid: int | None = None


class ShareStatus(Answer):
    """The share group (KIP-932) whose replicas this supervisor runs beside the consumer
    group, on the same topic: its members take records of the same partitions."""

    group: str
    replicas: tuple[ReplicaInfo, ...] = ()
    group_state: str | None = None
    members: int = Field(0, description="members the broker reports, external ones included")

    @property
    def running(self) -> tuple[ReplicaInfo, ...]:
        return tuple(r for r in self.replicas if r.alive)


# ---- the rebalance lab, as the supervisor runs it for the Lab page ------------------------

LabName = Literal[tuple(LAB_PROTOCOLS)]  # type: ignore[valid-type]
LabEvent = Literal[tuple(LAB_EVENTS)]  # type: ignore[valid-type]
MAX_LAB_REPLICAS = 4  # a group's replicas at the start: four groups of them share a laptop
MAX_LAB_PARTITIONS = 60  # the page's lanes stay one line each up to here
LAB_PHASES = ("starting", "warming", "baseline", "ready", "measuring")


class LabLane(Answer):
    """One partition of one lab group, as the page draws it."""

    partition: int
    owner: str | None = Field(description="the replica that processed its latest batch")
    idle: bool = Field(description="nothing processed within the group's stall limit, or "
                                   "its replica is gone")


class LabGroup(Answer):
    lab: LabName
    group: str
    replicas: tuple[str, ...] = Field(description="running replicas")
    lanes: tuple[LabLane, ...]
    stopwatch_s: float | None = Field(
        None, description="from the event until every partition processes again (running "
                          "while it does not; the measured figure once the event is over)")
    over: bool = Field(False, description="every partition processes again since the event")
    score: Score | None = None


class LabState(Answer):
    """The lab the supervisor runs: in `Status.lab`, and what its calls answer with."""

    name: str
    topic: str
    phase: Literal[LAB_PHASES]  # type: ignore[valid-type]
    partitions: int
    rate: float
    event: LabEvent | None = Field(None, description="the event applied last")
    since_event_s: float | None = None
    window_s: float | None = Field(None, description="how long the last event was measured")
    groups: tuple[LabGroup, ...]
    notes: tuple[str, ...] = ()
    error: str | None = Field(None, description="why the lab cannot go on, in one line")
    busy_cores: float | None = Field(None, description="the machine's cores busy lately")
    cores: int | None = None


class LabStartRequest(Request):
    protocols: list[LabName] = Field(
        min_length=1, max_length=MAX_LAB_GROUPS,
        description=f"the groups, one protocol each (the page offers {DEFAULT_LAB_PROTOCOLS})")
    replicas: Annotated[StrictInt, Field(ge=1, le=MAX_LAB_REPLICAS)] = 2
    partitions: Annotated[StrictInt, Field(ge=1, le=MAX_LAB_PARTITIONS)] = 6

    @field_validator("protocols")
    @classmethod
    def _each_once(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("name each protocol once")
        return value


class LabEventRequest(Request):
    event: LabEvent


class Status(Answer):
    """Everything `GET /status` returns."""

    group: str
    topic: str
    partitions: int | None
    options: ReplicaOptions
    replicas: tuple[ReplicaInfo, ...]
    external: tuple[ExternalMember, ...]
    group_state: str | None
    fleet: FleetState | None
    max_replicas: int
    broker_error: str | None = None
    recent: tuple[ReplicaAction, ...] = ()
    share: ShareStatus | None = None
    lab: LabState | None = None

    @property
    def running(self) -> tuple[ReplicaInfo, ...]:
        return tuple(r for r in self.replicas if r.alive)


class MovedStream(Answer):
    stream: str
    was: int
    now: int


class PartitionChange(Answer):
    """Result of adding partitions: which streams now hash to a different partition."""

    topic: str
    before: int
    after: int
    moved: tuple[MovedStream, ...]
    streams_checked: int


# ---- requests ---------------------------------------------------------------------------

class NoFields(Request):
    """The body of an action that takes no arguments: empty, `{}`, or refused."""


class ScaleRequest(Request):
    replicas: Annotated[StrictInt, Field(ge=0, le=MAX_REPLICAS)]


class OptionsFields(Request):
    """What every `POST /options` body may carry; a field left out (or null) keeps what new
    replicas join with now. The branches below narrow `protocol` and `assignor`."""

    protocol: str | None = None
    assignor: str | None = None
    exactly_once: StrictBool | None = Field(None, description="true: commit transactional; "
                                                              "false: after-summary")
    commit: CommitMode | None = None
    static: StrictBool | None = None

    @model_validator(mode="after")
    def _one_commit_mode(self) -> OptionsFields:
        resolve_commit(self.commit, self.exactly_once)
        return self

    @property
    def commit_mode(self) -> str | None:
        """The commit mode the body asks for, None to keep the one in force."""
        return resolve_commit(self.commit, self.exactly_once)


class ProtocolOptions(OptionsFields):
    """The base of a body that names its protocol: one such model per protocol of
    PROTOCOL_ASSIGNORS (OPTIONS_FOR_PROTOCOL), each listing only that protocol's assignors."""

    protocol: str

    @model_validator(mode="before")
    @classmethod
    def _choice_works(cls, data: Any) -> Any:
        """Refuse a pair with resolve_assignor's line, which says what to choose instead,
        before the schema's bare "Input should be ..." does."""
        if isinstance(data, dict) and isinstance(data.get("protocol"), str) \
                and isinstance(data.get("assignor"), str):
            resolve_assignor(data["protocol"], data["assignor"])
        return data


def _options_for(protocol: str, assignors: tuple[str, ...]) -> type[ProtocolOptions]:
    """The body that switches to `protocol`: its assignor is one of `assignors` or left out
    (the first, the protocol's default)."""
    return create_model(
        f"{protocol.title()}Options", __base__=ProtocolOptions,
        __doc__=f"New replicas join with the {protocol} protocol and one of its assignors; "
                f"without one, {assignors[0]}.",
        protocol=(Literal[protocol], ...),  # type: ignore[valid-type]
        assignor=(Literal[assignors] | None, None))  # type: ignore[valid-type]


OPTIONS_FOR_PROTOCOL: dict[str, type[ProtocolOptions]] = {
    protocol: _options_for(protocol, assignors)
    for protocol, assignors in PROTOCOL_ASSIGNORS.items()}


class KeepProtocolOptions(OptionsFields):
    """New replicas keep the protocol in force (GET /status: options.protocol). Which
    assignors work depends on that protocol, so the server checks an assignor given here
    against it and refuses (422) one it does not take; a body that names its protocol has
    that rule in its schema."""

    protocol: None = None
    assignor: Assignor | None = None


NAMES_PROTOCOL = "names its protocol"
KEEPS_PROTOCOL = "keeps the protocol in force"


def _names_protocol(body: Any) -> str:
    """The branch a body is checked against: one that names a protocol, or one that keeps the
    protocol in force (protocol left out or null, as before the protocols had branches)."""
    protocol = body.get("protocol") if isinstance(body, dict) \
        else getattr(body, "protocol", None)
    return KEEPS_PROTOCOL if protocol is None else NAMES_PROTOCOL


# discriminated on `protocol`, so the assignors a protocol takes are in /openapi.json
ProtocolChoice = Annotated[Union[tuple(OPTIONS_FOR_PROTOCOL.values())],  # noqa: UP007
                          Field(discriminator="protocol")]
# The body of `POST /options`: any subset of the fields; a protocol switch without an
# assignor takes that protocol's default.
OptionsRequest = Annotated[
    Annotated[ProtocolChoice, Tag(NAMES_PROTOCOL)]
    | Annotated[KeepProtocolOptions, Tag(KEEPS_PROTOCOL)],
    Discriminator(_names_protocol)]
# What a validation error's location holds for the branch of a union it was checked
# against: not a field of the body
UNION_BRANCHES: frozenset[str] = frozenset(
    {NAMES_PROTOCOL, KEEPS_PROTOCOL, *PROTOCOL_ASSIGNORS})


def options_request(protocol: str | None = None, assignor: str | None = None,
                    exactly_once: bool | None = None, static: bool | None = None,
                    commit: str | None = None) -> OptionsFields:
    """The `POST /options` body for these choices, built unchecked: the server's refusal is
    the one message a caller sees for a choice that cannot work."""
    model = OPTIONS_FOR_PROTOCOL.get(protocol, ProtocolOptions) if protocol is not None \
        else KeepProtocolOptions
    return model.model_construct(protocol=protocol, assignor=assignor,
                                 exactly_once=exactly_once, static=static, commit=commit)


# ---- replay: the demo's offsets reset (the supervisor moves its group's offsets) ---------

REPLAY_TARGETS = ("earliest", "latest", "datetime", "offset", "shift")
ReplayTarget = Literal[REPLAY_TARGETS]  # type: ignore[valid-type]
REPLAY_BY_CHARS = 60  # who asked, as the event feed names them
# a replay stops the replicas (their stop grace), waits for Empty, writes, reads back
REPLAY_TIMEOUT_S = 120.0


class ReplayRequest(Request):
    """Where to send the group's committed offsets: one target, for every partition of the
    topic or for `partitions`. The preview and the replay take the same body."""

    to: ReplayTarget
    at: str | None = Field(None, max_length=64, description="datetime: ISO 8601, or "
                                                             "'10m ago'")
    offset: StrictInt | None = Field(None, description="offset: the offset; shift: how far "
                                                       "(negative goes back)")
    partitions: list[Annotated[StrictInt, Field(ge=0, lt=MAX_PARTITIONS)]] | None = Field(
        None, max_length=MAX_PARTITIONS, description="null: every partition")
    by: str = Field("ctl", min_length=1, max_length=REPLAY_BY_CHARS,
                    description="who asks, for the event feed")

    @model_validator(mode="after")
    def _value_for_target(self) -> ReplayRequest:
        if self.to == "datetime" and not self.at:
            raise ValueError("to datetime needs `at` (ISO 8601, or '10m ago')")
        if self.to in ("offset", "shift") and self.offset is None:
            raise ValueError(f"to {self.to} needs `offset`")
        return self


class OffsetMove(Answer):
    """One partition of a replay: its committed and new offset, and what lies between."""

    partition: int
    committed: int | None
    new: int | None
    log_start: int
    log_end: int
    replays: int
    skips: int
    note: str = ""


class CarMove(Answer):
    """One stream (car) of a replay: the records of it the move replays or skips."""

    car: str
    partition: int
    replays: int
    skips: int


class ReplayPreview(Answer):
    """What a replay does, from the broker: per partition and per car."""

    group: str
    topic: str
    target: str = Field(description="where the offsets go, in words")
    pinned_at: str | None = Field(None, description="a relative time as the instant it was "
                                                    "read as, to send for the same replay")
    group_state: str
    partitions: list[OffsetMove]
    cars: list[CarMove]
    cars_complete: bool = Field(True, description="false: more records than one preview "
                                                  "reads; the cars' counts cover the first")
    replays: int
    skips: int


class ReplayAnswer(Answer):
    """A replay applied: its plan as applied, the replicas stopped and started again, and
    whether every committed offset read back as planned."""

    applied: ReplayPreview
    stopped: list[str]
    started: list[str]
    refused: list[str] = Field(default_factory=list, description="partitions the broker "
                                                                 "refused, with why")
    read_back_matches: bool


class RateRequest(Request):
    rate: Rate


class CapacityRequest(Request):
    """Messages/s each replica takes at most, or null for no cap. The field is required, so
    an empty body is refused rather than read as "off"."""

    max_rate: Rate | None


class StreamsRequest(Request):
    streams: Annotated[StrictInt, Field(ge=1, le=MAX_STREAMS)]


class PartitionsRequest(Request):
    partitions: Annotated[StrictInt, Field(ge=1, le=MAX_PARTITIONS)]


# ---- responses --------------------------------------------------------------------------

class Done(Answer):
    ok: Literal[True] = True


class ReplicaAnswer(Done):
    replica: ReplicaInfo


class ScaleAnswer(Done):
    started: tuple[str, ...] = ()
    stopping: tuple[str, ...] = ()


class OptionsAnswer(Done):
    options: ReplicaOptions


class CapacityAnswer(Done):
    """The options now in force, and the running replicas restarted to take the new cap."""

    options: ReplicaOptions
    restarting: tuple[str, ...] = ()


class FleetAnswer(Done):
    fleet: FleetState


class PartitionsAnswer(Done, PartitionChange):
    pass


class LabAnswer(Done):
    lab: LabState


class BrokerNode(Answer):
    """One Kafka node of the embedded cluster the stack runs: what `GET /brokers` lists and
    what a kill, stop or start of it answers with."""

    id: int
    port: int
    controller_port: int | None = Field(description="None for a node that is a broker only")
    pid: int | None
    alive: bool
    controller: bool = Field(description="a voter of the KRaft controller quorum")


class BrokersAnswer(Done):
    brokers: tuple[BrokerNode, ...]
    quorum_leader: int | None = Field(
        default=None, description="the controller quorum's leader, when the voters say")


class BrokerAnswer(Done):
    broker: BrokerNode


BROKER_ACTIONS = ("kill", "stop", "start")
NODE_REQUEST_TIMEOUT_S = 60.0  # the longest a node's kill, stop or start may take


class Refusal(Answer):
    """Every 4xx/5xx body: one line that says what to fix; nothing was changed."""

    error: str

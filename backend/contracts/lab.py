"""The rebalance lab's words: the protocols it compares, the events it applies, its scoreboard.

`groupscope lab` (and a page later) runs several groups on one topic, one protocol each, and
applies one event to all of them at the same instant. What each contender is, what it teaches
and how an event is named are written here once; the runner, its report and any page derive
from them.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.contracts import CLASSIC, CONSUMER, SHARE


@dataclass(frozen=True)
class LabProtocol:
    """One contender: how its replicas join, and the lesson a card tells next to its numbers."""

    name: str
    title: str
    protocol: str
    assignor: str
    static: bool
    does: str  # what happens in a rebalance
    choose: str  # when to choose it


LAB_PROTOCOLS: dict[str, LabProtocol] = {p.name: p for p in (
    LabProtocol(
        "eager", "classic + range (eager)", CLASSIC, "range", False,
        does="every member gives up every partition, the group waits at one barrier, then "
             "the leader hands them all out again: the whole group stops",
        choose="clients that cannot do better (older clients), or a group so small a full "
               "stop does not matter"),
    LabProtocol(
        "cooperative", "classic + cooperative-sticky (KIP-429)", CLASSIC,
        "cooperative-sticky", False,
        does="members keep what stays theirs; only the partitions that move are revoked, in "
             "a second round: the others go on processing",
        choose="a classic group whose clients all support it, when you cannot move the "
               "cluster to the consumer protocol yet"),
    LabProtocol(
        "consumer", "consumer protocol (KIP-848)", CONSUMER, "uniform", False,
        does="the broker computes the assignment and each member reconciles on its own "
             "heartbeat: no group-wide barrier, only moved partitions pause",
        choose="Kafka 4.0 or later with clients that speak it: the default for new groups"),
    LabProtocol(
        "static", "classic + range, static members (KIP-345)", CLASSIC, "range", True,
        does="a member with a group.instance.id that comes back within its session timeout "
             "takes its partitions back with no rebalance; one that crashed holds them until "
             "the session expires",
        choose="rolling restarts and deploys of members that come back quickly, with a "
               "session timeout longer than a restart"),
    LabProtocol(
        "share", "share group (KIP-932)", SHARE, "", False,
        does="no partition is owned: every member takes records of every partition and "
             "acknowledges each one, so there is no rebalance to wait for; a dead member's "
             "records come back to the others after their lock time (hand-offs between "
             "batches are its normal, not a cost)",
        choose="work queues where order per key does not matter and the work must spread "
               "past the partition count (Kafka 4.1 or later)"),
)}
DEFAULT_LAB_PROTOCOLS: tuple[str, ...] = ("eager", "cooperative", "consumer", "static")
MAX_LAB_GROUPS = 4  # the groups one lab runs at once: four sets of replicas on a laptop

KILL, STOP, ADD, BOUNCE, PARTITIONS = "kill", "stop", "add", "bounce", "partitions"
LAB_EVENTS: dict[str, str] = {
    KILL: "SIGKILL one replica of each group (a crash)",
    STOP: "stop one replica of each group gracefully (it leaves the group)",
    ADD: "start one more replica in each group",
    BOUNCE: "restart every replica of each group, one after the other (a rolling deploy)",
    PARTITIONS: "add partitions to the topic every group reads",
}

STALL_FACTOR = 2.0  # silent this many times the usual longest gap can be a stall (STALL_RULE)
STALL_RULE = (
    "Each batch a replica processes writes its partition's summaries, stamped with the batch's "
    "time and the replica's name; before the event they give the group's normal cadence (the "
    "median time between a partition's batches) and its longest usual gap (the 95th "
    "percentile). A partition stalls when its processing was stopped (its replica gave it up "
    "in a rebalance, lost it, or was killed or stopped: the partition is counted as stopped) "
    "or when it went more than "
    f"{STALL_FACTOR:g} longest usual gaps without a batch (unless its "
    "own replica, silent on all its partitions meanwhile, simply took longer: that is the "
    "machine, not the protocol); the stall is how much longer than "
    "the normal cadence it then waited for its next batch. The stopwatch runs from the event "
    "until the last stalled partition processes again.")


@dataclass(frozen=True)
class Score:
    """One group's scoreboard for one event, measured from the records its replicas processed."""

    lab: str  # a LAB_PROTOCOLS name
    partitions: int  # partitions measured (those with writes before the event)
    cadence_s: float  # the group's normal (median) time between two batches of a partition
    stopped: int  # partitions whose processing was stopped (given up, lost, its replica hit)
    stalled: int  # partitions that stalled
    stalled_s: float  # partition-seconds stalled
    longest_s: float  # the longest single stall
    # event → the last stalled partition processing again; 0: none stalled; None: one was
    # still stalled when the measurement ended
    recovered_s: float | None
    moved: int  # hand-offs: a partition's batch processed by another replica than its last
    twice: int  # records processed a second time (the summaries' duplicate counts grew)
    stopped_partitions: tuple[int, ...] = ()
    stalled_partitions: tuple[int, ...] = ()
    # kill / stop: the partitions the replica it hit processed last before the event
    victim_partitions: tuple[int, ...] = ()

"""Group membership: protocol/assignor choice, consumer config, and the rebalance callbacks.

Eager assignors (range, roundrobin) hand over the whole assignment on every rebalance:
`assign()` / `unassign()`. Cooperative-sticky and the KIP-848 `consumer` protocol are
incremental: callbacks carry only the added or removed partitions and must be answered with
`incremental_assign()` / `incremental_unassign()`. Which one is in force follows from the
protocol/assignor choice (GroupChoice.incremental), so the same handlers serve every combination.

Static membership (KIP-345, `group.instance.id`) works with both protocols in librdkafka 2.12+
(its KIP-848 support includes it): a static member that closes does not leave the group, so
the same instance coming back within the session timeout takes its partitions back without
a rebalance. The other side of it: a static member that stops for good, or crashes, keeps its
partitions unconsumed until the session times out.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition

from backend.contracts import CLASSIC, CONSUMER
from backend.contracts.control import (
    DEFAULT_ASSIGNOR,
    DEFAULT_PROTOCOL,
    GroupChoiceError,
    resolve_assignor,
)
from backend.fleet.pacing import TokenBucket, burst_for

log = logging.getLogger("groupscope.replica")

SESSION_TIMEOUT_MS = 6000  # classic, dynamic: a crashed replica is noticed in seconds
# classic, static: long enough for a graceful restart (a new Python process and a Spark
# session) to come back before the broker gives the partitions away. Under KIP-848 the broker
# owns the session timeout (group.consumer.session.timeout.ms) and the client cannot ask.
STATIC_SESSION_TIMEOUT_MS = 30_000


class MembershipConfigError(ValueError):
    """A protocol/assignor combination the client would reject."""


@dataclass(frozen=True)
class GroupChoice:
    protocol: str = DEFAULT_PROTOCOL
    assignor: str = DEFAULT_ASSIGNOR

    @classmethod
    def parse(cls, protocol: str, assignor: str | None) -> GroupChoice:
        """The choice, with the protocol's default assignor; the table is the contract's."""
        try:
            return cls(protocol, resolve_assignor(protocol, assignor))
        except GroupChoiceError as exc:
            raise MembershipConfigError(str(exc)) from None

    @property
    def incremental(self) -> bool:
        return self.protocol == CONSUMER or self.assignor == "cooperative-sticky"

    def consumer_properties(self, instance: str | None = None) -> dict[str, object]:
        """librdkafka settings for this choice; `instance` makes the member static (its
        `group.instance.id`: the replica's name, unique in the group)."""
        static: dict[str, object] = {"group.instance.id": instance} if instance else {}
        if self.protocol == CONSUMER:
            # session and heartbeat are owned by the broker under KIP-848
            return {"group.protocol": CONSUMER, "group.remote.assignor": self.assignor,
                    **static}
        return {"group.protocol": CLASSIC, "partition.assignment.strategy": self.assignor,
                "session.timeout.ms": STATIC_SESSION_TIMEOUT_MS if instance
                else SESSION_TIMEOUT_MS,
                # a 500 ms heartbeat tells survivors of a rebalance half a second sooner
                "heartbeat.interval.ms": 500, **static}


PartitionsHook = Callable[[list[int]], None]


class Rebalancer:
    """Adapts confluent-kafka's on_assign/on_revoke/on_lost to partition-number hooks.

    Hooks run *inside* the callback, i.e. before the client acts on the change: state is
    restored before the first record of a new partition is fetched, and a revoked partition's
    pending batch is flushed and committed before another member can take it.
    """

    def __init__(self, topic: str, incremental: bool, on_assigned: PartitionsHook,
                 on_revoked: PartitionsHook, on_lost: PartitionsHook,
                 after_assign: PartitionsHook | None = None) -> None:
        self.topic = topic
        self.incremental = incremental
        self._assigned = on_assigned
        self._revoked = on_revoked
        self._lost = on_lost
        self._after_assign = after_assign  # pause/resume need the partitions assigned first
        self.owned: set[int] = set()

    def _ours(self, partitions: list[TopicPartition]) -> list[int]:
        return sorted(tp.partition for tp in partitions if tp.topic == self.topic)

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        incremental = self.incremental
        added = [p for p in self._ours(partitions) if incremental or p not in self.owned]
        if not incremental:
            # eager: the list is the full assignment; anything else we held is gone
            gone = sorted(self.owned - set(self._ours(partitions)))
            if gone:
                self._revoked(gone)
                self.owned -= set(gone)
        try:
            self._assigned(added)
        finally:
            self.owned |= set(added)
            if incremental:
                consumer.incremental_assign(partitions)
            else:
                consumer.assign(partitions)
        if self._after_assign is not None:
            self._after_assign(added)

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._give_up(consumer, partitions, self._revoked)

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._give_up(consumer, partitions, self._lost)

    def _give_up(self, consumer: Consumer, partitions: list[TopicPartition],
                 hook: PartitionsHook) -> None:
        """Revoked and lost differ only in the hook (commit first, or drop the work)."""
        parts = [p for p in self._ours(partitions) if p in self.owned]
        try:
            if parts:
                hook(parts)
        finally:
            self.owned -= set(parts)
            if self.incremental:
                if partitions:
                    consumer.incremental_unassign(partitions)
            else:
                consumer.unassign()


class PauseBook:
    """Which partitions this member has paused, so that pause and resume are each called only
    where they change something.

    Two reasons hold the assignment paused: backing off after a failed batch, and waiting for
    a very low rate cap's next token (throttled, see RateGate). A partition is paused while
    either holds and resumed only when neither does, so the end of a throttle never resumes a
    member that is backing off.

    librdkafka keeps a partition's pause across a rebalance that hands it back (its issue
    #1849), so a partition paused while backing off and then lost (broker restart: session
    expired) returns paused; it must be resumed after its new `assign()`. A needless resume is
    not harmless either: right after `assign()` it can race the committed-offset lookup and
    leave the partition without a fetch position, so healthy assignments are never touched.
    """

    BACKOFF = "backoff"
    THROTTLE = "throttle"

    def __init__(self) -> None:
        self.holds: set[str] = set()
        self.paused: set[int] = set()

    @property
    def backing_off(self) -> bool:
        return self.BACKOFF in self.holds

    @property
    def throttled(self) -> bool:
        return self.THROTTLE in self.holds

    def _hold(self, reason: str, assigned: Iterable[int]) -> list[int]:
        self.holds.add(reason)
        fresh = sorted(set(assigned) - self.paused)
        self.paused |= set(fresh)
        return fresh

    def _release(self, reason: str, assigned: Iterable[int]) -> list[int]:
        self.holds.discard(reason)
        if self.holds:
            return []
        mine = sorted(self.paused & set(assigned))
        self.paused -= set(mine)
        return mine

    def failed(self, assigned: Iterable[int]) -> list[int]:
        """A batch failed: the partitions to pause now (none if already backing off)."""
        if self.backing_off:
            return []
        return self._hold(self.BACKOFF, assigned)

    def recovered(self, assigned: Iterable[int]) -> list[int]:
        """A batch persisted again: the assigned partitions to resume."""
        return self._release(self.BACKOFF, assigned)

    def throttle(self, assigned: Iterable[int]) -> list[int]:
        """A low rate cap has no token now: the partitions to pause."""
        return self._hold(self.THROTTLE, assigned)

    def unthrottle(self, assigned: Iterable[int]) -> list[int]:
        """A token came: the partitions to resume (none while backing off)."""
        return self._release(self.THROTTLE, assigned)

    def assigned(self, partitions: Iterable[int]) -> tuple[list[int], list[int]]:
        """Just assigned (after `assign()`): (to pause, to resume)."""
        parts = set(partitions)
        if self.holds:
            fresh = sorted(parts - self.paused)
            self.paused |= set(fresh)
            return fresh, []
        stale = sorted(parts & self.paused)
        self.paused -= set(stale)
        return [], stale


class RateGate:
    """A replica's capacity: at most `rate` records per second on average, taken from the
    project's token bucket (backend/fleet/pacing.py), so a stall is caught up to at most a
    quarter of a second's worth and never released as a spike.

    The loop asks `allowance()` before each consume and takes at most that many records. At 0
    the gate closes and opens again once half a burst has accrued, so records are taken a
    handful at a time rather than one per wake-up. While it is closed the loop waits
    `until_open()` without consuming: an eighth of a second for caps from 8 msg/s up, which
    no part of the group notices. Only below QUIET_WAIT_S's worth (caps under 2 msg/s) does it
    pause the assignment and keep polling instead, so it still answers rebalances: pausing
    is the slower way, since librdkafka takes about a second to fetch again after a resume,
    which would cut a 50 msg/s cap to a quarter if used for every wait.

    Records beyond the cap wait in Kafka (as lag), not in this process: `consumer_properties`
    keeps librdkafka's prefetch to a couple of seconds' worth per partition.
    """

    QUIET_WAIT_S = 0.5  # longer waits for a token pause the assignment and keep polling
    PREFETCH_S = 2.0  # seconds of the cap librdkafka may hold per partition (refetch: 1 s)

    def __init__(self, rate: float | None) -> None:
        # starts with a full burst: a replica that just joined is not paused at once
        self._bucket = TokenBucket(rate, tokens=burst_for(rate)) if rate is not None \
            else None
        self._reopen = max(1, int(burst_for(rate) / 2)) if rate is not None else 0
        self.closed = False
        self.closures = 0  # times it closed: the replica had more to take than its cap

    def allowance(self, now: float) -> int | None:
        """Records that may be taken now (None: no cap), updating open/closed."""
        bucket = self._bucket
        if bucket is None:
            return None
        bucket.wait(now)  # settles the tokens earned up to now
        whole = int(bucket.tokens + 1e-9)  # a token earned but for float rounding counts
        if self.closed and whole >= self._reopen:
            self.closed = False
        elif not self.closed and whole < 1:
            self.closed = True
            self.closures += 1
        return 0 if self.closed else whole

    def consumer_properties(self) -> dict[str, object]:
        """librdkafka settings for the cap: a prefetch bounded to PREFETCH_S of it per
        partition instead of 100 000 records (librdkafka's default)."""
        if self._bucket is None:
            return {}
        return {"queued.min.messages": max(10, math.ceil(self._bucket.rate * self.PREFETCH_S))}

    def quiet(self, now: float) -> bool:
        """Closed, and open again soon enough to simply wait without polling."""
        return self.closed and self.until_open(now) <= self.QUIET_WAIT_S

    def until_open(self, now: float) -> float:
        """Seconds until a closed gate reopens (0 when open): how long a paused poll may wait,
        so that a low cap, whose burst is a token or two, wakes on time and loses nothing."""
        bucket = self._bucket
        if bucket is None or not self.closed:
            return 0.0
        bucket.wait(now)
        return max(0.001, (self._reopen - bucket.tokens) / bucket.rate)  # no busy wait

    def took(self, now: float, n: int) -> None:
        """`n` records were taken; one that arrived beyond the allowance is a debt repaid
        from the next tokens, so the average stays at the cap."""
        bucket = self._bucket
        if bucket is None or n <= 0:
            return
        taken = bucket.take(now, n)  # first: it settles and spends what there is
        bucket.tokens -= n - taken

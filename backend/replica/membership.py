"""Group membership: protocol/assignor choice, consumer config, and the rebalance callbacks.

Eager assignors (range, roundrobin) hand over the whole assignment on every rebalance:
`assign()` / `unassign()`. Cooperative-sticky and the KIP-848 `consumer` protocol are
incremental: callbacks carry only the added or removed partitions and must be answered with
`incremental_assign()` / `incremental_unassign()`. Which one is in force follows from the
protocol/assignor choice (GroupChoice.incremental), so the same handlers serve every combination.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition

from backend.contracts.control import (
    DEFAULT_ASSIGNOR,
    DEFAULT_PROTOCOL,
    GroupChoiceError,
    resolve_assignor,
)

log = logging.getLogger("groupscope.replica")

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
        return self.protocol == "consumer" or self.assignor == "cooperative-sticky"

    def consumer_properties(self) -> dict[str, object]:
        if self.protocol == "consumer":
            # session and heartbeat are owned by the broker under KIP-848
            return {"group.protocol": "consumer", "group.remote.assignor": self.assignor}
        return {"group.protocol": "classic", "partition.assignment.strategy": self.assignor,
                # a 500 ms heartbeat tells survivors of a rebalance half a second sooner
                "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


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

    librdkafka keeps a partition's pause across a rebalance that hands it back (its issue
    #1849), so a partition paused while backing off and then lost (broker restart: session
    expired) returns paused; it must be resumed after its new `assign()`. A needless resume is
    not harmless either: right after `assign()` it can race the committed-offset lookup and
    leave the partition without a fetch position, so healthy assignments are never touched.
    """

    def __init__(self) -> None:
        self.backing_off = False
        self.paused: set[int] = set()

    def failed(self, assigned: Iterable[int]) -> list[int]:
        """A batch failed: the partitions to pause now (none if already backing off)."""
        if self.backing_off:
            return []
        self.backing_off = True
        fresh = sorted(set(assigned) - self.paused)
        self.paused |= set(fresh)
        return fresh

    def recovered(self, assigned: Iterable[int]) -> list[int]:
        """A batch persisted again: the assigned partitions to resume."""
        self.backing_off = False
        mine = sorted(self.paused & set(assigned))
        self.paused -= set(mine)
        return mine

    def assigned(self, partitions: Iterable[int]) -> tuple[list[int], list[int]]:
        """Just assigned (after `assign()`): (to pause, to resume)."""
        parts = set(partitions)
        if self.backing_off:
            fresh = sorted(parts - self.paused)
            self.paused |= set(fresh)
            return fresh, []
        stale = sorted(parts & self.paused)
        self.paused -= set(stale)
        return [], stale

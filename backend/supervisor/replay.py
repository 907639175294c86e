"""The demo's replay: send the supervisor's group back (or forward) in its topic.

A preview first, computed from the broker the way `groupscope offsets reset` computes it
(backend/offsets: the same plan, so the preview and the change are one computation), with
per car what the move replays or skips (its records read by key, each car's partition by the
murmur2 map). Applying it stops the group's replicas gracefully (Kafka takes offsets from
outside a group only while it is Empty), waits for the group to be Empty, writes the plan
worked out at that moment, reads the offsets back, starts as many replicas as ran before,
and tells the event feed who moved what where. The replicas' summaries then count what is
read again as duplicates: the proof at work.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from backend.cli_common import UserError
from backend.contracts import EventType
from backend.contracts.control import (
    CarMove,
    OffsetMove,
    ReplayAnswer,
    ReplayPreview,
    ReplayRequest,
)
from backend.kafka.javaadmin.reader import KafkaReader
from backend.kafka.partitioner import partition_for
from backend.kafka.settings import KafkaSettings
from backend.kafka.telemetry import Telemetry
from backend.offsets.plan import Plan, Target, TopicSpec, choose_target, format_ms
from backend.offsets.reset import Group, apply, keys_moved, plan_reset_now, read
from backend.pool.processes import PoolError

EMPTY_WITHIN_S = 30.0  # a graceful leave empties the group at once; a static member waits
REPLAY_SENDER = "supervisor"  # the events' sender: the feed names who asked


class ReplayRefused(PoolError):
    """A replay that cannot be done as asked (409); the message says what to change."""


def target_of(req: ReplayRequest, now: datetime | None = None) -> Target:
    """The plan's target for a request, in the offsets command's own rules."""
    try:
        return choose_target(
            req.to if req.to in ("earliest", "latest") else None,
            req.at if req.to == "datetime" else None,
            req.offset if req.to == "offset" else None,
            req.offset if req.to == "shift" else None, now or datetime.now(UTC))
    except UserError as exc:
        raise ReplayRefused(str(exc).replace("--to-datetime", "the time")) from None


def preview_of(plan: Plan, topic: str, state: str, target: Target, partitions: int,
               cars: dict[str, tuple[int, int]], complete: bool) -> ReplayPreview:
    """The answer for a plan; `cars`: car -> (replays, skips)."""
    rows = [OffsetMove(partition=r.partition, committed=r.current, new=r.new,
                       log_start=r.start, log_end=r.end, replays=r.replays, skips=r.skips,
                       note=r.note) for r in plan.rows]
    moves = [CarMove(car=car, partition=partition_for(car, partitions), replays=n, skips=k)
             for car, (n, k) in sorted(cars.items())]
    pinned = format_ms(target.value) if target.kind == "datetime" else None
    t = plan.totals
    return ReplayPreview(group=plan.group, topic=topic, target=plan.target, pinned_at=pinned,
                         group_state=state, partitions=rows, cars=moves,
                         cars_complete=complete, replays=t.replays, skips=t.skips)


class Replayer:
    """Previews and applies replays of one group on one topic (the supervisor's)."""

    def __init__(self, settings: KafkaSettings, group: str, topic: str,
                 reader: KafkaReader) -> None:
        self.settings, self.group, self.topic, self.reader = settings, group, topic, reader

    def _plan(self, req: ReplayRequest) -> tuple[Plan, Group, Target]:
        target = target_of(req)
        spec = TopicSpec(self.topic, tuple(sorted(set(req.partitions)))
                         if req.partitions else None)
        try:
            group = Group(self.reader, self.settings, self.group)
            return plan_reset_now(self.reader, group, target, [spec]), group, target
        except UserError as exc:
            raise ReplayRefused(str(exc)) from None

    def _preview(self, plan: Plan, group: Group, target: Target) -> ReplayPreview:
        keys = keys_moved(self.settings, plan)
        cars = {k: (keys.replays.get(k, 0), keys.skips.get(k, 0))
                for k in set(keys.replays) | set(keys.skips)}
        return preview_of(plan, self.topic, group.state, target, self._partitions(plan),
                          cars, keys.complete)

    def _partitions(self, plan: Plan) -> int:
        """The topic's partition count, for the murmur2 map (the plan's rows if unread)."""
        meta = self.reader.topics([self.topic])[0].get(self.topic)
        return meta.count if meta is not None and meta.count else \
            max((r.partition for r in plan.rows), default=-1) + 1

    def preview(self, req: ReplayRequest) -> ReplayPreview:
        """What the replay would do now; changes nothing."""
        return self._preview(*self._plan(req))

    def apply(self, req: ReplayRequest, running: Callable[[], list[str]],
              scale: Callable[[int], list[str]]) -> ReplayAnswer:
        """Stop the replicas, wait for Empty, write the plan, start them again.

        `running()` names the group's active replicas; `scale(n)` makes n run and names
        those it started. The replicas start again whatever happens after they stopped."""
        _, group, _ = self._plan(req)  # refused before anything stops if it cannot be planned
        stopped = running()
        started: list[str] = []
        try:
            scale(0)
            self._wait_empty(group.type)
            plan, group, target = self._plan(req)
            refused = apply(self.settings, plan)
            read_back = group.committed()
        finally:
            started = scale(len(stopped))
        applied = Plan(plan.group, plan.action, plan.target,
                       tuple(r for r in plan.rows if r.tp not in refused), plan.group_type)
        wrong = [r for r in applied.changed if read_back.get(r.tp) != r.new]
        self._tell(req.by, applied, target)
        return ReplayAnswer(
            applied=preview_of(applied, self.topic, "Empty", target, self._partitions(plan),
                               {}, True),
            stopped=stopped, started=started, read_back_matches=not wrong,
            refused=[f"P{p}: {why}" for (_t, p), why in sorted(refused.items())])

    def _wait_empty(self, group_type: str) -> None:
        """Until Kafka says the group is Empty, asking about this group alone (a describe,
        not the cluster's whole listing) every half second, for EMPTY_WITHIN_S at most."""
        deadline = time.monotonic() + EMPTY_WITHIN_S
        while True:
            try:
                answer = read(f"group {self.group}",
                              lambda: self.reader.describe([self.group], group_type))
            except UserError as exc:
                raise ReplayRefused(f"{exc}; nothing changed") from None
            desc = answer.get(self.group)
            if desc is None or isinstance(desc, str):
                raise ReplayRefused(f"could not describe group {self.group}: "
                                    f"{desc or 'no answer'}; nothing changed")
            if desc.state == "Empty":
                return
            if time.monotonic() >= deadline:
                raise ReplayRefused(
                    f"group {self.group} is still {desc.state} {EMPTY_WITHIN_S:.0f} s after its "
                    "replicas stopped (a member groupscope did not start? stop it first); "
                    "nothing changed")
            time.sleep(0.5)

    def _tell(self, by: str, plan: Plan, target: Target) -> None:
        """One `offsets_reset` event on the group's events topic, for the feed."""
        telemetry = Telemetry(self.settings, self.group, REPLAY_SENDER)
        try:
            telemetry.emit(EventType.OFFSETS_RESET, by=by, target=plan.target,
                           replays=plan.totals.replays, skips=plan.totals.skips,
                           moves=[[r.partition, r.current, r.new] for r in plan.changed])
        finally:
            telemetry.flush()

"""What `groupscope offsets` would change, worked out before anything is changed: pure.

The command reads the cluster, hands this module plain values (committed offsets, each
partition's log start and end, what ListOffsets answered for a time) and prints the plan it
gets back; `--execute` applies exactly that plan's offsets. Keeping the decisions here, with
no I/O, is what lets every rule below be tested with plain numbers, and makes the preview
and the change one and the same thing rather than two computations that could drift.

The rules, which Kafka's own `kafka-consumer-groups --reset-offsets` also follows unless
said otherwise:

* a new offset lies in [log start, log end]: one outside is clamped to the nearer end, and
  the row says so (Kafka's tool prints a warning; a UI that clamps quietly hides that the
  offset asked for no longer exists);
* `--to-datetime T` takes the first record at or after T. A partition with no such record
  (every record is older than T, or it is empty: ListOffsets answers -1) goes to its log
  end, the position a record written at T would get; Kafka's tool does the same with a
  warning. The row says so in words, so nobody mistakes it for a partition that found T;
* `--shift-by N` moves from the committed offset; a partition without one has nothing to
  shift from and is left as it is, said in its row;
* what a change replays (new < committed) or skips (new > committed) is counted over the
  offsets that still exist, [log start, log end): on a compacted or transactional topic that
  is an upper bound on records, since offsets there have gaps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from backend.cli_common import UserError

TP = tuple[str, int]
TargetKind = Literal["earliest", "latest", "datetime", "offset", "shift"]

# "10m ago", "2h ago", "90 s ago", "1 day ago": the relative times people type
_RELATIVE = re.compile(r"^\s*(\d+)\s*([a-z]+)\s+ago\s*$", re.IGNORECASE)
_UNITS = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}
# Kafka's topic names: letters, digits, '.', '_' and '-' (so never ':', the separator here)
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


# ---- what the user asked for ----------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """Where to move each partition: `value` is ms since the epoch (datetime), an offset
    (offset) or a signed distance (shift); `given` is the user's own text for a time, kept so
    the preview shows both what was typed and the instant it was read as."""

    kind: TargetKind
    value: int = 0
    given: str = ""

    def describe(self) -> str:
        if self.kind in ("earliest", "latest"):
            return self.kind
        if self.kind == "offset":
            return f"offset {self.value}"
        if self.kind == "shift":
            return f"the committed offset {self.value:+d}"
        when = format_ms(self.value)
        extra = f" ({self.given})" if self.given and self.given != when else ""
        return f"the first record at or after {when}{extra}"


@dataclass(frozen=True)
class TopicSpec:
    """One `--topic` option: a topic, and its partitions when the user listed some."""

    topic: str
    partitions: tuple[int, ...] | None = None


def choose_target(to: str | None, to_datetime: str | None, to_offset: int | None,
                  shift_by: int | None, now: datetime) -> Target:
    """The one target among the options given; none or several is a one-line error that
    names them, since guessing which one was meant would move offsets nobody asked for."""
    given = [name for name, value in (("--to", to), ("--to-datetime", to_datetime),
                                      ("--to-offset", to_offset), ("--shift-by", shift_by))
             if value is not None]
    if len(given) != 1:
        what = f"got {' and '.join(given)}" if given else "got none"
        raise UserError("give exactly one target: --to earliest, --to latest, "
                        f"--to-datetime T, --to-offset N or --shift-by N ({what})")
    if to is not None:
        if to not in ("earliest", "latest"):
            raise UserError(f"--to takes earliest or latest, not {to!r}")
        return Target("earliest" if to == "earliest" else "latest")
    if to_datetime is not None:
        return Target("datetime", parse_time(to_datetime, now), to_datetime.strip())
    if to_offset is not None:
        if to_offset < 0:
            raise UserError(f"--to-offset must be 0 or more, got {to_offset} "
                            "(use --shift-by for a move relative to the committed offset)")
        return Target("offset", to_offset)
    assert shift_by is not None
    return Target("shift", shift_by)


def parse_time(text: str, now: datetime) -> int:
    """`text` as ms since the epoch: ISO 8601 with or without a zone (none means this
    machine's local time, as Kafka's tool reads it), or "<N><unit> ago" relative to `now`."""
    relative = _RELATIVE.match(text)
    if relative:
        count, unit = int(relative.group(1)), relative.group(2).lower()
        if unit not in _UNITS:
            raise UserError(f"--to-datetime {text!r}: unknown unit {unit!r} "
                            "(use s, m, h, d or w, e.g. '10m ago')")
        try:
            return int((now - timedelta(seconds=count * _UNITS[unit])).timestamp() * 1000)
        except (OverflowError, ValueError):
            raise UserError(f"--to-datetime {text!r}: too far back") from None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UserError(f"--to-datetime {text!r} is neither ISO 8601 "
                        "(2026-05-01T09:30:00, optionally with Z or +02:00) "
                        "nor a relative time like '10m ago'") from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as the user's clock shows it
    return int(when.timestamp() * 1000)


def format_ms(ms: int) -> str:
    """An instant as ISO 8601 in UTC, to the millisecond only when it has some."""
    when = datetime.fromtimestamp(ms / 1000, tz=UTC)
    text = when.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")
    return text.replace("+00:00", "Z")


def parse_topic_spec(text: str) -> TopicSpec:
    """`--topic T` or `--topic T:0,2,5`."""
    topic, sep, parts = text.strip().partition(":")
    if not _TOPIC.match(topic):
        raise UserError(f"--topic {text!r}: not a topic name (give T or T:0,2,5)")
    if not sep:
        return TopicSpec(topic)
    try:
        numbers = tuple(sorted({int(p) for p in parts.split(",") if p.strip()}))
    except ValueError:
        raise UserError(f"--topic {text!r}: partitions are numbers separated by commas, "
                        "e.g. orders:0,2,5") from None
    if not numbers or min(numbers) < 0:
        raise UserError(f"--topic {text!r}: list one or more partitions from 0, "
                        "e.g. orders:0,2,5")
    return TopicSpec(topic, numbers)


def merge_specs(specs: list[TopicSpec]) -> list[TopicSpec]:
    """One spec per topic: a topic named both whole and with partitions is whole."""
    merged: dict[str, tuple[int, ...] | None] = {}
    for spec in specs:
        if spec.topic in merged:
            before = merged[spec.topic]
            merged[spec.topic] = (None if before is None or spec.partitions is None
                                  else tuple(sorted({*before, *spec.partitions})))
        else:
            merged[spec.topic] = spec.partitions
    return [TopicSpec(t, p) for t, p in sorted(merged.items())]


def select_partitions(group: str, committed: dict[TP, int], specs: list[TopicSpec],
                      partition_counts: dict[str, int], every_partition: bool = True
                      ) -> list[TP]:
    """The partitions a command acts on. No `--topic`: every partition the group has
    committed offsets for. `--topic T`: every partition of T (`every_partition`; a reset
    covers partitions the group has not committed yet, as Kafka's tool does), or only those
    it committed (a delete: there is nothing to delete elsewhere). `--topic T:0,2`: those.

    `partition_counts` holds the named topics that exist. A topic the group has no
    committed offset for is refused: resetting it would start the group reading a topic it
    never read, which is rarely what a typo meant."""
    if not specs:
        return sorted(committed)
    read = sorted({t for t, _ in committed})
    chosen: set[TP] = set()
    for spec in specs:
        if spec.topic not in partition_counts:
            raise UserError(f"topic {spec.topic} does not exist (or may not be described)")
        if spec.topic not in read:
            has = f"it has for {', '.join(read)}" if read else "it has none"
            raise UserError(f"group {group} has no committed offsets for topic {spec.topic} "
                            f"({has})")
        count = partition_counts[spec.topic]
        if spec.partitions is None:
            whole = range(count) if every_partition else \
                sorted(p for t, p in committed if t == spec.topic)
            chosen.update((spec.topic, p) for p in whole)
            continue
        missing = [p for p in spec.partitions if p >= count]
        if missing:
            raise UserError(f"topic {spec.topic} has partitions 0-{count - 1}, "
                            f"not {', '.join(map(str, missing))}")
        chosen.update((spec.topic, p) for p in spec.partitions)
    return sorted(chosen)


# ---- the plan --------------------------------------------------------------------------

@dataclass(frozen=True)
class Extent:
    """A partition's log as ListOffsets reports it: offsets start..end-1 exist."""

    start: int
    end: int


@dataclass(frozen=True)
class Row:
    """One partition of the plan. `new` None: its committed offset is deleted (delete), or
    left alone (a shift with nothing to shift from: `current` is None too)."""

    topic: str
    partition: int
    current: int | None
    new: int | None
    start: int
    end: int
    replays: int = 0
    skips: int = 0
    note: str = ""

    @property
    def tp(self) -> TP:
        return self.topic, self.partition

    @property
    def changes(self) -> bool:
        return self.new != self.current


@dataclass(frozen=True)
class Totals:
    partitions: int
    topics: int
    changes: int
    replays: int
    skips: int
    noted: int  # rows with a note: clamped, no record at T, nothing to shift, ...


@dataclass(frozen=True)
class Plan:
    group: str
    action: Literal["reset", "delete"]
    target: str  # what the offsets move to, in words
    rows: tuple[Row, ...] = field(default_factory=tuple)
    group_type: str = "consumer"  # a share group's "committed" is its start offset

    @property
    def changed(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.changes)

    @property
    def totals(self) -> Totals:
        return Totals(partitions=len(self.rows), topics=len({r.topic for r in self.rows}),
                      changes=len(self.changed), replays=sum(r.replays for r in self.rows),
                      skips=sum(r.skips for r in self.rows),
                      noted=sum(1 for r in self.rows if r.note))


def moved(current: int | None, new: int | None, extent: Extent) -> tuple[int, int]:
    """(replays, skips) of a move from `current` to `new`, counting only offsets that exist
    in [start, end): a committed offset below the log start skips nothing that is still
    there, one above the end (a topic recreated) replays nothing that was not written."""
    if current is None or new is None or current == new:
        return 0, 0
    low, high = min(current, new), max(current, new)
    span = max(0, min(high, extent.end) - max(low, extent.start))
    return (span, 0) if new < current else (0, span)


def new_offset(target: Target, current: int | None, extent: Extent,
               at_time: int | None = None) -> tuple[int | None, str]:
    """(the offset `target` gives this partition, a note when it was not simply found).
    `at_time` is ListOffsets' answer for a datetime target: -1 or None when no record is at
    or after the time."""
    if target.kind == "earliest":
        return extent.start, ""
    if target.kind == "latest":
        return extent.end, ""
    if target.kind == "datetime":
        if at_time is None or at_time < 0:
            return extent.end, (f"no record at or after {format_ms(target.value)}: "
                                f"set to the log end {extent.end}")
        return _clamped(at_time, extent, str(at_time))
    if target.kind == "offset":
        return _clamped(target.value, extent, str(target.value))
    if current is None:
        return None, "no committed offset to shift from: left as it is"
    wanted = current + target.value
    return _clamped(wanted, extent, f"{current}{target.value:+d} = {wanted}")


def _clamped(wanted: int, extent: Extent, how: str) -> tuple[int, str]:
    if wanted < extent.start:
        return extent.start, f"{how} is before the log start: clamped to {extent.start}"
    if wanted > extent.end:
        return extent.end, f"{how} is past the log end: clamped to {extent.end}"
    return wanted, ""


def _situation(current: int | None, extent: Extent) -> str:
    """Why a row's committed offset deserves a word before anything moves it."""
    if current is None:
        return "no committed offset yet"
    if current < extent.start:
        return f"committed {current} is before the log start (records deleted)"
    if current > extent.end:
        return f"committed {current} is past the log end (topic recreated?)"
    return ""


def plan_reset(group: str, target: Target, tps: list[TP], committed: dict[TP, int],
               extents: dict[TP, Extent], at_time: dict[TP, int] | None = None,
               group_type: str = "consumer") -> Plan:
    """The reset of `tps` to `target`: one row per partition, in topic and partition order."""
    rows = []
    for tp in sorted(tps):
        extent, current = extents[tp], committed.get(tp)
        new, note = new_offset(target, current, extent, (at_time or {}).get(tp))
        replays, skips = moved(current, new, extent)
        notes = [n for n in (_situation(current, extent) if new is not None else "", note) if n]
        rows.append(Row(tp[0], tp[1], current, new, extent.start, extent.end, replays, skips,
                        "; ".join(notes)))
    return Plan(group, "reset", target.describe(), tuple(rows), group_type)


def plan_delete(group: str, tps: list[TP], committed: dict[TP, int],
                extents: dict[TP, Extent]) -> Plan:
    """Deleting the committed offsets of `tps`. What is then replayed or skipped is up to
    the next consumer's auto.offset.reset, which only that consumer knows: each row says
    both outcomes instead of guessing one, and the totals count none."""
    rows = []
    for tp in sorted(tps):
        extent, current = extents[tp], committed.get(tp)
        if current is None:
            continue  # nothing committed, nothing to delete
        replay = max(0, min(current, extent.end) - extent.start)
        skip = max(0, extent.end - max(current, extent.start))
        note = (f"then auto.offset.reset decides: earliest replays {replay}, "
                f"latest skips {skip}")
        rows.append(Row(tp[0], tp[1], current, None, extent.start, extent.end, note=note))
    return Plan(group, "delete", "deleted", tuple(rows))


# ---- what is shown ------------------------------------------------------------------------

def _cell(value: int | None) -> str:
    return "-" if value is None else str(value)


def format_plan(plan: Plan, cluster: str, executing: bool = False) -> str:
    """The preview as a terminal table: one line per partition, totals at the end."""
    mode = "APPLYING" if executing else "PREVIEW (nothing changed)"
    lines = [f"{mode}: {plan.action} the committed offsets of group {plan.group} on {cluster}"]
    if plan.action == "reset":
        lines.append(f"to {plan.target}")
    if plan.group_type == "share":
        lines.append("a share group: COMMITTED is each share-partition's start offset")
    lines.append("")
    width = max([len("TOPIC"), *(len(r.topic) for r in plan.rows)])
    new_head = "NEW" if plan.action == "reset" else "AFTER"
    lines.append(f"{'TOPIC':<{width}} {'P':>4} {'COMMITTED':>12} {new_head:>12} "
                 f"{'LOG START':>12} {'LOG END':>12} {'REPLAYS':>9} {'SKIPS':>9}  NOTE")
    for r in plan.rows:
        deleting = plan.action == "delete"  # the next consumer's setting decides those
        new = "deleted" if deleting else _cell(r.new)
        replays, skips = ("-", "-") if deleting else (r.replays, r.skips)
        lines.append(f"{r.topic:<{width}} {r.partition:>4} {_cell(r.current):>12} {new:>12} "
                     f"{r.start:>12} {r.end:>12} {replays:>9} {skips:>9}  {r.note}"
                     .rstrip())
    lines += ["", summary(plan)]
    return "\n".join(lines)


def summary(plan: Plan, done: bool = False) -> str:
    """The totals in one sentence: of the preview, or (`done`) of the change applied."""
    t = plan.totals
    where = (f"{t.partitions} partition{'s' if t.partitions != 1 else ''} of "
             f"{t.topics} topic{'s' if t.topics != 1 else ''}")
    if plan.action == "delete":
        return (f"{where}: {t.changes} committed offset{'s' if t.changes != 1 else ''} "
                f"{'deleted' if done else 'to delete'}")
    noted = f", {t.noted} with a note" if t.noted else ""
    verbs = ("replayed", "skipped") if done else ("replays", "skips")
    return (f"{where}, {t.changes} {'changed' if done else 'changing'}{noted}: "
            f"{verbs[0]} {t.replays} record{'s' if t.replays != 1 else ''}, "
            f"{verbs[1]} {t.skips}")


def plan_dict(plan: Plan, cluster: str) -> dict[str, Any]:
    """The plan as JSON-ready data (`--json`)."""
    t = plan.totals
    return {
        "group": plan.group,
        "cluster": cluster,
        "group_type": plan.group_type,
        "action": plan.action,
        "target": plan.target,
        "partitions": [
            {"topic": r.topic, "partition": r.partition, "committed": r.current,
             "new": r.new, "log_start": r.start, "log_end": r.end, "replays": r.replays,
             "skips": r.skips, "changes": r.changes, "note": r.note or None}
            for r in plan.rows],
        "totals": {"partitions": t.partitions, "topics": t.topics, "changes": t.changes,
                   "replays": t.replays, "skips": t.skips, "noted": t.noted},
    }


def partition_changes(plan: Plan) -> list[str]:
    """Each partition the plan changes: topic-partition, before → after."""
    return [f"{r.topic}-{r.partition}: {_cell(r.current)} → "
            f"{'deleted' if r.new is None else r.new}" for r in plan.changed]


def change_lines(plan: Plan) -> list[str]:
    """One log line per partition the plan changes: group, topic-partition, before → after."""
    return [f"{plan.action} group {plan.group} {line}" for line in partition_changes(plan)]


def differences(plan: Plan, read_back: dict[TP, int]) -> list[str]:
    """Where the committed offsets read back after applying differ from the plan: one line
    each, empty when the cluster holds exactly what was previewed."""
    out = []
    for r in plan.changed:
        got = read_back.get(r.tp)
        if got != r.new:
            want = "no committed offset" if r.new is None else str(r.new)
            have = "none" if got is None else str(got)
            out.append(f"{r.topic}-{r.partition}: expected {want}, the group has {have}")
    return out

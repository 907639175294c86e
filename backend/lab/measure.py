"""The lab's scoreboard, from the batches each group's replicas processed (pure).

A replica writes one summary per stream for every batch it processes, all stamped with the
batch's time (`Summary.updated_ms`) and the replica's name, to a changelog co-partitioned with
the input, and says on its events topic when it gave partitions up (revoked, lost). So one
group's records say, partition by partition, when a batch was processed, by whom and when the
processing was stopped: a stall is the extra wait after a stop (or a long silence while the
replica went on with its other partitions), a hand-off a batch written by another replica, a
record processed twice a duplicate count that grew.
Nothing is inferred from the group's state or the assignor's name (`contracts.lab.STALL_RULE`).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from backend.contracts.lab import STALL_FACTOR, Score

SILENCE_PERCENTILE = 0.95


@dataclass(frozen=True)
class Processed:
    """One summary write: stream `stream` of `partition` in the batch processed at `t_ms`."""

    t_ms: int
    partition: int
    replica: str
    stream: str
    duplicates: int  # the stream's duplicate count after this batch


@dataclass(frozen=True)
class Stopped:
    """`replica` gave `partition` up at `t_ms` (a revoked or lost event)."""

    t_ms: int
    partition: int
    replica: str


@dataclass(frozen=True)
class Batch:
    t_ms: int
    replica: str


def batches(writes: Iterable[Processed]) -> dict[int, list[Batch]]:
    """Each partition's processed batches in time order (one per batch time and replica)."""
    seen: dict[int, set[tuple[int, str]]] = defaultdict(set)
    for w in writes:
        seen[w.partition].add((w.t_ms, w.replica))
    return {p: [Batch(t, r) for t, r in sorted(keys)] for p, keys in sorted(seen.items())}


def by_replica(by_partition: dict[int, list[Batch]]) -> dict[str, list[tuple[int, int]]]:
    """Each replica's processed batches as (time, partition), in time order."""
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for partition, seq in by_partition.items():
        for b in seq:
            out[b.replica].append((b.t_ms, partition))
    for seq in out.values():
        seq.sort()
    return out


def worked_meanwhile(done: list[tuple[int, int]], partition: int, after_ms: int,
                     before_ms: int) -> bool:
    """Whether a replica (its batches `done`) processed another partition than `partition`
    strictly between the two times: it went on working while this partition waited. A
    replica silent on all its partitions at once was slow (the machine, a catch-up batch),
    which says nothing of the protocol."""
    i = bisect.bisect_right(done, (after_ms, math.inf))
    while i < len(done) and done[i][0] < before_ms:
        if done[i][1] != partition:
            return True
        i += 1
    return False


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile (q in 0..1) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(frozen=True)
class Cadence:
    """A group's normal rhythm before the event: the typical (median) time between two
    batches of a partition, and the silence that is a stall whatever its cause (STALL_FACTOR
    times the 95th percentile, so a slow batch of a busy machine is not one)."""

    typical_ms: float
    silence_ms: float


def cadence(by_partition: dict[int, list[Batch]], from_ms: int, to_ms: int) -> Cadence | None:
    """The cadence of the batches in [from_ms, to_ms]; None without two batches of a
    partition there."""
    gaps = []
    for seq in by_partition.values():
        times = [b.t_ms for b in seq if from_ms <= b.t_ms <= to_ms]
        gaps += [b - a for a, b in itertools.pairwise(times)]
    if not gaps:
        return None
    return Cadence(percentile(gaps, 0.5), STALL_FACTOR * percentile(gaps, SILENCE_PERCENTILE))


def score(lab: str, writes: Iterable[Processed], baseline_from_ms: int, event_ms: int,
          until_ms: int, victim: str | None = None, stops: Iterable[Stopped] = ()) -> Score:
    """The scoreboard of one group for an event at `event_ms`, measured until `until_ms`.

    Measured are the partitions processed before the event; the cadence is taken from the
    batches between `baseline_from_ms` and the event; `victim` is the replica the event hit
    (killed or stopped: its partitions stop at the event), `stops` the replicas' revoked and
    lost partitions. Raises ValueError when there is no cadence (nothing processed before).
    """
    writes = list(writes)
    stop_list = [s for s in stops if event_ms <= s.t_ms <= until_ms]
    by_partition = batches(writes)
    done = by_replica(by_partition)
    rhythm = cadence(by_partition, baseline_from_ms, event_ms)
    if rhythm is None:
        raise ValueError(f"{lab}: no two batches of a partition before the event, so no "
                         "normal cadence to measure a stall against")
    measured = moved = 0
    stalled: list[int] = []
    stopped: list[int] = []
    hit: list[int] = []
    stalled_ms = longest_ms = 0.0
    recovered_ms: float | None = 0.0
    for partition, seq in by_partition.items():
        before = [b for b in seq if b.t_ms <= event_ms]
        if not before:
            continue  # a partition added by the event: nothing to compare with
        measured += 1
        if victim is not None and before[-1].replica == victim:
            hit.append(partition)
        chain = [before[-1]] + [b for b in seq if event_ms < b.t_ms <= until_ms]
        moved += sum(1 for a, b in itertools.pairwise(chain) if a.replica != b.replica)
        ends = [b.t_ms for b in chain[1:]] + [until_ms]  # an open gap lasts until the end
        halted = sorted([(s.t_ms, s.replica) for s in stop_list if s.partition == partition]
                        + ([(event_ms, victim)] if victim is not None else []))
        stalls = []
        halts = 0
        nexts: list[Batch | None] = [*chain[1:], None]
        for start, end, after in zip(chain, ends, nexts, strict=True):
            halt = any(start.t_ms <= t <= end and who == start.replica for t, who in halted)
            halts += halt
            extra = end - start.t_ms - rhythm.typical_ms
            # a long silence is a stall unless the same replica, silent on all its
            # partitions meanwhile, simply took longer
            silent = end - start.t_ms > rhythm.silence_ms and (
                after is None or after.replica != start.replica
                or worked_meanwhile(done[start.replica], partition, start.t_ms, end))
            if extra > 0 and (halt or silent):
                stalls.append((extra, end))
        if halts:
            stopped.append(partition)
        if not stalls:
            continue
        stalled.append(partition)
        stalled_ms += sum(s for s, _ in stalls)
        longest_ms = max(longest_ms, *(s for s, _ in stalls))
        last_end = stalls[-1][1]
        if recovered_ms is not None:
            recovered_ms = None if last_end == until_ms and chain[-1].t_ms < until_ms \
                else max(recovered_ms, last_end - event_ms)
    return Score(lab=lab, partitions=measured, cadence_s=round(rhythm.typical_ms / 1000, 3),
                 stopped=len(stopped), stalled=len(stalled), stalled_s=round(stalled_ms / 1000, 2),
                 longest_s=round(longest_ms / 1000, 2),
                 recovered_s=None if recovered_ms is None else round(recovered_ms / 1000, 2),
                 moved=moved, twice=processed_twice(writes, event_ms, until_ms),
                 stopped_partitions=tuple(stopped), stalled_partitions=tuple(stalled),
                 victim_partitions=tuple(hit))


def processed_twice(writes: Iterable[Processed], event_ms: int, until_ms: int) -> int:
    """Records processed a second time after the event: how much each stream's duplicate
    count grew (a replica that takes a partition over re-reads what was not committed)."""
    before: dict[str, int] = {}
    after: dict[str, int] = {}
    for w in writes:
        if w.t_ms <= event_ms:
            before[w.stream] = max(before.get(w.stream, 0), w.duplicates)
        elif w.t_ms <= until_ms:
            after[w.stream] = max(after.get(w.stream, 0), w.duplicates)
    return sum(max(0, n - before.get(s, 0)) for s, n in after.items())

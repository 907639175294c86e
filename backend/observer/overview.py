"""The cluster overview watcher: every consumer group, refreshed in cycles, read-only.

One `OverviewWatcher` per cluster (one Kafka reader, one record reader) serves every reader of
"all groups": the dashboard's Groups page, `groupscope groups`, the exporter and the alert
rules. A cycle lists the groups (one request), publishes their names at once, then refreshes
them in batches, the groups someone is looking at first (`prioritise`), then those never
described, then the stalest, publishing after every batch: the first screen needs one
listing, and a row fills in as soon as its batch is read. Listeners (alerts) are called
after each complete cycle, from the watcher's thread.

With a `HistoryRecorder` the watcher is also the memory's eyes: after each cycle it hands the
recorder the episodes, state changes and lag points the model noted, gives each group's
tracker the supervisor's recent actions, and seeds the model with what the store kept.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from backend.contracts.overview import CycleStats, GroupRow, Overview, kafka_release, lacking
from backend.errors import one_line
from backend.history.recorder import HistoryRecorder
from backend.kafka.groups import TP
from backend.kafka.settings import KafkaSettings
from backend.observer.derive import unread_ranges
from backend.observer.overview_collect import ClusterCollector, ClusterError, GroupReading
from backend.observer.overview_model import OverviewModel
from backend.observer.sample import Sampler

log = logging.getLogger("groupscope.overview")
PUBLISH_EVERY_S = 0.5  # during a cycle, how often the rows described so far are published
# Batches read at once while one is folded. With one, the reading thread was a cycle's pole at
# 65 000 groups once the fold got lighter: each batch's request, the JVM's answer and its
# parse one after the other. With more, one batch's request overlaps another's answer; with
# the fold lighter again, two still left the fold waiting a second a cycle, three a third of
# that (a batch's partitions not yet known to another in flight may have their log offsets
# read twice, early in a cycle: harmless). The first batch, the visible rows, is read alone.
# bench/README.md, "The overview at 65 000 groups: windows filling, taken whole".
READ_AHEAD = 3

Listener = Callable[[Overview], None]
CYCLES_KEPT = 60
# Python's cycle collector, for a process that holds an overview. Each cycle leaves about two
# new tracked objects per partition watched (its `PartitionLag` and its window's point): on
# a large cluster hundreds of thousands, which under the default thresholds (700, 10, 10)
# bring full collections walking every object the model holds, a third of a warm cycle. A
# young generation of 50 000 batches that work; the memory it lets wait is a few MB (see
# bench/README.md, "The overview's cycle and the collector").
COLLECTOR_THRESHOLDS = (50_000, 20, 10)


def relax_collector() -> None:
    """Raise the collector's thresholds to `COLLECTOR_THRESHOLDS` (never lower them)."""
    current = gc.get_threshold()
    if current[0] < COLLECTOR_THRESHOLDS[0]:
        gc.set_threshold(*COLLECTOR_THRESHOLDS)


class OverviewWatcher:
    def __init__(self, settings: KafkaSettings, interval: float = 10.0, batch: int = 1000,
                 lag_time_budget_s: float = 3.0, history: HistoryRecorder | None = None,
                 lag_seconds: bool = True,
                 include: Callable[[str], bool] | None = None) -> None:
        self.settings = settings
        self.history = history
        # the groups it watches (None: every group the cluster lists); the others are not
        # described, tracked or shown
        self.include = include
        # False: no record timestamps read (lag in seconds unknown), one reader fewer: for a
        # watcher kept for the memory alone, beside pages that read them (the demo's backend)
        self.lag_seconds = lag_seconds
        self.interval = interval
        self.batch = batch
        # seconds per cycle spent reading record timestamps (lag in seconds); the visible
        # batch comes first, the reads are cached, so the rest fill in over a few cycles
        self.lag_time_budget_s = lag_time_budget_s
        self._times_deadline = 0.0
        self.collector = ClusterCollector(settings)
        self.model = OverviewModel(settings.bootstrap)
        self._listeners: list[Listener] = []
        self._priority: tuple[str, ...] = ()
        self._cycles: deque[CycleStats] = deque(maxlen=CYCLES_KEPT)
        self._latest: Overview | None = None
        self._latest_lock = threading.Lock()
        self._cycle_lock = threading.Lock()  # one cycle at a time (thread + manual calls)
        self._listed = 0
        self._sampler = None
        # what each group's record times rested on last cycle (its commits and partitions)
        # and the times found; and each partition's log end and start of the last cycle, so
        # a cycle knows which moved. A group none of whose inputs moved asks for the same
        # records, whose timestamps do not change: it is not asked again (most of a large
        # cluster, most cycles: bench/README.md, "The overview's warm cycle")
        self._unread_last: dict[str, tuple[Mapping[TP, int], frozenset[TP],
                                           dict[TP, int | None]]] = {}
        self._offsets_last: dict[TP, tuple[int, int]] = {}
        # each group's partitions (committed on or owned) and the commits and members they
        # were taken from (the commits by identity: the reader hands an unchanged group's
        # very dict back); the reading thread's, so a quiet group's set is not built again
        self._partitions: dict[str, tuple[Mapping[TP, int], tuple, frozenset[TP]]] = {}
        self._moved: set[TP] = set()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._reading = ThreadPoolExecutor(max_workers=READ_AHEAD,
                                           thread_name_prefix="overview-read")
        relax_collector()

    # ---- readers ---------------------------------------------------------------------

    def latest(self) -> Overview | None:
        with self._latest_lock:
            return self._latest

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def prioritise(self, groups: Iterable[str]) -> None:
        """Refresh these groups first in every cycle (the rows a page shows)."""
        self._priority = tuple(groups)

    def wake(self) -> None:
        """Start the next cycle now instead of at the end of the interval."""
        self._wake.set()

    # ---- one cycle -------------------------------------------------------------------

    def refresh_once(self) -> Overview:
        """List every group and refresh every row; returns the overview at the cycle's end."""
        with self._cycle_lock:
            overview = self._cycle()
        for listener in list(self._listeners):
            try:
                listener(overview)
            except Exception as exc:  # an alert sink must not stop the watcher
                log.warning("overview listener failed: %s", one_line(exc))
        return overview

    def _cycle(self) -> Overview:
        started = time.time()
        t0 = time.perf_counter()
        requests0 = self.collector.requests
        refreshed = errors = 0
        try:
            listed = self.collector.list_groups()
            if self.include is not None:
                listed = [g for g in listed if self.include(g.group)]
            self.collector.topics()
        except ClusterError as exc:
            return self._publish(error=str(exc))
        except Exception as exc:  # an unexpected answer must not kill the loop
            return self._publish(error=one_line(exc))
        self._listed = len(listed)
        history = self.history
        if history is not None:
            history.set_cluster(self.collector.cluster_id, self.settings.bootstrap)
            seed = history.take_seed()
            if seed is not None:
                self.model.seed(seed)
        self.model.listed(listed, partial=self.collector.partial)
        self._publish()
        self._times_deadline = time.monotonic() + self.lag_time_budget_s
        ends_cycle: dict[TP, int] = {}
        starts_cycle: dict[TP, int] = {}
        self._moved = set()
        if len(self._unread_last) > len(listed) or len(self._partitions) > len(listed):
            names = {g.group for g in listed}  # groups gone: forget what they asked
            self._unread_last = {g: v for g, v in self._unread_last.items() if g in names}
            self._partitions = {g: v for g, v in list(self._partitions.items()) if g in names}
        batches = list(self._batches([g.group for g in listed]))
        # the next batches are read while this one is folded in: the JVM and the broker work
        # while Python computes, so a cycle costs about the larger of the two, not the sum;
        # the first batch (the rows a page shows) is read alone, so that it answers soonest
        ahead = deque([self._read_ahead(batches, 0, ends_cycle)] if batches else [])
        asked = len(ahead)
        published = time.monotonic()
        for i in range(len(batches)):
            if self._stop.is_set():  # stopping: the rows keep their last values
                break
            try:
                readings, ends, starts, partitions = ahead.popleft().result()
            except Exception as exc:  # the rest of the rows keep their last values
                log.warning("overview batch failed: %s", one_line(exc))
                errors += 1
                break
            ends_cycle.update(ends)
            starts_cycle.update(starts)
            self._note_moved(ends, starts)
            while asked < len(batches) and len(ahead) < READ_AHEAD:
                ahead.append(self._read_ahead(batches, asked, ends_cycle))
                asked += 1
            times = (self._oldest_unread(readings, ends_cycle, starts_cycle, partitions)
                     if self.lag_seconds else {})
            counts = self.collector.known_topics()
            for r in readings:
                row = self.model.update(r, ends_cycle, starts_cycle,
                                        own=self.collector.is_own(r.group),
                                        oldest_unread_ms=times.get(r.group), counts=counts,
                                        actions=history.actions(r.group, r.taken_ms)
                                        if history is not None else (), moved=self._moved)
                refreshed += 1
                errors += row.error is not None
            # the first batch (the visible rows) at once, the rest at most every
            # PUBLISH_EVERY_S (each publication copies every row), the whole at the end
            now = time.monotonic()
            if i == 0 or now - published >= PUBLISH_EVERY_S:
                self._publish()
                published = now
        self._offsets_last = {tp: (end, starts_cycle.get(tp, 0))
                              for tp, end in ends_cycle.items()}
        episodes, states, lag = self.model.drain()
        if history is not None:
            history.submit(int(time.time() * 1000), episodes, states, lag)
        stats = CycleStats(started_ms=int(started * 1000), seconds=time.perf_counter() - t0,
                           requests=self.collector.requests - requests0,
                           groups_refreshed=refreshed, errors=errors)
        self._cycles.append(stats)
        return self._publish()

    def _batches(self, groups: list[str]) -> Iterable[list[str]]:
        """Visible groups first, then never-described ones, then the stalest."""
        present = set(groups)
        first = [g for g in dict.fromkeys(self._priority) if g in present]
        taken = set(first)

        def staleness(g: str) -> tuple[int, str]:
            row = self.model.row(g)
            return (row.described_ms or 0) if row else 0, g

        rest = sorted((g for g in groups if g not in taken), key=staleness)
        for order in (first, rest):  # the visible rows alone first: they publish soonest
            for i in range(0, len(order), self.batch):
                yield order[i:i + self.batch]

    def _read_ahead(self, batches: list[list[str]], i: int, known: Mapping[TP, int]
                    ) -> Future:
        """Start reading batch `i` on one of the watcher's reading threads."""
        return self._reading.submit(self._read_batch, batches[i], frozenset(known))

    def _read_batch(self, batch: list[str], known: frozenset[TP]
                    ) -> tuple[list[GroupReading], dict[TP, int], dict[TP, int],
                               dict[str, frozenset[TP]]]:
        """The groups' readings, the log ends and starts of the partitions they read that
        are not `known` yet this cycle (each partition's once per cycle), and each described
        group's partitions."""
        readings = self.collector.read_groups(batch)
        topics = self.collector.topics()
        wanted: set[TP] = set()
        partitions: dict[str, frozenset[TP]] = {}
        for r in readings:
            if r.description is None:
                continue
            mentioned = partitions[r.group] = self._partitions_of(r)
            new = mentioned - known  # a known one was checked when it was first asked for
            for t, p in new:
                if p >= topics.get(t, 0):  # partitions added since the metadata was cached
                    topics = self.collector.topics(refresh=True)
                    break
            wanted.update(tp for tp in new if tp[0] in topics)
        ends, starts = self.collector.log_offsets(wanted) if wanted else ({}, {})
        return readings, ends, starts, partitions

    def _partitions_of(self, r: GroupReading) -> frozenset[TP]:
        """The partitions the group commits on or its members own, kept while its commits
        (the very dict) and members are the ones they were taken from."""
        assert r.description is not None
        members = r.description.members
        kept = self._partitions.get(r.group)
        if kept is not None and kept[0] is r.committed and kept[1] == members:
            return kept[2]
        tps = frozenset(r.committed).union(*(m.assignment for m in members))
        self._partitions[r.group] = (r.committed, members, tps)
        return tps

    def _note_moved(self, ends: Mapping[TP, int], starts: Mapping[TP, int]) -> None:
        """The partitions of a batch's new offsets whose end or start is not last cycle's."""
        last = self._offsets_last
        for tp, end in ends.items():
            if last.get(tp) != (end, starts.get(tp, 0)):
                self._moved.add(tp)

    def _oldest_unread(self, readings: list[GroupReading], ends: Mapping[TP, int],
                       starts: Mapping[TP, int],
                       partitions: Mapping[str, frozenset[TP]] | None = None
                       ) -> dict[str, dict[TP, int | None]]:
        """group -> partition -> broker timestamp of its first unprocessed record (None: only
        transaction markers left), as `Sampler.record_times` answers; a group whose commits,
        partitions and their offsets are last cycle's has last cycle's answer. `partitions`:
        each group's, as `_read_batch` found them (`_partitions_of` for any missing)."""
        out: dict[str, dict[TP, int | None]] = {}
        wanted: dict[str, dict[TP, tuple[int, int]]] = {}
        asked: dict[str, tuple[Mapping[TP, int], frozenset[TP]]] = {}
        for r in readings:
            if r.description is None:
                continue
            tps = (partitions or {}).get(r.group) or self._partitions_of(r)
            last = self._unread_last.get(r.group)
            # (an unchanged group's commits and partitions are the very objects: `is` first)
            if last is not None and (last[1] is tps or last[1] == tps) \
                    and (last[0] is r.committed or last[0] == r.committed) \
                    and self._moved.isdisjoint(tps) and ends.keys() >= tps:
                if last[2]:
                    out[r.group] = last[2]
                continue
            ranges = unread_ranges(r.committed, ends, starts, (tp for tp in tps if tp in ends))
            asked[r.group] = (r.committed, tps)
            if ranges:
                wanted[r.group] = ranges
        found: dict[str, dict[TP, int | None]] = {}
        if wanted:
            try:
                found = self._read_times(wanted)
            except Exception as exc:  # without READ on the topics only the ages are lost
                log.warning("record timestamps unavailable: %s", one_line(exc))
                for g in asked:
                    self._unread_last.pop(g, None)
                return out
        for g, (committed, tps) in asked.items():
            times = found.get(g, {})
            if len(times) == len(wanted.get(g, ())):  # every range answered: kept
                self._unread_last[g] = (committed, tps, times)
            else:  # some not learnt yet (the budget ran out): asked again next cycle
                self._unread_last.pop(g, None)
            if times:
                out[g] = times
        return out

    def _read_times(self, wanted: dict[str, dict[TP, tuple[int, int]]]
                    ) -> dict[str, dict[TP, int | None]]:
        sampler = self._record_reader(next(iter(wanted)))
        # one pass per partition: groups at different commits on it share the read
        per_tp: dict[TP, tuple[set[int], int]] = {}
        for spans in wanted.values():
            for tp, (start, end) in spans.items():
                per_tp.setdefault(tp, (set(), end))[0].add(start)
        budget = max(0.0, self._times_deadline - time.monotonic())  # 0: from the cache only
        found = sampler.record_times_many(per_tp, budget_s=budget)
        return {g: {tp: found[(tp, start)] for tp, (start, _end) in spans.items()
                    if (tp, start) in found}
                for g, spans in wanted.items()}

    def _record_reader(self, group: str):
        """One assign()-only reader per watcher; its group id must be one we may DESCRIBE."""
        if self._sampler is None:
            self._sampler = Sampler(self.settings, group)
        return self._sampler

    def _publish(self, error: str | None = None) -> Overview:
        overview = Overview(
            taken_ms=int(time.time() * 1000), cluster=self.settings.bootstrap,
            rows=self.model.rows(), listed=self._listed,
            cycle=self._cycles[-1] if self._cycles else None, error=error,
            history=tuple(self._cycles),
            brokers=() if error else self.collector.brokers,
            under_replicated=self.collector.under_replicated,
            offline_partitions=self.collector.offline_partitions,
            **self._abilities())
        with self._latest_lock:
            self._latest = overview
        return overview

    def _abilities(self) -> dict[str, object]:
        features = self.collector.features
        if features is None:
            return {}
        return {"kafka_release": kafka_release(features), "lacks": lacking(features)}

    # ---- background loop -------------------------------------------------------------

    def start(self) -> OverviewWatcher:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="overview", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                self.refresh_once()
            except Exception as exc:  # never let an always-on watcher die silently
                log.warning("overview cycle failed: %s", one_line(exc))
            self._wake.wait(max(0.0, self.interval - (time.monotonic() - began)))
            self._wake.clear()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop and release the clients; the watcher cannot be restarted."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        # a cycle stops between batches; one stuck in a request past `timeout` keeps its
        # clients, which go with the process (the thread is a daemon)
        if not self._cycle_lock.acquire(timeout=timeout):
            log.warning("overview cycle still running after %.0f s; leaving it", timeout)
            return
        try:
            if self._sampler is not None:
                with contextlib.suppress(Exception):
                    self._sampler.close()
                self._sampler = None
            self._reading.shutdown(wait=False, cancel_futures=True)
            self.collector.close()
        finally:
            self._cycle_lock.release()

    def row(self, group: str) -> GroupRow | None:
        latest = self.latest()
        return latest.row(group) if latest else None

    def __enter__(self) -> OverviewWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

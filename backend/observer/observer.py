"""The loop tying the stages: collect -> derive/timeline/evaluate -> store, once per interval.

`Observer(settings, group)` is used in-process by the dashboard (start() / latest() /
history()) and once by `groupscope snapshot` (poll_once()). It is read-only by
construction: the only clients it creates are an AdminClient and assign()-only consumers
with commits disabled.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from backend.contracts import CLASSIC, INPUT_TOPIC, Snapshot
from backend.contracts.overview import worst
from backend.errors import one_line
from backend.kafka.settings import KafkaSettings
from backend.observer.brokers import BrokerLog, BrokerReading, totals
from backend.observer.collect import CollectError, Collector, RawObservation
from backend.observer.derive import (
    choose_topic,
    effective_lag,
    member_views,
    partition_views,
    stream_views,
    unread_ranges,
)
from backend.observer.evaluate import OffsetPoint, OffsetWindows, Rules
from backend.observer.events import EventTail
from backend.observer.generation import GenerationTail
from backend.observer.sample import Sampler
from backend.observer.store import SnapshotStore
from backend.observer.timeline import Timeline, frame

log = logging.getLogger("groupscope.observer")

MAX_STREAMS = 20000
# The dashboard's observer polls the group every DASHBOARD_INTERVAL_S: half the Live page's
# 1 s refresh, so a rebalance reaches the lanes within one refresh.
DASHBOARD_INTERVAL_S = 0.5
# Between two polls, the tails of our own events and summaries topics are read this often: a
# summary is then visible soon after the replica wrote it instead of at the next poll, for
# two non-blocking consume() calls (bench/README.md, "Summaries seen when written").
TAIL_EVERY_S = 0.1

PollListener = Callable[["Snapshot | None", float], None]


class Observer:
    def __init__(self, settings: KafkaSettings, group: str, topic: str | None = None,
                 interval: float = 1.0, history: int = 900, sample_every: float = 15.0,
                 exact_lag: bool = True, tail_events: bool = True,
                 rules: Rules | None = None, read_generation: bool = True,
                 on_poll: PollListener | None = None) -> None:
        """`on_poll(snapshot, took_s)` is called on the observer's thread after each poll,
        with None as the snapshot after a read of the tails alone (see TAIL_EVERY_S)."""
        self.settings = settings
        self.group = group
        self.topic = topic
        self.interval = interval
        self.sample_every = sample_every
        self.exact_lag = exact_lag
        self.tail_events = tail_events
        self.read_generation = read_generation  # from __consumer_offsets, if readable
        self._gen = None
        self.collector = Collector(settings)
        self.store = SnapshotStore(history)
        self.timeline = Timeline(group, settings.bootstrap)
        self.brokers = BrokerLog()
        self.windows = OffsetWindows(rules or Rules())
        self._keys: dict[str, int | None] = {}
        self._sampler = None
        self._events = None
        self._last_sample = 0.0
        self._shown_topic: str | None = None
        self._lock = threading.Lock()  # one poll at a time (thread + manual calls)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._on_poll = on_poll
        self.last_error: str | None = None

    # ---- one cycle -------------------------------------------------------------------

    def poll_once(self) -> Snapshot:
        with self._lock:
            generation = self._generation()
            try:
                obs = self.collector.collect(self.group, self.topic)
                if generation is not None:
                    obs = replace(obs, generation=generation)
            except CollectError as exc:  # the collector's guard reconnects before the next one
                return self._publish_error(str(exc))
            except Exception as exc:  # a broken connection must not kill the loop
                return self._publish_error(one_line(exc))
            self.last_error = None
            return self._publish(self._build(obs))

    def _generation(self) -> int | None:
        """Drained *before* describing, so a generation is never newer than the members."""
        if not self.read_generation:
            return None
        if self.last_error is not None or (self.store.latest() is None
                                           and self.settings.refused_everywhere()):
            # not while the cluster does not answer: starting the reader against it would
            # wait out its metadata timeout on every poll the outage lasts
            return None
        if self._gen is None:
            self._gen = GenerationTail(self.settings, self.group)
        try:
            return self._gen.current()
        except Exception as exc:
            log.warning("generation unavailable: %s", one_line(exc))
            self.read_generation = False
            return None

    def _publish_error(self, message: str) -> Snapshot:
        self.last_error = message
        prev = self.store.latest()
        snap = Snapshot(
            taken_ms=int(time.time() * 1000), group=self.group, topic=self.topic,
            state="Unknown", protocol=prev.protocol if prev else CLASSIC,
            assignor=prev.assignor if prev else None, generation=None, members=(),
            partitions=(), streams=(), rebalances=self.timeline.rebalances(),
            health="OK", error=message, cluster_events=self.brokers.events(),
        )
        return self._publish(snap)

    def _publish(self, snap: Snapshot) -> Snapshot:
        prev = self.store.latest()
        if prev is not None and snap.taken_ms < prev.taken_ms:
            snap = replace(snap, taken_ms=prev.taken_ms)
        self.store.append(snap)
        return snap

    def _build(self, obs: RawObservation) -> Snapshot:
        topic = choose_topic(obs, self.topic)
        if topic is None and INPUT_TOPIC in obs.partition_counts:
            topic = INPUT_TOPIC
        if topic != self._shown_topic:
            self.windows.reset()
            self._shown_topic = topic
        n = obs.partition_counts.get(topic, 0) if topic else 0
        now = obs.taken_ms
        if topic:
            self._maybe_sample(obs, topic)
        times = self._record_times(obs, topic, n) if topic else {}

        owners_now = {p for m in obs.members for (t, p) in m.assignment if t == topic}
        health: dict[int, str] = {}
        for p in range(n):
            tp = (topic, p)
            committed = obs.committed.get(tp)
            # the effective lag, so commit markers never read as a stalled partition, and a
            # share group's is the one its partition view shows (the broker's, if reported)
            lag, _ = effective_lag(committed, obs.end_offsets.get(tp, 0),
                                   obs.start_offsets.get(tp, 0), now, times, p,
                                   obs.reported_lag.get(tp))
            self.windows.add(p, OffsetPoint(now, committed, lag))
            health[p] = self.windows.evaluate(p, owned=p in owners_now)

        partitions = partition_views(obs, topic, times, health) if topic else ()
        members = member_views(obs, topic or "", partitions)
        if topic:
            self.timeline.observe(frame(obs, topic, sum(pv.lag_messages for pv in partitions)))
        if topic is not None and obs.watched == topic:
            self.brokers.observe(BrokerReading(now, topic, obs.live_brokers, obs.placements))
        under, offline = totals(obs.placements.values()) if obs.watched == topic else (0, 0)
        owners = {pv.partition: pv.owner for pv in partitions}
        streams = stream_views(self._keys, n, owners) if topic else ()
        lag_s = [pv.lag_seconds for pv in partitions if pv.lag_seconds is not None]
        # a share or streams group's target epoch comes with its description; a consumer
        # group's only from the __consumer_offsets tail
        target_epoch = (obs.target_epoch if obs.target_epoch is not None
                        else self._gen.target_epoch if self._gen is not None else None)
        return Snapshot(
            taken_ms=now, group=obs.group, topic=topic, state=obs.state,
            protocol=obs.protocol, assignor=obs.assignor, generation=obs.generation,
            target_epoch=target_epoch,
            members=members, partitions=partitions, streams=streams,
            rebalances=self.timeline.rebalances(),
            health=worst(health.values()) if health else "OK", error=None,
            total_lag=sum(pv.lag_messages for pv in partitions),
            max_lag_seconds=max(lag_s) if lag_s else None,
            events=self._events.recent() if self._events is not None else (),
            partition_count=n, brokers=self.brokers.views(), under_replicated=under,
            offline_partitions=offline, cluster_events=self.brokers.events())

    # ---- optional readers (need READ on the topic; failures only cost detail) ---------

    def _sampler_client(self):
        if self._sampler is None:
            self._sampler = Sampler(self.settings, self.group)
        return self._sampler

    def _maybe_sample(self, obs: RawObservation, topic: str) -> None:
        if self.tail_events:
            if self._events is None:
                self._events = EventTail(self.settings, self.group)
            self._events.poll()
            for key in self._events.summaries:
                self._keys.setdefault(key, None)
        if time.monotonic() - self._last_sample < self.sample_every:
            return
        self._last_sample = time.monotonic()
        n = obs.partition_counts.get(topic, 0)
        ends = {p: obs.end_offsets.get((topic, p), 0) for p in range(n)}
        starts = {p: obs.start_offsets.get((topic, p), 0) for p in range(n)}
        try:
            seen = self._sampler_client().sample_keys(topic, ends, starts)
        except Exception as exc:
            log.warning("key sampling of %s failed: %s", topic, one_line(exc))
            return
        for key, p in seen.items():
            self._keys[key] = p
        if len(self._keys) > MAX_STREAMS:
            for key in list(self._keys)[: len(self._keys) - MAX_STREAMS]:
                del self._keys[key]

    def _record_times(self, obs: RawObservation, topic: str, n: int) -> dict[int, int | None]:
        """partition -> timestamp of its first unprocessed data record, None when only
        transaction markers are left (see `Sampler.record_times`); absent when not learnt.
        Every partition with lag is asked, those without a commit from the log start."""
        if not self.exact_lag:
            return {}
        ranges = unread_ranges(obs.committed, obs.end_offsets, obs.start_offsets,
                               ((topic, p) for p in range(n)))
        if not ranges:
            return {}
        try:
            got = self._sampler_client().record_times(ranges)
        except Exception as exc:
            log.warning("record timestamps of %s unavailable: %s", topic, one_line(exc))
            return {}
        return {p: ts for (_, p), ts in got.items()}

    # ---- background loop -------------------------------------------------------------

    def start(self) -> Observer:
        if self._thread is not None:
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"observer-{self.group}",
                                        daemon=True)
        self._thread.start()
        return self

    def poll_tails(self) -> None:
        """Only the tails of our own events and summaries topics, between two polls."""
        with self._lock:
            if self._events is not None:
                self._events.poll()

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self._timed(self.poll_once, True)
            next_at += self.interval
            if next_at < time.monotonic():  # fell behind: skip missed ticks, no burst
                next_at = time.monotonic()
            while not self._stop.wait(max(0.0, min(TAIL_EVERY_S, next_at - time.monotonic()))):
                if time.monotonic() >= next_at:
                    break
                self._timed(self.poll_tails, False)

    def _timed(self, poll: Callable[[], Snapshot | None], full: bool) -> None:
        began = time.monotonic()
        try:
            snap = poll()
            if self._on_poll is not None:
                self._on_poll(snap if full else None, time.monotonic() - began)
        except Exception as exc:  # never let the dashboard's observer die silently
            log.warning("observer poll failed: %s", one_line(exc))

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop and release every client; the observer cannot be restarted."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        with self._lock:
            for closer in (self._sampler, self._events, self._gen):
                if closer is not None:
                    with contextlib.suppress(Exception):
                        closer.close()
            self._sampler = None
            self._events = None
            self._gen = None
            self.collector.close()

    def latest(self) -> Snapshot | None:
        return self.store.latest()

    def latest_shown(self) -> Snapshot | None:
        return self.store.latest_shown()

    def history(self, since_ms: int | None = None) -> tuple[Snapshot, ...]:
        return self.store.history(since_ms)

    def summaries(self) -> dict[str, dict]:
        """Latest summary per stream from the changelog (our own groups only)."""
        return dict(self._events.summaries) if self._events is not None else {}

    def __enter__(self) -> Observer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

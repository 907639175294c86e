"""The fleet simulator: N cars, one keyed stream each, paced by a token bucket.

Runs in a background thread so the supervisor can own it in-process and change its rate or
stream count while it runs (`set_rate`, `set_streams`). Every stream's `seq` is contiguous
from 0 and resumes where the topic says it stopped (see `recovery`), and the producer is
idempotent, so broker retries never duplicate or reorder a stream: a summary that counts
`seq` gaps and duplicates can trust that any it finds were made downstream.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import KafkaError, Producer

from backend.contracts import DEFAULT_PARTITIONS, INPUT_TOPIC, TelemetryMessage
from backend.errors import one_line
from backend.fleet.pacing import TokenBucket, check_rate
from backend.fleet.recovery import recover_next_seq
from backend.fleet.telemetry import Car
from backend.kafka.partitioner import partition_for
from backend.kafka.settings import KafkaSettings

DEFAULT_STREAMS = 12
DEFAULT_RATE = 200.0
MAX_BATCH = 500  # messages produced per loop turn before serving delivery reports
RATE_WINDOW_S = 2.0
TICK_S = 0.01
FLUSH_TIMEOUT_S = 15.0
_GOLDEN = (math.sqrt(5) - 1) / 2  # spreads cars around the route whatever their number


def stream_id(index: int) -> str:
    """`car-01` … `car-99`, then `car-100`: ids never change when the fleet grows."""
    if index < 1:
        raise ValueError(f"stream index starts at 1, got {index}")
    return f"car-{index:02d}"


class _GrowthOrder:
    """The fleet's car numbers in the order cars join it, computed as far as asked and kept.

    Car k (from 0) is the lowest-numbered car not yet taken whose murmur2 partition of the
    default topic is k mod DEFAULT_PARTITIONS: cars are dealt round-robin over partitions.
    """

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.order: list[int] = []
        self._waiting: list[deque[int]] = [deque() for _ in range(partitions)]
        self._next = 1  # the next car number not yet hashed
        self._lock = threading.Lock()  # control requests may grow the fleet concurrently

    def first(self, count: int) -> list[int]:
        with self._lock:
            while len(self.order) < count:
                want = self._waiting[len(self.order) % self.partitions]
                while not want:
                    n = self._next
                    self._waiting[partition_for(stream_id(n), self.partitions)].append(n)
                    self._next += 1
                self.order.append(want.popleft())
            return self.order[:max(0, count)]


_ORDER = _GrowthOrder(DEFAULT_PARTITIONS)


def stream_ids(count: int) -> list[str]:
    """The fleet's first `count` cars, in the order they join: growing never renames a car.

    Not simply car-01 … car-NN: under murmur2, car-01 … car-12 leave partition 3 of the
    default 6 empty (the first car there is car-20), so in the default demo one replica
    would own nothing to show. Cars are dealt round-robin over the DEFAULT_PARTITIONS
    partitions instead (see _GrowthOrder): any fleet of at least that many cars covers
    every partition, 6·m cars put m on each, and the default 12 are car-01 … car-06,
    car-09, car-10, car-13, car-15, car-20 and car-22. Deterministic, so the supervisor,
    the CLI and the tests agree on the names; on a topic with another partition count
    the names are the same and only murmur2's own spread applies.
    """
    return [stream_id(n) for n in _ORDER.first(count)]


def producer_config(settings: KafkaSettings, **overrides: object) -> dict[str, object]:
    """Idempotent (acks=all, ordered retries), murmur2 keys, and no delivery deadline: a broker
    outage blocks the fleet (back-pressure) instead of dropping seqs and leaving gaps."""
    logger = logging.getLogger("groupscope.librdkafka")
    logger.propagate = False
    conf: dict[str, object] = {
        "client.id": "groupscope-fleet",
        "enable.idempotence": True,
        "acks": "all",  # what idempotence implies, written down: every in-sync copy
        "partitioner": "murmur2_random",
        "linger.ms": 20,
        "compression.type": "lz4",
        "message.timeout.ms": 0,
        "logger": logger,
    }
    conf.update(overrides)
    return settings.client_config(**conf)


@dataclass(frozen=True)
class FleetStats:
    """A consistent read of the simulator; counts are for the current run (since `start`)."""

    running: bool
    topic: str
    streams: int
    target_rate: float  # msg/s asked for; inf = unlimited, 0 = paused
    rate: float  # delivered msg/s over the last couple of seconds
    delivered: int
    queued: int  # handed to the client, not yet acknowledged
    failed: int
    produced: dict[str, int] = field(default_factory=dict)  # delivered per stream
    next_seq: dict[str, int] = field(default_factory=dict)
    resumed_from: dict[str, int] = field(default_factory=dict)  # first seq of this run
    last_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["target_rate"] = None if math.isinf(self.target_rate) else self.target_rate
        return data


class FleetError(RuntimeError):
    """The simulator cannot run (already running, fatal producer error…)."""


class FleetSimulator:
    """Produce telemetry for `streams` cars at `rate` msg/s in total to `topic`.

    `limit` stops producing after that many messages in this run (the CLI's --count).
    `rate` may be `math.inf` for as fast as the machine allows; 0 pauses.
    """

    def __init__(self, settings: KafkaSettings, topic: str = INPUT_TOPIC,
                 streams: int = DEFAULT_STREAMS, rate: float = DEFAULT_RATE, *,
                 limit: int | None = None, producer_overrides: dict[str, object] | None = None
                 ) -> None:
        if streams < 1:
            raise ValueError(f"streams must be at least 1, got {streams}")
        self.settings = settings
        self.topic = topic
        self.limit = limit
        self._overrides = dict(producer_overrides or {})
        self._lock = threading.Lock()  # guards the state the producer thread uses
        self._control = threading.RLock()  # serialises start/stop/set_streams (may block)
        self._active: list[str] = stream_ids(streams)
        self._cursor = 0
        self._streams_gen = 0
        self._bucket = TokenBucket(check_rate(rate))
        self._next_seq: dict[str, int] = {}
        self._resumed: dict[str, int] = {}
        self._cars: dict[str, Car] = {}
        self._acked: dict[bytes, int] = {}
        self._sent = 0
        self._delivered = 0
        self._failed = 0
        self._last_error: str | None = None
        self._last_ts = 0  # timestamps never decrease, even across restarts (see recovery)
        self._samples: deque[tuple[float, int]] = deque()
        self._stop = threading.Event()
        self._flush_timeout = FLUSH_TIMEOUT_S
        self._finished = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Producer | None = None

    # ---- control -------------------------------------------------------------------------

    def start(self) -> None:
        """Recover every stream's next seq from the topic, then produce in a background thread."""
        with self._control:
            self._start()

    def _start(self) -> None:
        if self.running:
            raise FleetError("the fleet simulator is already running")
        with self._lock:
            active = list(self._active)
        recovery = recover_next_seq(self.settings, self.topic, active)
        if recovery.partitions == 0:
            # producing would only fail later, message by message, leaving seq gaps
            raise FleetError(f"topic {self.topic} does not exist on {self.settings.bootstrap}; "
                             f"create it first (ensure_topics / groupscope produce)")
        recovered = recovery.next_seq
        producer = Producer(producer_config(self.settings, error_cb=self._on_error,
                                            **self._overrides))
        with self._lock:
            self._next_seq = dict(recovered)
            self._resumed = dict(recovered)
            self._acked = {k.encode(): 0 for k in active}
            self._cars = {}
            self._sent = self._delivered = self._failed = 0
            self._last_error = None
            self._samples.clear()
            self._cursor = 0
            self._bucket = TokenBucket(self._bucket.rate)
            self._producer = producer
            self._last_ts = recovery.newest_ts
            self._stop.clear()
            self._flush_timeout = FLUSH_TIMEOUT_S
            self._finished.clear()
            self._thread = threading.Thread(target=self._run, name="fleet-simulator",
                                            daemon=True)
            self._thread.start()

    def stop(self, timeout: float = FLUSH_TIMEOUT_S) -> FleetStats:
        """Stop producing, wait up to `timeout` s for every queued message to be acknowledged
        (the rest are dropped, see `_run`), return the stats. A process stopping on SIGTERM
        passes what is left of its budget: with the broker gone nothing would be acked."""
        with self._control:
            self._flush_timeout = timeout
            self._stop.set()
            thread = self._thread
            if thread is not None:
                thread.join(timeout + 5.0)
            self._thread = None
            return self.stats()

    def set_rate(self, rate: float) -> None:
        """New total rate in msg/s, effective at once (math.inf = unlimited, 0 = paused)."""
        rate = check_rate(rate)
        with self._lock:
            self._bucket.set_rate(rate, time.monotonic())

    def set_streams(self, count: int, wait: bool = True) -> None:
        """Grow or shrink the fleet while it runs; a re-added car continues its own seq.

        A car this run has not produced yet may have history on the topic, which must be read
        before it produces (a never-seen key means reading every partition to its start). With
        `wait=False` that happens in the background and the new cars join when it is done, so
        a control request returns at once; a later call supersedes a pending one.
        """
        if count < 1:
            raise ValueError(f"streams must be at least 1, got {count}")
        wanted = stream_ids(count)
        with self._control:  # so a concurrent start() recovers exactly the streams it runs
            with self._lock:
                self._streams_gen += 1
                gen = self._streams_gen
                unknown = [k for k in wanted if k not in self._next_seq]
                running = self.running
            if not (unknown and running):
                self._apply_streams(gen, wanted, {})
            elif wait:
                recovered = recover_next_seq(self.settings, self.topic, unknown).next_seq
                self._apply_streams(gen, wanted, recovered)
            else:
                threading.Thread(target=lambda: self._apply_streams(gen, wanted,
                                                                    self._recover(unknown)),
                                 name="fleet-recovery", daemon=True).start()

    def _recover(self, keys: list[str]) -> dict[str, int] | None:
        try:
            return recover_next_seq(self.settings, self.topic, keys).next_seq
        except Exception as exc:  # a background thread must report, not die silently
            self._note_error(f"could not add streams: {one_line(exc)}")
            return None

    def _apply_streams(self, gen: int, wanted: list[str],
                       recovered: dict[str, int] | None) -> None:
        with self._lock:
            if recovered is None or gen != self._streams_gen:
                return  # failed, or superseded by a later set_streams
            for key in wanted:
                if key in recovered and key not in self._next_seq:
                    self._next_seq[key] = recovered[key]
                    self._resumed[key] = recovered[key]
                self._acked.setdefault(key.encode(), 0)
            self._active = wanted
            self._cursor %= len(wanted)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait_finished(self, timeout: float | None = None) -> bool:
        """With a `limit`: True once all of it has been produced and acknowledged."""
        return self._finished.wait(timeout)

    def stats(self) -> FleetStats:
        with self._lock:
            now = time.monotonic()
            rate = self._measured_rate(now)
            return FleetStats(
                running=self.running, topic=self.topic, streams=len(self._active),
                target_rate=self._bucket.rate, rate=rate, delivered=self._delivered,
                queued=self._sent - self._delivered - self._failed, failed=self._failed,
                produced={k.decode(): v for k, v in self._acked.items()},
                next_seq=dict(self._next_seq), resumed_from=dict(self._resumed),
                last_error=self._last_error)

    def __enter__(self) -> FleetSimulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- producing -----------------------------------------------------------------------

    def _run(self) -> None:
        producer = self._producer
        assert producer is not None
        try:
            while not self._stop.is_set():
                if self.limit is not None and self._sent >= self.limit:
                    break
                sent, wait = self._produce_batch(producer)
                producer.poll(0)
                self._sample()
                if sent == 0:
                    # wake at most every TICK_S: tokens are then released a few at a time,
                    # which costs a fraction of the CPU of one wake-up per message
                    producer.poll(min(max(wait, TICK_S), 0.05))
        finally:
            flush_timeout = self._flush_timeout
            remaining = producer.flush(flush_timeout)
            if remaining:
                # unconfirmed messages are dropped; the next start re-reads the topic, so a
                # seq is only ever produced again if it never reached the log
                producer.purge()
                producer.flush(0.5)  # only serves the purged messages' reports
                self._note_error(f"{remaining} queued messages could not be delivered "
                                 f"within {flush_timeout:.0f}s and were dropped")
            self._sample()
            self._producer = None
            if self.limit is not None and self._sent >= self.limit:
                self._finished.set()

    def _produce_batch(self, producer: Producer) -> tuple[int, float]:
        """Produce as many messages as the bucket allows now; returns (sent, seconds to wait)."""
        sent = 0
        with self._lock:
            now = time.monotonic()
            cap = MAX_BATCH if self.limit is None else min(MAX_BATCH, self.limit - self._sent)
            n = self._bucket.take(now, cap)
            if n == 0:
                return 0, self._bucket.wait(now)
            active = self._active
            topic = self.topic
            for _ in range(n):
                key = active[self._cursor]
                seq = self._next_seq.get(key, 0)
                ts = self._last_ts = max(self._last_ts, int(time.time() * 1000))
                value = self._message(key, seq, ts)
                try:
                    producer.produce(topic, value, key.encode(), timestamp=ts,
                                     on_delivery=self._on_delivery)
                except BufferError:
                    # queue full (slow or absent broker): hand the tokens back, wait, retry
                    self._bucket.tokens += n - sent
                    self._sent += sent
                    return sent, 0.05
                self._next_seq[key] = seq + 1
                self._cursor = (self._cursor + 1) % len(active)
                sent += 1
            self._sent += sent
        return sent, 0.0

    def _message(self, key: str, seq: int, ts: int) -> bytes:
        car = self._cars.get(key)
        if car is None:
            index = int(key.rsplit("-", 1)[1])
            car = self._cars[key] = Car.create(key, start_fraction=(index * _GOLDEN) % 1.0)
        speed, gear, rpm, temp, lat, lon = car.step(ts)
        # through the contract, which alone names the fields: about 1 µs more than a dict
        # literal, of the 21-43 µs a message costs at the fleet's top rate (bench/README.md)
        return TelemetryMessage(stream_id=key, seq=seq, ts=ts, speed_kmh=speed, rpm=rpm,
                                gear=gear, engine_temp_c=temp, lat=lat, lon=lon).encode()

    # ---- callbacks (run in the producer thread, inside poll/flush) -------------------------

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            self._delivered += 1
            key = msg.key()
            self._acked[key] = self._acked.get(key, 0) + 1
        else:
            self._failed += 1
            self._last_error = f"delivery failed: {err.str()}"

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._note_error(f"fatal producer error: {err.str()}")
            self._stop.set()
        elif err.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT):
            self._last_error = f"broker unreachable: {err.str()}"

    def _note_error(self, text: str) -> None:
        self._last_error = text
        logging.getLogger("groupscope.fleet").warning(text)

    def _sample(self) -> None:
        now = time.monotonic()
        if not self._samples or now - self._samples[-1][0] >= 0.1:
            self._samples.append((now, self._delivered))
            while self._samples and now - self._samples[0][0] > RATE_WINDOW_S + 1.0:
                self._samples.popleft()

    def _measured_rate(self, now: float) -> float:
        if not self.running or len(self._samples) < 2:
            return 0.0
        newest_t, newest = self._samples[-1]
        for t, count in self._samples:
            if newest_t - t <= RATE_WINDOW_S:
                return (newest - count) / (newest_t - t) if newest_t > t else 0.0
        return 0.0

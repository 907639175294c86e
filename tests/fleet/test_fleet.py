"""The fleet simulator: pure model and pacing logic, then the real thing on the embedded broker."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, fields
from itertools import pairwise
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition

from backend.contracts import DEFAULT_PARTITIONS, REQUIRED_FIELDS, TelemetryMessage
from backend.fleet.pacing import TokenBucket
from backend.fleet.simulator import (
    _GOLDEN,
    DEFAULT_STREAMS,
    FleetError,
    FleetSimulator,
    stream_id,
    stream_ids,
)
from backend.fleet.telemetry import (
    ACCEL_MS2,
    BRAKE_MS2,
    DEFAULT_ROUTE,
    GEAR_RATIOS,
    IDLE_RPM,
    MAX_RPM,
    UPSHIFT_KMH,
    Car,
    _distance_m,
    gear_for_speed,
    rpm_for,
)
from backend.kafka.partitioner import partition_for
from backend.kafka.settings import KafkaSettings
from backend.kafka.topics import add_partitions, ensure_input_topic
from backend.netutil import free_port, wait_until
from backend.proc import spawn

REPO = Path(__file__).resolve().parents[2]

# ---- pure logic ------------------------------------------------------------------------------


def test_stream_ids_are_zero_padded_and_stable_when_the_fleet_grows() -> None:
    assert stream_ids(3) == ["car-03", "car-02", "car-04"]  # dealt over partitions 0, 1, 2
    assert sorted(stream_ids(12)) == [f"car-{n:02d}" for n in (1, 2, 3, 4, 5, 6, 9, 10, 13,
                                                                15, 20, 22)]
    assert stream_ids(120)[:12] == stream_ids(12)  # growing never renames a stream
    assert len(set(stream_ids(500))) == 500 and stream_ids(0) == []
    assert stream_id(100) == "car-100"
    with pytest.raises(ValueError):
        stream_id(0)


def test_default_streams_cover_every_default_partition() -> None:
    """car-01..car-12 would leave partition 3 of 6 empty: one replica with nothing to show."""
    cars = stream_ids(DEFAULT_STREAMS)
    assert {partition_for(k, DEFAULT_PARTITIONS) for k in cars} == set(range(DEFAULT_PARTITIONS))
    # dealt round-robin: any fleet of at least P cars covers all P, and P·m cars give m each
    for count in range(DEFAULT_PARTITIONS, 4 * DEFAULT_PARTITIONS + 1):
        per = [partition_for(k, DEFAULT_PARTITIONS) for k in stream_ids(count)]
        assert max(map(per.count, set(per))) - min(map(per.count, set(per))) <= 1
        assert len(set(per)) == DEFAULT_PARTITIONS


def test_gear_follows_speed_and_rpm_follows_speed_and_ratio() -> None:
    assert gear_for_speed(0.0) == 0 and gear_for_speed(0.99) == 0
    for g, threshold in enumerate(UPSHIFT_KMH, start=1):
        assert gear_for_speed(threshold) == g
    assert gear_for_speed(179.0) == len(GEAR_RATIOS)
    assert rpm_for(0.0, 0) == IDLE_RPM
    # 50 km/h in 3rd: 416.7 wheel rpm x 1.4 x 3.7
    assert rpm_for(50.0, 3) == pytest.approx(50_000 / 60 / 2.0 * 1.4 * 3.7)
    speeds = [s / 4 for s in range(0, 720)]
    rpms = [rpm_for(s, gear_for_speed(s)) for s in speeds]
    assert all(IDLE_RPM <= r <= MAX_RPM for r in rpms)
    # rpm drops at each upshift and rises within a gear
    for (s0, r0), (s1, r1) in pairwise(zip(speeds, rpms, strict=True)):
        if gear_for_speed(s0) == gear_for_speed(s1) and gear_for_speed(s0) > 0:
            assert r1 >= r0
        elif gear_for_speed(s1) > gear_for_speed(s0) > 0:
            assert r1 < r0


def test_a_car_drives_smoothly_warms_up_and_moves_along_the_route() -> None:
    car = Car.create("car-07", start_fraction=0.25)
    t0 = 1_700_000_000_000
    readings = [car.step(t0 + i * 100) for i in range(0, 3000)]  # 5 minutes at 10 Hz
    speeds = [r[0] for r in readings]
    temps = [r[3] for r in readings]
    for (s0, _, _, _, lat0, lon0), (s1, g1, rpm1, _, lat1, lon1) in pairwise(readings):
        # bounded acceleration (plus a little road noise and rounding)
        assert -BRAKE_MS2 * 3.6 * 0.1 - 0.3 <= s1 - s0 <= ACCEL_MS2 * 3.6 * 0.1 + 0.3
        assert g1 == gear_for_speed(s1)
        assert rpm1 == round(rpm_for(s1, g1), 1)
        # position advances by about speed x time (never jumps)
        moved = _distance_m((lat0, lon0), (lat1, lon1))
        assert moved <= max(s0, s1) / 3.6 * 0.1 + 0.5
    assert max(speeds) > 40 and min(speeds[100:]) < max(speeds)  # it really drives, and varies
    assert temps[0] < 30 and temps[-1] > 80  # cold start, warm after 5 minutes
    assert all(b >= a - 0.05 for a, b in pairwise(temps[:601]))
    assert max(temps) <= 95
    driven = sum(_distance_m(r0[4:6], r1[4:6]) for r0, r1 in pairwise(readings))
    mean_speed_ms = sum(speeds) / len(speeds) / 3.6
    assert driven == pytest.approx(mean_speed_ms * 300, rel=0.05)


def test_route_position_wraps_and_interpolates() -> None:
    route = DEFAULT_ROUTE
    assert route.position(0.0) == pytest.approx(route.points[0])
    assert route.position(route.length_m) == pytest.approx(route.points[0])
    half = route.cumulative[1] / 2
    a, b = route.points[0], route.points[1]
    assert route.position(half) == pytest.approx(((a[0] + b[0]) / 2, (a[1] + b[1]) / 2))
    assert 8_000 < route.length_m < 20_000


def test_a_message_encodes_to_the_bytes_consumers_have_always_read() -> None:
    message = TelemetryMessage(stream_id="car-07", seq=41, ts=1_732_000_000_123, speed_kmh=52.31,
                               rpm=2345.6, gear=3, engine_temp_c=88.12, lat=52.371234,
                               lon=4.901234)
    assert message.encode() == (
        b'{"stream_id":"car-07","seq":41,"ts":1732000000123,"speed_kmh":52.31,"rpm":2345.6,'
        b'"gear":3,"engine_temp_c":88.12,"lat":52.371234,"lon":4.901234}')
    assert orjson.loads(message.encode()) == message.to_dict()


def test_the_simulator_writes_the_bytes_it_wrote_before_it_used_the_contract() -> None:
    """The same car, driven alongside, encoded the way the simulator used to: a dict literal."""
    sim = FleetSimulator(KafkaSettings("127.0.0.1:1"), "telemetry", streams=3)
    twin = Car.create("car-03", start_fraction=(3 * _GOLDEN) % 1.0)
    for seq, ts in enumerate(range(1_732_000_000_000, 1_732_000_060_000, 250)):
        speed, gear, rpm, temp, lat, lon = twin.step(ts)
        before = orjson.dumps({"stream_id": "car-03", "seq": seq, "ts": ts, "speed_kmh": speed,
                               "rpm": rpm, "gear": gear, "engine_temp_c": temp,
                               "lat": lat, "lon": lon})
        assert sim._message("car-03", seq, ts) == before


def test_token_bucket_keeps_the_rate_whatever_the_loop_timing() -> None:
    bucket = TokenBucket(100.0)
    now, taken = 0.0, 0
    bucket.take(now, 10)
    steps = [0.001, 0.013, 0.0007, 0.05, 0.002, 0.031]  # irregular loop turns
    i = 0
    while now < 10.0:
        now += steps[i % len(steps)]
        i += 1
        taken += bucket.take(now, 1000)
    assert abs(taken - now * 100) <= 1  # 100/s, to the message, over ~10 s


def test_token_bucket_caps_catch_up_after_a_stall_and_changes_rate_at_once() -> None:
    bucket = TokenBucket(1000.0)
    bucket.take(0.0, 1)
    assert bucket.take(10.0, 100_000) == 250  # a 10 s stall releases only 0.25 s of burst
    bucket.set_rate(10.0, 10.0)
    assert sum(bucket.take(10.0 + i / 10, 1000) for i in range(1, 6)) == 5  # 10/s for 0.5 s
    assert bucket.take(20.0, 1000) == 2  # burst is a quarter second of the new rate
    bucket.take(10.5, 1000)  # time going backwards changes nothing
    bucket.set_rate(0.0, 20.0)
    assert bucket.take(30.0, 1000) == 0 and math.isinf(bucket.wait(30.0))
    bucket.set_rate(math.inf, 30.0)
    assert bucket.take(30.0, 777) == 777 and bucket.wait(30.0) == 0.0
    with pytest.raises(ValueError):
        bucket.set_rate(-1, 31.0)


# ---- on the real broker --------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    key: str
    partition: int
    offset: int
    timestamp: int
    value: dict


def end_offsets(kafka: KafkaSettings, topic: str) -> int:
    """Sum of the log-end offsets: what the broker has accepted so far."""
    consumer = Consumer(kafka.client_config(**{"group.id": "fleet-test-offsets"}))
    try:
        md = consumer.list_topics(topic, timeout=10)
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in md.topics[topic].partitions)
    finally:
        consumer.close()


def read_all(kafka: KafkaSettings, topic: str) -> list[Record]:
    """Every record of the topic, up to the end offsets taken at call time."""
    consumer = Consumer(kafka.client_config(**{"group.id": "fleet-test-reader",
                                               "enable.auto.commit": False}))
    try:
        md = consumer.list_topics(topic, timeout=10)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in md.topics[topic].partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p, end in ends.items() if end > 0])
        out: list[Record] = []
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 60
        while len(done) < len(ends):
            assert time.monotonic() < deadline, "reading the topic back timed out"
            for msg in consumer.consume(5000, timeout=0.5):
                assert msg.error() is None, msg.error()
                out.append(Record(msg.key().decode(), msg.partition(), msg.offset(),
                                  msg.timestamp()[1], orjson.loads(msg.value())))
                if msg.offset() >= ends[msg.partition()] - 1:
                    done.add(msg.partition())
        return out
    finally:
        consumer.close()


def assert_contiguous(records: list[Record]) -> dict[str, int]:
    """Each stream's seqs are 0..n-1, in log order, no gap, no duplicate; returns n per stream."""
    by_key: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for r in records:
        by_key[r.key].append((r.partition, r.offset, r.value["seq"]))
    counts = {}
    for key, rows in by_key.items():
        seqs = [seq for _, _, seq in sorted(rows)] if len({p for p, _, _ in rows}) == 1 else \
            sorted(seq for _, _, seq in rows)
        assert seqs == list(range(len(seqs))), f"{key}: seqs are not 0..{len(seqs) - 1}"
        counts[key] = len(seqs)
    return counts


@pytest.fixture
def topic(kafka: KafkaSettings, unique: str) -> str:
    name = f"fleet-{unique}"
    ensure_input_topic(kafka, name, partitions=6)
    return name


@pytest.fixture
def sims() -> Iterator[list[FleetSimulator]]:
    """Every simulator a test makes is stopped, even when the test fails."""
    made: list[FleetSimulator] = []
    try:
        yield made
    finally:
        for sim in made:
            sim.stop()


def run_to_limit(sim: FleetSimulator) -> None:
    sim.start()
    assert sim.wait_finished(60), "simulator did not finish its count"
    stats = sim.stop()
    assert stats.failed == 0 and stats.delivered == sim.limit


def test_seq_resumes_after_restart_with_no_gap_and_no_reuse(
        kafka: KafkaSettings, topic: str, sims: list[FleetSimulator]) -> None:
    first = FleetSimulator(kafka, topic, streams=6, rate=2000, limit=300)
    sims.append(first)
    run_to_limit(first)
    assert first.stats().next_seq == {k: 50 for k in stream_ids(6)}

    second = FleetSimulator(kafka, topic, streams=6, rate=2000, limit=300)  # a new process
    sims.append(second)
    run_to_limit(second)
    assert second.stats().resumed_from == {k: 50 for k in stream_ids(6)}
    run_to_limit(second)  # and the same object restarted
    assert second.stats().resumed_from == {k: 100 for k in stream_ids(6)}

    records = read_all(kafka, topic)
    assert len(records) == 900
    assert assert_contiguous(records) == {k: 150 for k in stream_ids(6)}
    for r in records:
        assert r.partition == partition_for(r.key, 6)
    # timestamps never go back, across restarts too: recovery relies on it
    runs = [[r.timestamp for r in records if lo <= r.value["seq"] < lo + 50]
            for lo in (0, 50, 100)]
    assert max(runs[0]) <= min(runs[1]) and max(runs[1]) <= min(runs[2])


def test_seq_resumes_after_partitions_were_added(
        kafka: KafkaSettings, unique: str, sims: list[FleetSimulator]) -> None:
    topic = f"fleet-grow-{unique}"
    ensure_input_topic(kafka, topic, partitions=2)
    before = FleetSimulator(kafka, topic, streams=10, rate=5000, limit=200)
    sims.append(before)
    run_to_limit(before)
    add_partitions(kafka, topic, 5)
    after = FleetSimulator(kafka, topic, streams=10, rate=5000, limit=200)
    sims.append(after)
    run_to_limit(after)
    assert after.stats().resumed_from == {k: 20 for k in stream_ids(10)}
    records = read_all(kafka, topic)
    moved = {k for k in stream_ids(10) if partition_for(k, 2) != partition_for(k, 5)}
    assert moved, "the test needs keys that changed partition"
    assert {r.key for r in records if r.partition >= 2} <= moved | set(stream_ids(10))
    assert assert_contiguous(records) == {k: 40 for k in stream_ids(10)}
    for r in records:
        expected = partition_for(r.key, 2 if r.value["seq"] < 20 else 5)
        assert r.partition == expected, (r.key, r.value["seq"])


def test_rate_change_takes_effect(kafka: KafkaSettings, topic: str,
                                  sims: list[FleetSimulator]) -> None:
    sim = FleetSimulator(kafka, topic, streams=4, rate=100)
    sims.append(sim)
    sim.start()
    wait_until(lambda: end_offsets(kafka, topic) >= 250, 20, what="250 messages at 100/s")
    changed_ms = int(time.time() * 1000)
    sim.set_rate(500)
    base = end_offsets(kafka, topic)
    t0 = time.monotonic()
    wait_until(lambda: end_offsets(kafka, topic) >= base + 1250, 20,
               what="1250 more messages at 500/s")
    offsets_rate = (end_offsets(kafka, topic) - base) / (time.monotonic() - t0)
    assert sim.stats().rate == pytest.approx(500, rel=0.3)
    sim.stop()

    records = read_all(kafka, topic)
    assert_contiguous(records)
    stamps = sorted(r.value["ts"] for r in records)
    assert all(r.timestamp == r.value["ts"] for r in records)

    def rate_between(a_ms: int, b_ms: int) -> float:
        return sum(a_ms <= t < b_ms for t in stamps) / ((b_ms - a_ms) / 1000)

    # skip the first half second of each phase (start-up, the switch), then measure 1.5 s
    slow = rate_between(stamps[0] + 500, stamps[0] + 2000)
    fast = rate_between(changed_ms + 500, changed_ms + 2000)
    assert slow == pytest.approx(100, rel=0.1)
    assert fast == pytest.approx(500, rel=0.1)
    # the topic's own count over this process's clock: a cruder reading than the stamps
    # (a starved test process reads its offsets late; 371 msg/s at load 29 while the stamps
    # said 500), so it only has to tell 500 from the 100 before the change
    assert offsets_rate == pytest.approx(500, rel=0.5)


def test_set_streams_adds_new_keys_and_resumes_known_ones(
        kafka: KafkaSettings, topic: str, sims: list[FleetSimulator]) -> None:
    cars = stream_ids(7)  # in the order they join: the first five are produced first
    earlier = FleetSimulator(kafka, topic, streams=5, rate=5000, limit=100)
    sims.append(earlier)
    run_to_limit(earlier)  # cars[0..4] have seq 0..19 on the topic

    sim = FleetSimulator(kafka, topic, streams=2, rate=400)
    sims.append(sim)
    sim.start()
    assert sim.stats().resumed_from == {cars[0]: 20, cars[1]: 20}
    wait_until(lambda: sim.stats().produced[cars[1]] >= 20, 20, what=f"{cars[1]} producing")
    sim.set_streams(7, wait=False)  # returns at once; the new cars join after recovery
    wait_until(lambda: min(sim.stats().produced.get(k, 0) for k in cars) >= 10, 20,
               what="all 7 cars producing")
    stats = sim.stats()
    assert stats.streams == 7
    assert stats.resumed_from[cars[4]] == 20 and stats.resumed_from[cars[6]] == 0
    sim.set_streams(3)
    shrunk_at = {k: sim.stats().next_seq[k] for k in cars}
    wait_until(lambda: sim.stats().next_seq[cars[2]] >= shrunk_at[cars[2]] + 20, 20,
               what=f"{cars[2]} still producing")
    final = sim.stop()
    assert final.next_seq[cars[6]] <= shrunk_at[cars[6]] + 1  # stopped (one in flight)

    records = read_all(kafka, topic)
    counts = assert_contiguous(records)
    assert set(counts) == set(cars)
    assert counts[cars[5]] >= 10 and counts[cars[4]] >= 30


def test_messages_follow_the_contract_and_physics(kafka: KafkaSettings, topic: str,
                                                   sims: list[FleetSimulator]) -> None:
    sim = FleetSimulator(kafka, topic, streams=4, rate=200, limit=1200)  # ~6 s of driving
    sims.append(sim)
    run_to_limit(sim)
    records = read_all(kafka, topic)
    assert len(records) == 1200
    types = {f.name: f.type for f in fields(TelemetryMessage)}
    assert tuple(types) == REQUIRED_FIELDS
    for r in records:
        v = r.value
        assert list(v) == list(REQUIRED_FIELDS)
        assert isinstance(v["stream_id"], str) and v["stream_id"] == r.key
        for name in ("seq", "ts", "gear"):
            assert type(v[name]) is int, (name, v[name])
        for name in ("speed_kmh", "rpm", "engine_temp_c", "lat", "lon"):
            assert type(v[name]) is float, (name, v[name])
        TelemetryMessage(**v)
        assert r.timestamp == v["ts"]
        assert r.partition == partition_for(r.key, 6)
        assert v["gear"] == gear_for_speed(v["speed_kmh"])
        assert v["rpm"] == round(rpm_for(v["speed_kmh"], v["gear"]), 1)
        assert 0 <= v["speed_kmh"] <= 180 and -20 < v["engine_temp_c"] < 100
        assert 52.3 < v["lat"] < 52.4 and 4.8 < v["lon"] < 5.0
    per_car: dict[str, list[dict]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.key, r.value["seq"])):
        per_car[r.key].append(r.value)
    for rows in per_car.values():
        for a, b in pairwise(rows):
            dt = (b["ts"] - a["ts"]) / 1000
            assert b["ts"] >= a["ts"]
            assert abs(b["speed_kmh"] - a["speed_kmh"]) <= 3.5 * 3.6 * dt + 0.5
            moved = _distance_m((a["lat"], a["lon"]), (b["lat"], b["lon"]))
            assert moved <= max(a["speed_kmh"], b["speed_kmh"]) / 3.6 * dt + 1.0
        assert rows[-1]["engine_temp_c"] > rows[0]["engine_temp_c"]  # warming up


def test_a_missing_topic_is_refused_before_producing(kafka: KafkaSettings, unique: str) -> None:
    sim = FleetSimulator(kafka, f"missing-{unique}", streams=2)
    with pytest.raises(FleetError, match="does not exist"):
        sim.start()
    assert not sim.running


def test_a_broker_crash_mid_run_neither_loses_nor_duplicates(tmp_path: Path,
                                                             broker_factory) -> None:
    """kill -9 of the broker while producing: the fleet queues, retries after the restart,
    and the idempotent producer writes every seq exactly once, in order."""
    node = broker_factory(tmp_path / "broker")
    node.start()
    sim: FleetSimulator | None = None
    try:
        settings = node.settings
        ensure_input_topic(settings, "crash", partitions=3)
        sim = FleetSimulator(settings, "crash", streams=4, rate=400)
        sim.start()
        wait_until(lambda: sim.stats().delivered >= 400, 30, what="400 delivered")
        assert node.process is not None
        node.process.kill()
        node.stop()
        wait_until(lambda: sim.stats().queued >= 400, 30, what="messages queueing while down")
        assert sim.running
        node.start()
        queued_at_restart = sim.stats().delivered + sim.stats().queued
        wait_until(lambda: sim.stats().delivered >= queued_at_restart, 60,
                   what="the backlog delivered after the restart")
        final = sim.stop()
        assert final.failed == 0
        records = read_all(settings, "crash")
        counts = assert_contiguous(records)
        assert sum(counts.values()) == final.delivered == len(records)
    finally:
        if sim is not None:
            sim.stop()
        node.stop()


# ---- the CLI ---------------------------------------------------------------------------------


def groupscope(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return spawn([sys.executable, "-m", "backend.cli", *args], cwd=REPO, env=env,
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    try:
        yield started
    finally:
        for p in started:
            if p.poll() is None:
                p.kill()
            p.wait(10)


def test_cli_count_creates_the_topic_and_stops(kafka: KafkaSettings, unique: str,
                                               procs: list[subprocess.Popen]) -> None:
    name = f"cli-{unique}"
    p = groupscope("produce", "--bootstrap", kafka.bootstrap, "--topic", name,
                   "--streams", "3", "--rate", "500", "--partitions", "4", "--count", "150")
    procs.append(p)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert f"producing to {name} (4 partitions)" in out
    assert "done: 150 messages delivered" in out
    assert end_offsets(kafka, name) == 150


def test_cli_ctrl_c_flushes_and_exits_cleanly(kafka: KafkaSettings, unique: str,
                                              procs: list[subprocess.Popen]) -> None:
    name = f"cli-{unique}"
    p = groupscope("produce", "--bootstrap", kafka.bootstrap, "--topic", name, "--rate", "300")
    procs.append(p)
    wait_until(lambda: p.poll() is None and end_offsets(kafka, name) >= 200, 30,
               what="the CLI producing")
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert "Traceback" not in err
    summary = next(line for line in out.splitlines() if line.startswith("interrupted:"))
    delivered = int(summary.split()[1])
    assert delivered == end_offsets(kafka, name)  # everything reported is on the broker
    assert_contiguous(read_all(kafka, name))


@pytest.mark.parametrize(("args", "message"), [
    (["--streams", "0"], "--streams: must be above 0, got 0"),
    (["--rate", "fast"], "--rate: not a number: 'fast'"),
    (["--rate", "0"], "--rate: must be above 0, got 0"),
    (["--duration", "-1"], "--duration: must be above 0, got -1"),
])
def test_cli_bad_arguments_are_one_line_errors(args: list[str], message: str,
                                               procs: list[subprocess.Popen]) -> None:
    p = groupscope("produce", *args)
    procs.append(p)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 2
    assert message in err and "Traceback" not in err


def test_cli_unreachable_cluster_is_a_one_line_error(procs: list[subprocess.Popen]) -> None:
    p = groupscope("produce", "--bootstrap", f"127.0.0.1:{free_port()}", "--count", "1")
    procs.append(p)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2
    assert err.strip().count("\n") == 0 and "refused the connection" in err

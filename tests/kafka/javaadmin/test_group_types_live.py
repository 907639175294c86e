"""Share and streams groups made by real clients, read through the reading layer and checked
against Kafka's own tools.

A streams group (KIP-1071) comes from two instances of a Kafka Streams app of ours
(tests/kafka/javaadmin/streams_app/UpperStreams.java, `group.protocol=streams`); a share group
(KIP-932) from two confluent-kafka ShareConsumers. What `KafkaReader.describe` reports of
each must equal what `kafka-share-groups.sh` / `kafka-streams-groups.sh --describe
--members` print (their classes ShareGroupCommand and StreamsGroupCommand, run with
`java -cp`), read while the group holds still. What the pages and the exporter make of them
too: a share group's lag is the one `kafka-share-groups.sh --describe --offsets` prints
(the broker's, KIP-1226) on its snapshot and its overview row, and a streams group's
snapshot carries its group epoch and target-assignment epoch.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from backend.contracts import Snapshot
from backend.kafka.groups import TP, GroupDescription
from backend.kafka.javaadmin.reader import GroupOffsets, KafkaReader
from backend.kafka.settings import KafkaSettings
from backend.netutil import wait_until
from backend.observer.observer import Observer
from backend.observer.overview import OverviewWatcher

if TYPE_CHECKING:
    from tests.kafka.javaadmin.conftest import KafkaTools, StreamsApps

pytestmark = pytest.mark.broker

PARTITIONS = 3
SETTLE_S = 90.0  # a streams group: 3 s initial delay, then 5 s heartbeats to reconcile
AGREE_S = 60.0


def _topics(kafka: KafkaSettings, *names: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient(kafka.client_config())
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    for future in futures.values():
        future.result(30)


def _settled(reader: KafkaReader, group: str, kind: str, members: int,
             also: Callable[[GroupDescription], bool] = lambda d: True,
             timeout: float = SETTLE_S, before: Callable[[], object] = lambda: None
             ) -> GroupDescription:
    """The group's description once it is Stable with `members` members and its members
    have reached the target assignment (epoch == target epoch); the last one seen is in the
    failure otherwise. `before` runs ahead of every look (share consumers poll there)."""
    seen: list[GroupDescription | str] = []

    def check() -> GroupDescription | None:
        before()
        d = reader.describe([group], kind)[group]
        seen[:] = [d]
        if isinstance(d, str):
            return None
        ok = (d.state == "Stable" and len(d.members) == members
              and d.epoch == d.target_epoch and also(d))
        return d if ok else None

    try:
        return wait_until(check, timeout, interval=0.5,
                          what=f"{kind} group {group} Stable with {members} members")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; last described as {seen[0] if seen else None!r}") from None


def _agreeing(read: Callable[[], GroupDescription], tool: Callable[[], str], group: str,
              timeout: float = AGREE_S) -> tuple[GroupDescription, str]:
    """The reader's description and the tool's output taken while the group held still: the
    reader's answers just before and just after the tool's run are equal. Retried only when
    the group moved meanwhile; whether the two agree is for the caller to assert."""

    def attempt() -> tuple[GroupDescription, str] | None:
        first = read()
        out = tool()
        return (first, out) if read() == first else None

    return wait_until(attempt, timeout, interval=0.5,
                      what=f"group {group} to hold still across a describe by Kafka's tool")


def _table(output: str, group: str) -> list[dict[str, str]]:
    """The rows of a group tool's table, column name -> value. Columns are separated by
    spaces; the last (an assignment) may hold spaces, or be empty for a member without one."""
    lines = output.splitlines()
    header = next((i for i, line in enumerate(lines) if line.split()[:1] == ["GROUP"]), None)
    assert header is not None, f"no table header in the tool's output:\n{output}"
    names = lines[header].split()
    rows = []
    for line in lines[header + 1:]:
        fields = line.split(maxsplit=len(names) - 1)
        if fields[:1] == [group]:
            fields += [""] * (len(names) - len(fields))
            rows.append(dict(zip(names, [*fields[:-1], fields[-1].strip()], strict=True)))
    return rows


def _share_assignment(text: str) -> tuple[TP, ...]:
    """ShareGroupCommand's ASSIGNMENT, `topic:0,2;other:1`, as sorted (topic, partition)."""
    out = []
    for part in filter(None, text.split(";")):
        topic, _, partitions = part.rpartition(":")
        out += [(topic, int(p)) for p in partitions.split(",") if p]
    return tuple(sorted(out))


_TASK_KIND = re.compile(r"(TARGET-)?(ACTIVE|STANDBY|WARMUP):((?:\s*[^\s:\[\]]+:\[[\d,]*\];)*)")
_TASK_IDS = re.compile(r"([^\s:\[\]]+):\[([\d,]*)\];")


def _streams_tasks(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """StreamsGroupCommand's ASSIGNMENTS, `ACTIVE: 0:[0,2]; TARGET-ACTIVE: 0:[0,2]; `, as
    sorted (current, target) tasks in the reader's spelling: `0_2 active`."""
    current: list[str] = []
    target: list[str] = []
    for match in _TASK_KIND.finditer(text):
        into = target if match.group(1) else current
        for sub, partitions in _TASK_IDS.findall(match.group(3)):
            into += [f"{sub}_{p} {match.group(2).lower()}" for p in partitions.split(",") if p]
    rest = _TASK_IDS.sub("", _TASK_KIND.sub("", text)).strip()
    assert not rest, f"unparsed ASSIGNMENTS text {rest!r} in {text!r}"
    return tuple(sorted(current)), tuple(sorted(target))


# ---- share groups ----------------------------------------------------------------------


def test_share_group_members_equal_kafkas_share_group_command(
        kafka: KafkaSettings, reader: KafkaReader, kafka_tools: KafkaTools,
        unique: str) -> None:
    topic, group = f"share-tool-{unique}", f"share-tool-{unique}"
    _topics(kafka, topic)
    members = [ShareConsumer(kafka.client_config(**{
        "group.id": group, "client.id": f"share-tool-{i}"})) for i in range(2)]
    producer = Producer(kafka.client_config())
    try:
        for m in members:
            m.subscribe([topic])

        def produce_and_poll() -> None:
            # a share group starts at the log's end: records come while its members poll
            for i in range(12):
                producer.produce(topic, key=f"k{i}", value=b"{}")
            producer.flush(10)
            for m in members:
                m.poll(0.2)  # a batch; implicit acknowledgement on the next poll

        def both_assigned(d: GroupDescription) -> bool:
            covered = {tp for m in d.members for tp in m.assignment}
            return all(m.assignment for m in d.members) and covered == {
                (topic, p) for p in range(PARTITIONS)}

        _settled(reader, group, "share", 2, both_assigned, timeout=60, before=produce_and_poll)
        described, output = _agreeing(lambda: reader.describe([group], "share")[group],
                                      lambda: kafka_tools.share_group_members(group), group)
        rows = _table(output, group)

        assert rows, f"ShareGroupCommand printed no member of {group}:\n{output}"
        tool = sorted((r["CONSUMER-ID"], r["HOST"], r["CLIENT-ID"],
                       _share_assignment(r["ASSIGNMENT"])) for r in rows)
        ours = sorted((m.member_id, m.host, m.client_id, m.assignment)
                      for m in described.members)
        assert ours == tool, f"the reader's members differ from the tool's:\n{output}"
        assert [int(r["#PARTITIONS"]) for r in rows] == [
            len(_share_assignment(r["ASSIGNMENT"])) for r in rows]
        assert {m.client_id for m in described.members} == {"share-tool-0", "share-tool-1"}
    finally:
        for m in members:
            m.close()


def _acquired(consumer: ShareConsumer, timeout: float = 0.5) -> int:
    """One poll of a share consumer: how many records it was given (acquired). The records of
    its previous poll are acknowledged by this one (implicit acknowledgement)."""
    answer = consumer.poll(timeout)
    batch = [answer] if answer is None or hasattr(answer, "error") else list(answer)
    return sum(1 for msg in batch if msg is not None and msg.error() is None)


def test_a_share_groups_lag_on_its_snapshot_and_overview_row_is_what_kafkas_tool_prints(
        kafka: KafkaSettings, reader: KafkaReader, kafka_tools: KafkaTools,
        unique: str) -> None:
    topic, group = f"share-lag-{unique}", f"share-lag-{unique}"
    _topics(kafka, topic, partitions=1)
    tp: TP = (topic, 0)
    holder, acker = (ShareConsumer(kafka.client_config(**{"group.id": group, "client.id": c}))
                     for c in ("share-lag-holder", "share-lag-acker"))
    producer = Producer(kafka.client_config())
    observer = Observer(kafka, group, topic, tail_events=False, read_generation=False,
                        exact_lag=False, sample_every=3600)
    watcher = OverviewWatcher(kafka, lag_time_budget_s=0.0)

    def produce(n: int) -> None:
        for i in range(n):
            producer.produce(topic, key=f"k{i}", value=b"{}")
        producer.flush(10)

    def offsets() -> GroupOffsets:
        got = reader.offsets([group], "share")[group]
        assert not isinstance(got, str), got
        return got

    try:
        for m in (holder, acker):
            m.subscribe([topic])

        def produce_and_poll() -> None:
            produce(12)  # a share group starts at the log's end: records come while it polls
            for m in (holder, acker):
                _acquired(m, 0.2)

        # both members in, and the share partition started (it has a start offset)
        _settled(reader, group, "share", 2,
                 lambda d: all(m.assignment for m in d.members) and tp in offsets().committed,
                 timeout=60, before=produce_and_poll)

        def drained() -> bool:  # polls given nothing more, and all they had acknowledged
            given = _acquired(holder) + _acquired(acker)
            return given == 0 and offsets().lag.get(tp) == 0

        wait_until(drained, 60, interval=0.2, what=f"{group} to acknowledge every record")
        # The holder acquires records and keeps them unacknowledged (it never polls again:
        # a poll acknowledges the records of the one before), then the acker acquires later
        # ones and acknowledges them. The start offset stays at the holder's first record;
        # the acker's, beyond it, are no longer lag: the broker's lag says so, end - start
        # does not.
        produce(10)
        wait_until(lambda: _acquired(holder) > 0, 30, interval=0.1,
                   what="the holder to acquire records")
        produce(10)
        wait_until(lambda: _acquired(acker) > 0, 30, interval=0.1,
                   what="the acker to acquire records")

        def acknowledged_beyond_start() -> bool:
            _acquired(acker, 0.2)  # its acknowledgements go with its next fetch
            got = offsets()
            ends, _starts, _errors = reader.log_offsets([tp])
            lag = got.lag.get(tp)
            return lag is not None and 0 < lag < ends[tp] - got.committed[tp]

        # not polled after: once the holder's acquisition lock times out, the acker would
        # take its records too
        wait_until(acknowledged_beyond_start, 20, interval=0.2,
                   what="the acker's acknowledgements to reach the broker")

        def page_and_row() -> tuple[tuple, tuple]:
            pv = next(pv for pv in observer.poll_once().partitions if pv.partition == 0)
            row = watcher.refresh_once().row(group)
            assert row is not None and row.error is None, row
            part = next(p for p in row.partitions if (p.topic, p.partition) == tp)
            return ((pv.committed, pv.end, pv.lag_messages, pv.lag_reported),
                    (part.committed, part.end, part.lag_messages))

        (page, overview), output = _agreeing(page_and_row,
                                             lambda: kafka_tools.share_group_offsets(group),
                                             group)
        rows = _table(output, group)
        assert [(r["TOPIC"], r["PARTITION"]) for r in rows] == [(topic, "0")], output
        start, lag, end = int(rows[0]["START-OFFSET"]), int(rows[0]["LAG"]), page[1]
        # the page and the overview (so the exporter) show the tool's lag, as the broker's
        assert page == (start, end, lag, True), output
        assert overview == (start, end, lag), output
        assert offsets().lag == {tp: lag}
        assert 0 < lag < end - start, output
    finally:
        watcher.stop()
        observer.stop()
        for m in (holder, acker):
            m.close()


# ---- streams groups --------------------------------------------------------------------


@dataclass(frozen=True)
class StreamsGroup:
    group: str  # the app's application.id
    source: str
    sink: str
    client_ids: tuple[str, ...]  # the instances' client.id


@pytest.fixture(scope="module")
def streams_group(kafka: KafkaSettings, streams_apps: StreamsApps) -> StreamsGroup:
    """Two instances of our Kafka Streams app in one streams group, each RUNNING (stopped
    with the module, by `streams_apps`)."""
    suffix = uuid.uuid4().hex[:8]
    sg = StreamsGroup(f"upper-{suffix}", f"upper-in-{suffix}", f"upper-out-{suffix}",
                      (f"upper-{suffix}-a", f"upper-{suffix}-b"))
    _topics(kafka, sg.source, sg.sink)
    for client_id in sg.client_ids:
        streams_apps.start(sg.group, client_id, sg.source, sg.sink)
    return sg


def test_a_streams_app_is_a_streams_group_with_every_input_partition_a_task(
        kafka: KafkaSettings, reader: KafkaReader, streams_group: StreamsGroup) -> None:
    sg = streams_group
    d = _settled(reader, sg.group, "streams", 2)

    listing = {g.group: g for g in reader.list_groups()}
    assert sg.group in listing, f"{sg.group} not listed: {sorted(listing)}"
    assert (listing[sg.group].type, listing[sg.group].protocol) == ("streams", "streams")

    assert d.protocol == "streams"
    # one stream thread per instance: its consumer's client id is the instance's, extended
    assert sorted(m.client_id for m in d.members) == [
        f"{c}-StreamThread-1-consumer" for c in sg.client_ids]
    assert len({m.member_id for m in d.members}) == 2
    # one subtopology reading the source: a task per input partition, each active once
    active = sorted(t for m in d.members for t in m.tasks if t.endswith(" active"))
    assert active == [f"0_{p} active" for p in range(PARTITIONS)]
    assert all(m.tasks for m in d.members), d.members
    assert not [t for m in d.members for t in m.tasks if not t.endswith(" active")]

    # and it runs: what is produced is processed, written and committed
    producer = Producer(kafka.client_config())
    for i in range(30):
        producer.produce(sg.source, key=f"k{i}", value=f"v{i}".encode())
    producer.flush(10)
    source_tps = [(sg.source, p) for p in range(PARTITIONS)]
    sink_tps = [(sg.sink, p) for p in range(PARTITIONS)]
    ends, _starts, errors = reader.log_offsets(source_tps)
    assert not errors and sum(ends.values()) == 30, (ends, errors)

    def processed() -> bool:
        committed = reader.committed([sg.group], "streams")[sg.group]
        written, _s, _e = reader.log_offsets(sink_tps)
        return committed == ends and sum(written.values()) == 30

    wait_until(processed, 60, interval=0.5,
               what=f"{sg.group} to commit {ends} and write 30 records to {sg.sink}")


def test_streams_group_members_equal_kafkas_streams_group_command(
        reader: KafkaReader, kafka_tools: KafkaTools, streams_group: StreamsGroup) -> None:
    sg = streams_group
    _settled(reader, sg.group, "streams", 2)
    described, output = _agreeing(lambda: reader.describe([sg.group], "streams")[sg.group],
                                  lambda: kafka_tools.streams_group_members(sg.group),
                                  sg.group)
    rows = _table(output, sg.group)

    assert len(rows) == 2, f"StreamsGroupCommand printed {len(rows)} members:\n{output}"
    tool = sorted((r["MEMBER"], r["CLIENT-ID"], _streams_tasks(r["ASSIGNMENTS"])[0])
                  for r in rows)
    ours = sorted((m.member_id, m.client_id, tuple(sorted(m.tasks))) for m in described.members)
    assert ours == tool, f"the reader's members differ from the tool's:\n{output}"
    # the group held still and is Stable: every member is at its target, as the tool says
    assert all(_streams_tasks(r["ASSIGNMENTS"])[0] == _streams_tasks(r["ASSIGNMENTS"])[1]
               for r in rows), output
    assert {r["TARGET-ASSIGNMENT-EPOCH"] for r in rows} == {str(described.target_epoch)}
    assert {r["MEMBER-PROTOCOL"] for r in rows} == {"streams"}


def test_a_streams_groups_snapshot_and_header_carry_its_group_and_target_epochs(
        kafka: KafkaSettings, reader: KafkaReader, streams_group: StreamsGroup) -> None:
    from dashboard.views.live import header_badges

    sg = streams_group
    _settled(reader, sg.group, "streams", 2)
    # as the Live page runs it: the __consumer_offsets tail on, which has nothing to say
    # of a streams group, so both epochs come from the description
    observer = Observer(kafka, sg.group, sg.source, tail_events=False, exact_lag=False,
                        sample_every=3600)
    try:
        def agreeing() -> tuple[GroupDescription, Snapshot] | None:
            before = reader.describe([sg.group], "streams")[sg.group]
            snap = observer.poll_once()
            after = reader.describe([sg.group], "streams")[sg.group]
            return (after, snap) if before == after and snap.error is None else None

        described, snap = wait_until(agreeing, AGREE_S, interval=0.5,
                                     what=f"{sg.group} to hold still across a poll")
        assert isinstance(described, GroupDescription)
        assert snap.protocol == "streams"
        assert described.epoch is not None and described.target_epoch is not None
        assert (snap.generation, snap.target_epoch) == (described.epoch,
                                                        described.target_epoch)
        assert (f"group epoch **{described.epoch}** · target epoch "
                f"**{described.target_epoch}**") in header_badges(snap)
    finally:
        observer.stop()

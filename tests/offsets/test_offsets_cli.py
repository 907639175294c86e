"""`groupscope offsets` against the session's real broker: each target's preview numbers, the
same offsets committed by --execute and read back independently, the Empty rule with a live
member, the no-record rule of --to-datetime, deleting a topic's offsets, and the one-line
refusals (a share group's execute, an unknown group, a topic the group does not read)."""

from __future__ import annotations

import getpass
import json
import time
import uuid
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer

from backend.cli import main
from backend.kafka.javaadmin.reader import KafkaReader
from backend.kafka.settings import KafkaSettings
from backend.netutil import wait_until
from backend.offsets.plan import format_ms
from tests.observer.conftest import create_topic
from tests.observer.seed import seed_groups

RECORDS = {0: 30, 1: 20, 2: 10}  # records per partition of the module's topic
SEEDED = {0: 15, 1: 10, 2: 5}  # what each test's group has committed before it runs
STEP_MS = 1000  # record i of every partition has timestamp base + i * STEP_MS

TP = tuple[str, int]


@pytest.fixture(scope="module")
def records(kafka: KafkaSettings) -> Iterator[tuple[str, int]]:
    """A 3-partition topic whose records have known timestamps: (topic, base ms)."""
    topic = f"offsets-{uuid.uuid4().hex[:8]}"
    create_topic(kafka, topic, len(RECORDS))
    base = int(time.time() * 1000) - 3_600_000  # an hour ago: well within retention
    producer = Producer(kafka.client_config(**{"linger.ms": 5}))
    for partition, count in RECORDS.items():
        for i in range(count):
            producer.produce(topic, value=b"{}", partition=partition,
                             timestamp=base + i * STEP_MS)
    assert producer.flush(30) == 0, "records not delivered"
    yield topic, base


def committed(reader: KafkaReader, group: str) -> dict[TP, int]:
    answer = reader.committed([group])[group]
    assert not isinstance(answer, str), answer
    return answer


def seeded_group(kafka: KafkaSettings, topic: str, offsets: dict[int, int] = SEEDED) -> str:
    group = f"offsets-group-{uuid.uuid4().hex[:8]}"
    seed_groups(kafka, {group: {(topic, p): o for p, o in offsets.items()}})
    return group


def run(capsys: pytest.CaptureFixture[str], kafka: KafkaSettings, *argv: str
        ) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["offsets", *argv, "--bootstrap", kafka.bootstrap])
    out = capsys.readouterr()
    return code, out.out, out.err


def run_json(capsys: pytest.CaptureFixture[str], kafka: KafkaSettings, *argv: str
             ) -> dict[str, Any]:
    code, out, err = run(capsys, kafka, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def by_partition(plan: dict[str, Any], key: str) -> dict[int, Any]:
    return {row["partition"]: row[key] for row in plan["partitions"]}


# each case: the target's options from (base ms), then per partition: new offset, replays,
# skips, and a piece of the note (or "")
CASES: dict[str, tuple[Callable[[int], list[str]], dict[int, tuple[int, int, int, str]]]] = {
    "earliest": (lambda base: ["--to", "earliest"],
                 {0: (0, 15, 0, ""), 1: (0, 10, 0, ""), 2: (0, 5, 0, "")}),
    "latest": (lambda base: ["--to", "latest"],
               {0: (30, 0, 15, ""), 1: (20, 0, 10, ""), 2: (10, 0, 5, "")}),
    "to-offset": (lambda base: ["--to-offset", "25"],
                  {0: (25, 0, 10, ""), 1: (20, 0, 10, "25 is past the log end: clamped to 20"),
                   2: (10, 0, 5, "25 is past the log end: clamped to 10")}),
    "shift-back": (lambda base: ["--shift-by", "-12"],
                   {0: (3, 12, 0, ""),
                    1: (0, 10, 0, "10-12 = -2 is before the log start: clamped to 0"),
                    2: (0, 5, 0, "5-12 = -7 is before the log start: clamped to 0")}),
    "shift-forward": (lambda base: ["--shift-by", "8"],
                      {0: (23, 0, 8, ""), 1: (18, 0, 8, ""),
                       2: (10, 0, 5, "5+8 = 13 is past the log end: clamped to 10")}),
    "datetime": (lambda base: ["--to-datetime", format_ms(base + 7 * STEP_MS)],
                 {0: (7, 8, 0, ""), 1: (7, 3, 0, ""), 2: (7, 0, 2, "")}),
    "datetime-before-every-record": (
        lambda base: ["--to-datetime", format_ms(base - 60_000)],
        {0: (0, 15, 0, ""), 1: (0, 10, 0, ""), 2: (0, 5, 0, "")}),
    "datetime-after-the-last-record": (
        lambda base: ["--to-datetime", format_ms(base + 40 * STEP_MS)],
        {0: (30, 0, 15, "no record at or after"), 1: (20, 0, 10, "no record at or after"),
         2: (10, 0, 5, "no record at or after")}),
}


@pytest.mark.timeout(180)
@pytest.mark.parametrize("case", list(CASES))
def test_each_target_previews_then_commits_exactly_the_previewed_offsets(
        kafka: KafkaSettings, records: tuple[str, int], reader: KafkaReader,
        capsys: pytest.CaptureFixture[str], case: str) -> None:
    topic, base = records
    options, expected = CASES[case]
    group = seeded_group(kafka, topic)
    before = committed(reader, group)

    preview = run_json(capsys, kafka, "reset", "--group", group, *options(base))
    assert preview["executed"] is False
    assert by_partition(preview, "committed") == SEEDED
    assert by_partition(preview, "log_start") == dict.fromkeys(RECORDS, 0)
    assert by_partition(preview, "log_end") == RECORDS
    assert by_partition(preview, "new") == {p: e[0] for p, e in expected.items()}
    assert by_partition(preview, "replays") == {p: e[1] for p, e in expected.items()}
    assert by_partition(preview, "skips") == {p: e[2] for p, e in expected.items()}
    for p, (_new, _r, _s, note) in expected.items():
        assert note in (by_partition(preview, "note")[p] or ""), p
    assert preview["totals"]["replays"] == sum(e[1] for e in expected.values())
    assert preview["totals"]["skips"] == sum(e[2] for e in expected.values())
    assert committed(reader, group) == before, "a preview changed the committed offsets"

    applied = run_json(capsys, kafka, "reset", "--group", group, *options(base), "--execute")
    assert applied["executed"] is True and applied["matches_plan"] is True
    assert applied["partitions"] == preview["partitions"]  # the same plan, applied
    planned = {(topic, p): e[0] for p, e in expected.items()}
    assert committed(reader, group) == planned
    assert {(topic, r["partition"]): r["committed"] for r in applied["read_back"]} == planned


@pytest.mark.timeout(180)
def test_the_preview_is_the_result_on_compacted_and_transactional_topics_too(
        kafka: KafkaSettings, reader: KafkaReader, capsys: pytest.CaptureFixture[str]) -> None:
    """One group over three topics: plain, compacted (`cleanup.policy=compact`, keys
    repeating) and transactional (two committed transactions a partition, so the log holds
    control records between the data). For every kind of target the committed offsets after
    --execute are exactly the previewed ones, partition by partition."""
    from confluent_kafka.admin import AdminClient, NewTopic

    suffix = uuid.uuid4().hex[:8]
    plain, compacted, txn = (f"offsets-{kind}-{suffix}" for kind in ("plain", "compact", "txn"))
    admin = AdminClient(kafka.client_config())
    for name, config in ((plain, {}), (compacted, {"cleanup.policy": "compact"}), (txn, {})):
        admin.create_topics([NewTopic(name, 2, 1, config=config)])[name].result(30)
    base = int(time.time() * 1000) - 3_600_000
    producer = Producer(kafka.client_config(**{"linger.ms": 5}))
    for topic in (plain, compacted):
        for p in range(2):
            for i in range(20):
                producer.produce(topic, key=f"k{i % 5}".encode(), value=b"{}", partition=p,
                                 timestamp=base + i * STEP_MS)
    assert producer.flush(30) == 0
    transactional = Producer(kafka.client_config(**{"transactional.id": f"t-{suffix}"}))
    transactional.init_transactions(30)
    for half in (0, 10):
        transactional.begin_transaction()
        for p in range(2):
            for i in range(half, half + 10):
                transactional.produce(txn, value=b"{}", partition=p,
                                      timestamp=base + i * STEP_MS)
        transactional.commit_transaction(30)
    group = f"offsets-group-{suffix}"
    seed_groups(kafka, {group: {(t, p): 5 for t in (plain, compacted, txn) for p in range(2)}})

    for target in (["--to", "earliest"], ["--to", "latest"], ["--to-offset", "7"],
                   ["--shift-by", "3"], ["--to-datetime", format_ms(base + 12 * STEP_MS)]):
        preview = run_json(capsys, kafka, "reset", "--group", group, *target)
        assert {r["topic"] for r in preview["partitions"]} == {plain, compacted, txn}
        applied = run_json(capsys, kafka, "reset", "--group", group, *target, "--execute")
        assert applied["matches_plan"] is True, target
        assert applied["partitions"] == preview["partitions"], target
        assert committed(reader, group) == {(r["topic"], r["partition"]): r["new"]
                                            for r in preview["partitions"]}, target
    # the transactional topic's log end counts its control records: 20 records, 22 offsets
    latest = run_json(capsys, kafka, "reset", "--group", group, "--to", "latest")
    assert {r["log_end"] for r in latest["partitions"] if r["topic"] == txn} == {22}


@pytest.mark.timeout(120)
def test_execute_logs_every_change_and_prints_the_offsets_read_back(
        kafka: KafkaSettings, records: tuple[str, int], reader: KafkaReader,
        capsys: pytest.CaptureFixture[str]) -> None:
    topic, _base = records
    group = seeded_group(kafka, topic)
    code, out, err = run(capsys, kafka, "reset", "--group", group, "--topic", f"{topic}:0,2",
                         "--to", "earliest", "--execute")
    assert code == 0, err
    assert committed(reader, group) == {(topic, 0): 0, (topic, 1): 10, (topic, 2): 0}
    assert err.splitlines() == [
        f"groupscope offsets: reset group {group} {topic}-0: 15 → 0",
        f"groupscope offsets: reset group {group} {topic}-2: 5 → 0",
        f"groupscope offsets: reset group {group} on {kafka.bootstrap} (external, PLAINTEXT): "
        "2 partitions of 1 topic, 2 changed: replayed 20 records, skipped 0"]
    assert "committed offsets read back:" in out
    assert "every applied offset reads back as previewed" in out

    # kept in the memory's audit, as the OS user, and shown by `groupscope history --audit`
    capsys.readouterr()
    assert main(["history", "--audit", "--group", group, "--json"]) == 0
    (kept,) = json.loads(capsys.readouterr().out)
    assert (kept["user"], kept["via"], kept["group"], kept["action"]) == (
        getpass.getuser(), "offsets command", group, "reset")
    assert kept["changes"] == [f"{topic}-0: 15 → 0", f"{topic}-2: 5 → 0"]
    assert kept["cluster"] == f"{kafka.bootstrap} (external, PLAINTEXT)" and not kept["refused"]
    assert main(["history", "--audit", "--since", "7d"]) == 0  # the guide's line: every group
    text = capsys.readouterr().out
    assert f"{getpass.getuser()} via offsets command: reset group {group} on " in text
    assert f"    {topic}-2: 5 → 0" in text


@pytest.mark.timeout(120)
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_group_with_a_live_member_is_refused_in_one_line_and_keeps_its_offsets(
        kafka: KafkaSettings, records: tuple[str, int], reader: KafkaReader,
        capsys: pytest.CaptureFixture[str], protocol: str) -> None:
    topic, _base = records
    group = seeded_group(kafka, topic)
    before = committed(reader, group)
    member = Consumer(kafka.client_config(**{
        "group.id": group, "group.protocol": protocol, "enable.auto.commit": False,
        "auto.offset.reset": "latest"}))
    try:
        member.subscribe([topic])

        def stable() -> bool:
            member.poll(0.2)
            described = reader.describe([group])[group]
            return not isinstance(described, str) and described.state == "Stable" \
                and len(described.members) == 1

        wait_until(stable, timeout=60, what=f"{group} Stable with its one member")
        code, out, err = run(capsys, kafka, "reset", "--group", group, "--to", "earliest",
                             "--execute")
        assert code == 2
        assert out == ""
        assert err.strip() == (f"groupscope offsets: group {group} is Stable with 1 member: "
                               "stop its members first (Kafka takes offsets from outside a "
                               "group only while it is Empty); nothing changed")
        assert committed(reader, group) == before
    finally:
        member.close()


@pytest.mark.timeout(120)
def test_delete_is_previewed_then_executed_through_kafkas_java_admin(
        kafka: KafkaSettings, records: tuple[str, int], reader: KafkaReader,
        capsys: pytest.CaptureFixture[str]) -> None:
    topic, _base = records
    other = f"offsets-other-{uuid.uuid4().hex[:8]}"
    create_topic(kafka, other, 1)
    group = f"offsets-group-{uuid.uuid4().hex[:8]}"
    seed_groups(kafka, {group: {**{(topic, p): o for p, o in SEEDED.items()},
                                (other, 0): 0}})

    preview = run_json(capsys, kafka, "delete", "--group", group, "--topic", topic)
    assert preview["action"] == "delete" and preview["executed"] is False
    assert by_partition(preview, "committed") == SEEDED
    assert by_partition(preview, "new") == dict.fromkeys(SEEDED)
    assert by_partition(preview, "note")[0] == ("then auto.offset.reset decides: earliest "
                                                "replays 15, latest skips 15")
    assert len(committed(reader, group)) == 4, "a preview deleted offsets"

    code, out, err = run(capsys, kafka, "delete", "--group", group, "--topic", topic,
                         "--execute")
    assert code == 0, err
    assert "every applied offset reads back as previewed" in out
    # the topic's offsets are gone, the other topic's kept
    assert committed(reader, group) == {(other, 0): 0}
    for p, before in SEEDED.items():
        assert f"delete group {group} {topic}-{p}: {before} → deleted" in err


@pytest.mark.timeout(120)
def test_bad_input_is_one_line_naming_what_to_fix(
        kafka: KafkaSettings, records: tuple[str, int],
        capsys: pytest.CaptureFixture[str]) -> None:
    topic, _base = records
    group = seeded_group(kafka, topic)
    cases = [
        (["reset", "--group", f"nobody-{uuid.uuid4().hex[:8]}", "--to", "earliest"],
         "has no committed offsets on " + kafka.bootstrap),
        (["reset", "--group", group, "--to", "earliest", "--to-offset", "3"],
         "give exactly one target"),
        (["reset", "--group", group, "--to", "earliest", "--topic", f"{topic}:7"],
         f"topic {topic} has partitions 0-2, not 7"),
        (["reset", "--group", group, "--to-datetime", "last tuesday"], "neither ISO 8601"),
    ]
    for argv, message in cases:
        code, out, err = run(capsys, kafka, *argv)
        assert code == 2, argv
        assert out == "", argv
        assert err.startswith("groupscope offsets: ") and message in err, err
        assert err.count("\n") == 1, err


@pytest.mark.timeout(150)
def test_a_share_groups_start_offsets_are_previewed_and_reset_when_it_is_empty(
        kafka: KafkaSettings, reader: KafkaReader,
        capsys: pytest.CaptureFixture[str]) -> None:
    topic, group = f"offsets-shared-{uuid.uuid4().hex[:8]}", f"share-{uuid.uuid4().hex[:8]}"
    create_topic(kafka, topic, 1)
    producer = Producer(kafka.client_config())
    consumer = ShareConsumer(kafka.client_config(**{"group.id": group}))
    try:
        consumer.subscribe([topic])

        def started() -> bool:
            # a share group starts at the log end: records produced while its member polls
            producer.produce(topic, value=b"{}")
            producer.flush(10)
            consumer.poll(0.5)
            answer = reader.committed([group], "share").get(group)
            return isinstance(answer, dict) and bool(answer)

        wait_until(started, timeout=90, what=f"share group {group} to have a start offset")
    finally:
        consumer.close()
    start = reader.committed([group], "share")[group]
    assert isinstance(start, dict)

    preview = run_json(capsys, kafka, "reset", "--group", group, "--to", "earliest")
    assert preview["group_type"] == "share"
    assert by_partition(preview, "committed") == {0: start[(topic, 0)]}
    assert by_partition(preview, "new") == {0: 0}

    assert reader.committed([group], "share")[group] == start, "a preview moved it"

    # the member has left: the group is Empty, and Kafka's Java Admin sets the start offset
    def empty() -> bool:
        listed = {g.group: g.state for g in reader.listing()[0]}
        return listed.get(group) == "Empty"

    wait_until(empty, timeout=60, what=f"share group {group} Empty")
    code, out, err = run(capsys, kafka, "reset", "--group", group, "--to", "earliest",
                         "--execute")
    assert code == 0, err
    assert "every applied offset reads back as previewed" in out
    assert reader.committed([group], "share")[group] == {(topic, 0): 0}
    assert f"reset group {group} {topic}-0: {start[(topic, 0)]} → 0" in err


# ---- without a broker: the refusals by group type, and a read-back that differs --------------

@pytest.mark.parametrize(("group_type", "action", "executing", "message"), [
    ("streams", "reset", False, "group s is a streams group: reset its offsets with Kafka's "
                                "kafka-streams-groups --reset-offsets; nothing changed"),
    ("streams", "delete", True, "group s is a streams group: delete its offsets with Kafka's "
                                "kafka-streams-groups --delete-offsets; nothing changed"),
    ("share", "delete", False, "group s is a share group: its start offsets are deleted per "
                               "topic with Kafka's kafka-share-groups --delete-offsets; "
                               "nothing changed"),
])
def test_group_types_groupscope_does_not_change_are_refused_in_one_line(
        group_type: str, action: str, executing: bool, message: str) -> None:
    from backend.cli_common import UserError
    from backend.offsets.reset import refuse_other_types

    group = SimpleNamespace(name="s", type=group_type)
    with pytest.raises(UserError) as err:
        refuse_other_types(group, action, executing)  # type: ignore[arg-type]
    assert str(err.value) == message


def test_a_share_group_preview_and_a_consumer_group_pass_the_type_check() -> None:
    from backend.offsets.reset import refuse_other_types

    for executing in (False, True):
        refuse_other_types(SimpleNamespace(name="s", type="share"), "reset",  # type: ignore[arg-type]
                           executing)
    for kind in ("classic", "consumer"):
        refuse_other_types(SimpleNamespace(name="c", type=kind), "reset", True)  # type: ignore[arg-type]


def test_offsets_that_read_back_otherwise_fail_loudly(
        capsys: pytest.CaptureFixture[str]) -> None:
    from backend.offsets.cli import EXIT_FAILED, _log_applied, _report
    from backend.offsets.plan import Extent, Target, plan_reset

    committed = {("t", 0): 10, ("t", 1): 10, ("t", 2): 10}
    plan = plan_reset("g", Target("earliest"), sorted(committed), committed,
                      dict.fromkeys(committed, Extent(0, 20)))
    refused = {("t", 2): "UNKNOWN_MEMBER_ID: Broker: Unknown member (the group is no longer "
                         "Empty: stop its members first)"}
    applied = _log_applied(plan, "k:9092", refused)
    code = _report(plan, applied, "k:9092", False, refused,
                   {("t", 0): 0, ("t", 1): 10, ("t", 2): 10})
    out, err = capsys.readouterr()
    assert code == EXIT_FAILED
    assert err.splitlines() == [
        "groupscope offsets: reset group g t-0: 10 → 0",
        "groupscope offsets: reset group g t-1: 10 → 0",
        "groupscope offsets: reset group g on k:9092: 2 partitions of 1 topic, 2 changed: "
        "replayed 20 records, skipped 0",
        f"groupscope offsets: t-2 was NOT changed: {refused[('t', 2)]}",
        "groupscope offsets: READ BACK DIFFERS: t-1: expected 0, the group has 10",
        "groupscope offsets: reset of group g did not complete: 1 refused, "
        "1 read back differently"]
    assert "NOT APPLIED in 1 partition" in out
    assert "DIFFERS FROM THE PREVIEW in 1 partition" in out

"""Least privilege: the cluster overview, `groupscope groups`, the exporter and its alerts,
as a principal that may only look.

The SASL + ACL broker is test_acl_observer.py's. The `watcher` principal holds DESCRIBE on
the cluster and on two groups, READ + DESCRIBE on their topic, nothing else; it reaches the
broker through a client.properties file. Three groups share the topic:

- live: one real member (as the admin), seeded commits it never advances, so a known lag;
- empty: seeded commits and no member, so Empty with a known lag (the alert's target);
- denied: seeded commits, but the watcher may not describe it.

Proven with that principal: the in-process OverviewWatcher, `groupscope groups --json` and
`groupscope exporter --alerts` (a real process scraped over HTTP, its webhook posting to a
loopback receiver) report the exact lag of what they may describe and an ERR row for the
rest, and survive cycle after cycle of that refusal (librdkafka 2.16 aborts the process on an
admin OffsetFetch that meets an authorization error; the collector fetches offsets only after
a successful describe). Nothing they do writes: the broker's authorizer logs every denied
request of `User:watcher` (kafka.authorizer.logger, INFO, into broker.log, as the embedded
broker is configured), and during their runs it logs DESCRIBE refusals only -- no WRITE, no
READ of a group (join, commit), no ALTER, CREATE, DELETE or IDEMPOTENT_WRITE. A last test
shows that log does catch a write attempt, so silence there means something. The password is
in no output, log, scrape or webhook body.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from backend.contracts.overview import ERR, GROUP_ROWS_JSON, OVERVIEW_JSON, GroupRow, Overview
from backend.kafka.settings import KafkaSettings, resolve_settings
from backend.netutil import free_port, port_open, wait_until
from backend.observer.overview import OverviewWatcher
from backend.proc import STOP_WITHIN_S, abort_if_exited
from tests.alerts.conftest import Receiver, receiver
from tests.exporter.conftest import groupscope, parse, value
from tests.kafka_security import SecureBroker
from tests.observer.conftest import Members, create_topic
from tests.observer.seed import seed_groups
from tests.observer.test_acl_observer import PASSWORDS, grant_watcher, secure_broker

__all__ = ["groupscope", "receiver", "secure_broker"]  # fixtures reused from other suites

PRINCIPAL = "User:watcher"
RECORDS = (10, 15)  # records in partitions 0 and 1 of the shared topic
LIVE_COMMITS = (2, 4)  # lag (10-2) + (15-4) = 19
EMPTY_COMMITS = (7, 12)  # lag (10-7) + (15-12) = 6
LIVE_LAG, EMPTY_LAG = 19, 6
# the operations a look-only client may be refused: anything else is an attempt to change
READ_ONLY_OPERATIONS = frozenset({"DESCRIBE", "DESCRIBE_CONFIGS"})
DENIAL = re.compile(r"Principal = (?P<principal>\S+) is Denied operation = (?P<operation>\w+) "
                    r"from host = \S+ on resource = (?P<resource>\S+) "
                    r"for request = (?P<request>\w+)")


# ---- the broker's own record of what it refused -------------------------------------------

@dataclass(frozen=True)
class Denial:
    principal: str
    operation: str
    resource: str  # e.g. Group:LITERAL:name, Topic:LITERAL:name
    request: str  # e.g. Produce, OffsetCommit, FindCoordinator


class AuthorizerLog:
    """The authorizer's denials written to broker.log from the moment this is made on.

    StandardAuthorizer logs a refusal at INFO on `kafka.authorizer.logger`; the embedded
    broker's log4j config keeps `kafka.*` at INFO in broker.log, so no change is needed and
    the file holds the broker's verdict on every request a client sent, whoever logs what.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.start = path.stat().st_size

    def denials(self, principal: str = PRINCIPAL) -> list[Denial]:
        with open(self.path, "rb") as f:
            f.seek(self.start)
            text = f.read().decode(errors="replace")
        found = (Denial(**m.groupdict()) for m in DENIAL.finditer(text))
        return [d for d in found if d.principal == principal]


def writes(denials: list[Denial]) -> list[Denial]:
    return [d for d in denials if d.operation not in READ_ONLY_OPERATIONS]


def assert_read_only(log: AuthorizerLog, denied_group: str) -> None:
    """Only DESCRIBE-type refusals, including the denied group's (so the window saw the
    run), and never an OffsetFetch for it (offsets only after a successful describe)."""
    denials = log.denials()
    assert writes(denials) == [], writes(denials)
    assert any(d.operation == "DESCRIBE" and d.resource == f"Group:LITERAL:{denied_group}"
               for d in denials), denials
    assert not any(d.request == "OffsetFetch" for d in denials), denials


# ---- the scene --------------------------------------------------------------------------

@dataclass(frozen=True)
class Scene:
    broker: SecureBroker
    topic: str
    live: str
    empty: str
    denied: str
    properties: Path  # the watcher's client.properties
    watcher: KafkaSettings

    @property
    def groups(self) -> set[str]:
        return {self.live, self.empty, self.denied}


def _produce_exactly(settings: KafkaSettings, topic: str) -> None:
    producer = Producer(settings.client_config())
    for partition, n in enumerate(RECORDS):
        for i in range(n):
            producer.produce(topic, key=f"car-{i:02d}", value=b"%d" % i, partition=partition)
    assert producer.flush(30) == 0


def _stable_with_one_member(admin: AdminClient, group: str) -> bool:
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    return (desc.state.name == "STABLE" and len(desc.members) == 1
            and len(desc.members[0].assignment.topic_partitions) == len(RECORDS))


@pytest.fixture(scope="module")
def scene(secure_broker: SecureBroker,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    admin_settings = secure_broker.settings
    u = uuid.uuid4().hex[:8]
    topic = f"ov-lp-{u}"
    live, empty, denied = f"ov-lp-live-{u}", f"ov-lp-empty-{u}", f"ov-lp-denied-{u}"
    create_topic(admin_settings, topic, len(RECORDS))
    _produce_exactly(admin_settings, topic)
    commits = {g: {(topic, p): o for p, o in enumerate(offsets)}
               for g, offsets in ((live, LIVE_COMMITS), (empty, EMPTY_COMMITS),
                                  (denied, (1, 1)))}
    seed_groups(admin_settings, commits)  # retries while a fresh broker's coordinator loads
    admin = AdminClient(admin_settings.client_config())
    grant_watcher(admin, live, topic)
    grant_watcher(admin, empty, topic)

    path = tmp_path_factory.mktemp("watcher") / "client.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                    f"sasl.username=watcher\nsasl.password={PASSWORDS['watcher']}\n")
    # the live member reads everything and never commits: its lag stays the seeded one
    members = Members(admin_settings, live, topic, "classic", "range",
                      extra={**admin_settings.client_config(), "enable.auto.commit": False})
    try:
        members.start("lp-a")
        wait_until(lambda: _stable_with_one_member(admin, live), timeout=45, interval=0.3,
                   what="the live group Stable with its member")
        yield Scene(secure_broker, topic, live, empty, denied, path,
                    resolve_settings(admin_settings.bootstrap, str(path)))
    finally:
        members.stop_all()


def assert_rows(scene: Scene, rows: tuple[GroupRow, ...] | list[GroupRow]) -> None:
    """The exact numbers of the two describable groups and the denied group's ERR row."""
    by = {r.group: r for r in rows}
    assert set(by) == scene.groups  # the cluster DESCRIBE right lists every group

    live = by[scene.live]
    assert (live.state, live.protocol, live.members, live.error) == ("Stable", "classic", 1, None)
    assert live.lag_messages == LIVE_LAG
    assert sorted((p.partition, p.committed, p.end, p.lag_messages, p.owner)
                  for p in live.partitions) == [
        (p, c, e, e - c, "lp-a") for p, (c, e) in enumerate(zip(LIVE_COMMITS, RECORDS,
                                                                 strict=True))]

    empty = by[scene.empty]
    assert (empty.state, empty.members, empty.error) == ("Empty", 0, None)
    assert empty.lag_messages == EMPTY_LAG
    assert sorted((p.partition, p.committed, p.end, p.owner) for p in empty.partitions) == [
        (p, c, e, None) for p, (c, e) in enumerate(zip(EMPTY_COMMITS, RECORDS, strict=True))]

    bad = by[scene.denied]
    assert bad.health == ERR and bad.error is not None and "\n" not in bad.error
    assert "GROUP_AUTHORIZATION_FAILED" in bad.error, bad.error
    assert (bad.lag_messages, bad.partitions, bad.members) == (None, (), 0)


def assert_no_secret(*texts: str) -> None:
    everything = "\n".join(texts)
    for pw in PASSWORDS.values():
        assert pw not in everything


# ---- 1. the overview watcher, in process ------------------------------------------------

def _complete(watcher: OverviewWatcher, scene: Scene, cycles: int) -> Overview | None:
    ov = watcher.latest()
    if ov is None or ov.error or len(ov.history) < cycles:
        return None
    rows = {r.group: r for r in ov.rows}
    empty = rows.get(scene.empty)
    if set(rows) != scene.groups or any(r.pending for r in rows.values()):
        return None
    if empty is None or empty.max_lag_seconds is None:  # record timestamps read too
        return None
    return ov


def _watcher_cluster_describe(allow: bool) -> AclBinding | AclBindingFilter:
    kind = AclBinding if allow else AclBindingFilter
    return kind(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, PRINCIPAL,
                "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)


@pytest.mark.timeout(90)
def test_overview_as_watcher_reads_what_it_may_and_errs_on_the_rest_without_writing(
        scene: Scene, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    log = AuthorizerLog(scene.broker.log_file)
    watcher = OverviewWatcher(scene.watcher, interval=0.5)
    try:
        watcher.start()
        # three complete cycles, each refused the denied group: the process outlives them
        ov = wait_until(lambda: _complete(watcher, scene, cycles=3), timeout=45, interval=0.2,
                        what="three complete overview cycles as the watcher")
        assert_rows(scene, ov.rows)
        assert ov.error is None and ov.listed == 3
        assert ov.history[-1].errors == 1  # the denied group, and only it
        empty = ov.row(scene.empty)
        assert empty is not None and empty.max_lag_seconds is not None
        assert 0 <= empty.max_lag_seconds < 600
        first = ov.taken_ms
        later = wait_until(lambda: (o := watcher.latest()) and len(o.history) > len(ov.history)
                           and o.taken_ms > first and o, timeout=15, what="one more cycle")
        assert later.row(scene.denied).health == ERR
        texts = [OVERVIEW_JSON.dump_json(later).decode()]
    finally:
        watcher.stop()
    assert_read_only(log, scene.denied)

    # without DESCRIBE on the cluster the broker lists only the groups the principal may
    # describe: the denied group is then simply absent, not an error
    admin = AdminClient(scene.broker.settings.client_config())
    for fut in admin.delete_acls([_watcher_cluster_describe(False)]).values():
        fut.result(30)
    narrow = OverviewWatcher(scene.watcher)
    try:
        def listed_without_denied():
            o = narrow.refresh_once()
            return o if o.error is None and {r.group for r in o.rows} == \
                {scene.live, scene.empty} else None

        o = wait_until(listed_without_denied, timeout=30, interval=0.5,
                       what="a listing without the denied group")
        assert o.listed == 2 and all(r.error is None for r in o.rows)
        assert o.row(scene.empty).lag_messages == EMPTY_LAG
        texts.append(OVERVIEW_JSON.dump_json(o).decode())
    finally:
        narrow.stop()
        for fut in admin.create_acls([_watcher_cluster_describe(True)]).values():
            fut.result(30)
    # back as the other tests expect it: every group listed again
    again = OverviewWatcher(scene.watcher)
    try:
        wait_until(lambda: len(again.collector.list_groups()) == 3, timeout=30, interval=0.5,
                   what="the cluster DESCRIBE right back")
    finally:
        again.stop()
    assert writes(log.denials()) == []
    out, err = capfd.readouterr()
    assert_no_secret(*texts, caplog.text, out, err)


# ---- 2. `groupscope groups` and `groupscope exporter --alerts`, as processes ---------------

def _alerts_file(path: Path, url: str) -> Path:
    path.write_text('[[rule]]\nname = "nobody consumes"\nkind = "empty_lag"\nfor = "0s"\n\n'
                    f'[[sink]]\ntype = "webhook"\nurl = "{url}"\n')
    return path


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert resp.status == 200
        return resp.read().decode()


@pytest.mark.timeout(120)
def test_groups_and_exporter_with_alerts_as_watcher_are_exact_and_read_only(
        scene: Scene, groupscope, receiver: Receiver, tmp_path: Path) -> None:
    cluster = ["--bootstrap", scene.watcher.bootstrap, "--kafka-config", str(scene.properties)]
    log = AuthorizerLog(scene.broker.log_file)

    groups = groupscope("groups", *cluster, "--json")
    assert groups.proc.wait(60) == 0, groups.stderr()  # an abort would be -6 (SIGABRT)
    rows = GROUP_ROWS_JSON.validate_json(groups.stdout())
    assert_rows(scene, rows)

    port = free_port()
    rules = _alerts_file(tmp_path / "alerts.toml", receiver.url)
    exporter = groupscope("exporter", *cluster, "--port", str(port), "--interval", "1",
                          "--alerts", str(rules))
    wait_until(lambda: port_open("127.0.0.1", port), timeout=30, what="the metrics port",
               abort=abort_if_exited(exporter.proc, "groupscope exporter",
                                     lambda: f": {exporter.stderr()}"))
    c, topic = scene.watcher.bootstrap, scene.topic

    def exported() -> tuple[str, dict] | None:
        body = _scrape(port)
        s = parse(body)
        ok = (value(s, "groupscope_group_lag_messages", cluster=c, group=scene.live,
                    topic=topic) == LIVE_LAG
              and value(s, "groupscope_group_lag_messages", cluster=c, group=scene.empty,
                        topic=topic) == EMPTY_LAG
              and value(s, "groupscope_group_health", cluster=c, group=scene.denied,
                        groupscope_group_health=ERR) == 1
              and receiver.bodies)
        return (body, s) if ok else None

    body, s = wait_until(exported, timeout=45, interval=0.5,
                         what="every group exported and the alert posted",
                         abort=abort_if_exited(exporter.proc, "groupscope exporter",
                                               lambda: f": {exporter.stderr()}"))
    assert value(s, "groupscope_group_members", cluster=c, group=scene.live) == 1
    assert value(s, "groupscope_group_members", cluster=c, group=scene.empty) == 0
    assert value(s, "groupscope_group_state", cluster=c, group=scene.empty,
                 groupscope_group_state="Empty") == 1
    assert value(s, "groupscope_exporter_groups_listed", cluster=c) == 3
    assert value(s, "groupscope_exporter_cluster_up", cluster=c) == 1
    # no lag series for a group it could not describe
    assert not [k for k in s if k[0] == "groupscope_group_lag_messages"
                and ("group", scene.denied) in k[1]]

    # the exporter keeps cycling through the refusals: the last success moves on
    last = value(s, "groupscope_exporter_last_success_timestamp_seconds", cluster=c)
    wait_until(lambda: value(parse(_scrape(port)),
                             "groupscope_exporter_last_success_timestamp_seconds",
                             cluster=c) > last,
               timeout=15, interval=0.5, what="another successful cycle")
    exporter.proc.send_signal(signal.SIGTERM)
    assert exporter.proc.wait(STOP_WITHIN_S + 5) == 0, exporter.stderr()

    # the alert: the Empty group with lag, and nothing for the live or the denied group
    posted = receiver.bodies
    assert posted and all(scene.empty in b["text"] for b in posted), posted
    assert posted[0]["text"].startswith("FIRING nobody consumes:")
    assert f"{EMPTY_LAG:,} messages of lag" in posted[0]["text"]
    assert not any(scene.live in b["text"] or scene.denied in b["text"] for b in posted)
    assert_read_only(log, scene.denied)

    outputs = [groups.stdout(), groups.stderr(), exporter.stdout(), exporter.stderr()]
    assert_no_secret(*outputs, body, json.dumps(posted))
    token = receiver.url.rsplit("/", 1)[1]  # the webhook URL is a secret too
    assert all(token not in text for text in outputs)


# ---- 3. the log above would have caught a write ---------------------------------------------

@pytest.mark.timeout(60)
def test_the_authorizer_log_catches_a_write_by_the_watcher(scene: Scene) -> None:
    """The control for the two tests above: as the same principal, a produce and an offset
    commit are refused by the broker and show up as WRITE / READ-on-group denials."""
    log = AuthorizerLog(scene.broker.log_file)
    producer = Producer(scene.watcher.client_config(**{"message.timeout.ms": 10_000}))
    errors: list[object] = []
    producer.produce(scene.topic, b"x", partition=0, on_delivery=lambda e, _m: errors.append(e))
    producer.flush(15)
    assert errors and errors[0] is not None and "TOPIC_AUTHORIZATION" in str(errors[0])

    consumer = Consumer(scene.watcher.client_config(
        **{"group.id": scene.empty, "enable.auto.commit": False}))
    try:
        with pytest.raises(KafkaException, match="GROUP_AUTHORIZATION_FAILED"):
            consumer.commit(offsets=[TopicPartition(scene.topic, 0, 9)], asynchronous=False)
    finally:
        consumer.close()

    found = wait_until(lambda: (w := writes(log.denials())) and len(w) >= 2 and w,
                       timeout=10, what="the refused writes in the authorizer log")
    seen = {(d.operation, d.resource, d.request) for d in found}
    assert ("WRITE", f"Topic:LITERAL:{scene.topic}", "Produce") in seen
    assert ("READ", f"Group:LITERAL:{scene.empty}", "OffsetCommit") in seen

"""An observer with least privilege on a SASL + ACL broker works fully and leaks nothing.

The broker enforces ACLs (StandardAuthorizer). The `watcher` principal gets only DESCRIBE on
the cluster and the group and READ + DESCRIBE on the topic; with a client.properties file
for it (SCRAM-SHA-256 and PLAIN), the observer still sees members, offsets, lag and sampled
keys -- and its logs, errors and snapshots never contain the password.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from backend.contracts import SNAPSHOT_JSON
from backend.kafka.settings import resolve_settings
from backend.netutil import free_port, wait_until
from backend.observer.observer import Observer
from tests.kafka_security import SecureBroker
from tests.observer.conftest import Members, SteadyProducer, create_topic

PASSWORDS = {"admin": "adm1n-S3cret-xyz", "watcher": "w4tcher-S3cret-qrs"}
PARTITIONS = 4


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    node = SecureBroker(tmp_path_factory.mktemp("secure-broker"), port=free_port(),
                          sasl_users=dict(PASSWORDS))
    node.start()
    try:
        yield node
    finally:
        node.stop()


def grant_watcher(admin: AdminClient, group: str, topic: str) -> None:
    user = "User:watcher"
    allow = AclPermissionType.ALLOW
    lit = ResourcePatternType.LITERAL
    bindings = [
        AclBinding(ResourceType.BROKER, "kafka-cluster", lit, user, "*",
                   AclOperation.DESCRIBE, allow),
        AclBinding(ResourceType.GROUP, group, lit, user, "*", AclOperation.DESCRIBE, allow),
        AclBinding(ResourceType.TOPIC, topic, lit, user, "*", AclOperation.READ, allow),
        AclBinding(ResourceType.TOPIC, topic, lit, user, "*", AclOperation.DESCRIBE, allow),
    ]
    for fut in admin.create_acls(bindings).values():
        fut.result(30)


def _complete(obs: Observer, n_members: int):
    snap = obs.latest()
    if snap is None or snap.error or len(snap.members) != n_members or snap.state != "Stable":
        return None
    if any(p.owner is None or p.committed is None for p in snap.partitions):
        return None
    if not any(s.source == "sampled" for s in snap.streams):
        return None
    if len(snap.partitions) != PARTITIONS or snap.total_lag is None:
        return None
    return snap


@pytest.mark.timeout(240)
@pytest.mark.parametrize("protocol,mechanism", [("classic", "SCRAM-SHA-256"),
                                                ("consumer", "PLAIN")])
def test_watcher_with_only_describe_and_read_sees_everything(
        secure_broker, tmp_path, unique, caplog, capfd, protocol, mechanism):
    caplog.set_level(logging.DEBUG)
    admin_settings = secure_broker.settings
    topic, group = f"acl-{unique}", f"acl-group-{protocol}-{unique}"
    create_topic(admin_settings, topic, PARTITIONS)
    grant_watcher(AdminClient(admin_settings.client_config()), group, topic)

    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\n"
                      f"sasl.mechanism={mechanism}\n"
                      "sasl.username=watcher\n"
                      f"sasl.password={PASSWORDS['watcher']}\n")
    watcher = resolve_settings(admin_settings.bootstrap, str(config))
    assert PASSWORDS["watcher"] not in repr(watcher) + watcher.describe()

    producer = SteadyProducer(admin_settings, topic, rate=40.0).start()
    members = Members(admin_settings, group, topic, protocol,
                      "range" if protocol == "classic" else None,
                      extra=admin_settings.client_config())
    observer = Observer(watcher, group, topic=topic, interval=0.5, sample_every=1.0)
    denied = Observer(watcher, f"not-granted-{unique}", topic=topic, interval=0.5,
                      tail_events=False)
    try:
        members.start("acl-a")
        members.start("acl-b")
        observer.start()
        snap = wait_until(lambda: _complete(observer, 2), timeout=90,
                          what="a complete snapshot as the watcher")
        assert snap.state == "Stable" and snap.protocol == protocol
        assert {m.client_id for m in snap.members} == {"acl-a", "acl-b"}
        assert all(p.end > 0 for p in snap.partitions)
        assert any(p.lag_seconds is not None for p in snap.partitions)
        sampled = {s.stream_id for s in snap.streams if s.source == "sampled"}
        assert sampled and all(k.startswith("car-") for k in sampled)
        # the ACLs are real: a group the watcher may not describe is refused, without leaks
        bad = denied.poll_once()
        assert bad.error and "AUTHORIZATION" in bad.error.upper()
        texts = [bad.error, str(SNAPSHOT_JSON.dump_python(snap)), str(observer.collector.errors)]
    finally:
        observer.stop()
        denied.stop()
        members.stop_all()
        producer.stop()
    out, err = capfd.readouterr()
    everything = "\n".join([*texts, caplog.text, out, err])
    for pw in PASSWORDS.values():
        assert pw not in everything

"""groupscope against a Kafka 3.x cluster, the release most production clusters still run: a
real Apache Kafka 3.9 node (KRaft), started from Maven jars the way the pinned 4.x one is.

`groups`, `snapshot`, `offsets reset`, the exporter with an alert rule and `watch`'s Groups
page read it as they read 4.x, their numbers checked against Kafka 3.9's own
`kafka-consumer-groups`; what a 3.9 cluster cannot have (share and streams groups) is said
once as a plain line, never an error.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from backend.broker.embedded import EmbeddedBroker
from backend.cli import main
from backend.contracts import SNAPSHOT_JSON
from backend.kafka.jars import KAFKA3_VERSION, kafka_classpath, kafka_extras
from backend.kafka.settings import KafkaSettings
from backend.netutil import free_port, wait_until
from backend.proc import STOP_WITHIN_S, run
from tests.dashboard.browser import open_page
from tests.dashboard.test_groups_browser import grid_rows, watch_server
from tests.exporter.conftest import groupscope, value, wait_exported  # noqa: F401 (fixture)
from tests.exporter.test_exporter_live import produce_exactly, wait_serving
from tests.kafka.javaadmin.conftest import JVM_FLAGS, TOOL_TIMEOUT_S
from tests.observer.conftest import create_topic
from tests.observer.seed import seed_groups

RECORDS = (10, 20, 30)  # per partition
COMMITTED = (5, 10, 15)  # the idle group's, per partition: lag 5 + 10 + 15
LAG = sum(RECORDS) - sum(COMMITTED)
NO_SHARE = "share groups need Kafka 4.1 or later (this cluster runs Kafka 3.9)"
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


@pytest.fixture(scope="module")
def kafka3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaSettings]:
    broker = EmbeddedBroker(tmp_path_factory.mktemp("kafka3"), port=free_port(),
                            kafka_version=KAFKA3_VERSION)
    try:
        broker.start(120)
        yield broker.settings
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def cluster(kafka3: KafkaSettings) -> dict[str, str]:
    """A topic, a group that committed and left (Empty), one with a live member (Stable)."""
    topic, idle, live = "orders", "invoicer", "auditor"
    create_topic(kafka3, topic, len(RECORDS))
    produce_exactly(kafka3, topic, RECORDS)
    seed_groups(kafka3, {idle: {(topic, p): at for p, at in enumerate(COMMITTED)}})
    return {"topic": topic, "idle": idle, "live": live}


def consumer_groups_tool(kafka3: KafkaSettings, *args: str) -> str:
    """Kafka 3.9's own `kafka-consumer-groups.sh`, its classes run with `java -cp`."""
    classpath = os.pathsep.join([kafka_classpath(KAFKA3_VERSION),
                                 *map(str, kafka_extras(["kafka-tools"], KAFKA3_VERSION))])
    done = run(["java", *JVM_FLAGS, "-cp", classpath, GROUP_COMMAND, "--bootstrap-server",
                kafka3.bootstrap, *args], timeout=TOOL_TIMEOUT_S, capture_output=True,
               text=True)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def tool_offsets(kafka3: KafkaSettings, group: str) -> dict[int, tuple[int, int]]:
    """partition -> (CURRENT-OFFSET, LAG) as Kafka's tool prints them."""
    rows = {}
    for line in consumer_groups_tool(kafka3, "--describe", "--group", group).splitlines():
        cells = line.split()
        if len(cells) >= 6 and cells[0] == group and cells[2].isdigit():
            rows[int(cells[2])] = (int(cells[3]), int(cells[5]))
    return rows


@pytest.mark.slow  # a Kafka 3.9 node, Kafka's tool and a page: the second lane
@pytest.mark.timeout(240)
def test_groups_snapshot_and_offsets_reset_read_a_kafka_3_cluster_as_its_own_tool_does(
        kafka3, cluster, capsys) -> None:
    topic, idle, live = cluster["topic"], cluster["idle"], cluster["live"]
    boot = ["--bootstrap", kafka3.bootstrap]
    member = Consumer(kafka3.client_config(**{
        "group.id": live, "enable.auto.commit": False, "auto.offset.reset": "earliest"}))
    try:
        member.subscribe([topic])
        seen = []

        def consumed_all() -> bool:
            seen.extend(m for m in member.consume(100, 0.5) if not m.error())
            return len(seen) == sum(RECORDS)

        wait_until(consumed_all, 90, interval=0, what=f"{live} reading every record")
        member.commit(asynchronous=False)
        assert tool_offsets(kafka3, live) == {p: (n, 0) for p, n in enumerate(RECORDS)}
        assert tool_offsets(kafka3, idle) == {p: (at, n - at) for p, (at, n) in
                                              enumerate(zip(COMMITTED, RECORDS, strict=True))}

        capsys.readouterr()
        assert main(["groups", "--json", "--samples", "1", *boot]) == 0
        rows = {r["group"]: r for r in json.loads(capsys.readouterr().out)}
        assert rows[idle]["state"] == "Empty" and rows[idle]["lag_messages"] == LAG
        assert rows[live]["state"] == "Stable" and rows[live]["lag_messages"] == 0
        assert rows[live]["members"] == 1 and rows[live]["protocol"] == "classic"
        assert main(["groups", "--samples", "1", *boot]) == 0
        text = capsys.readouterr().out
        assert f"note: {NO_SHARE}" in text and text.count("share groups need") == 1, text
        assert "Traceback" not in text and "ERR" not in text

        assert main(["snapshot", "--group", live, "--json", "--samples", "1", *boot]) == 0
        snap = SNAPSHOT_JSON.validate_json(capsys.readouterr().out)
        assert snap.group == live and snap.state == "Stable" and len(snap.members) == 1
        assert sorted(snap.members[0].partitions) == [0, 1, 2]
        assert {p.partition: p.committed for p in snap.partitions} == dict(enumerate(RECORDS))
    finally:
        member.close()

    assert main(["offsets", "reset", "--group", idle, "--to", "earliest", "--execute",
                 *boot]) == 0
    assert tool_offsets(kafka3, idle) == {p: (0, n) for p, n in enumerate(RECORDS)}
    seed_groups(kafka3, {idle: {(topic, p): at for p, at in enumerate(COMMITTED)}})


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_exporter_alerts_and_the_groups_page_on_a_kafka_3_cluster(
        kafka3, cluster, groupscope, chromium, tmp_path) -> None:  # noqa: F811
    idle = cluster["idle"]
    rules = tmp_path / "alerts.toml"
    rules.write_text(f'[[rule]]\nname = "behind"\nkind = "lag_messages"\ngroups = ["{idle}"]\n'
                     f'above = {LAG - 1}\nfor = "0s"\n')
    port = free_port()
    cmd = groupscope("exporter", "--bootstrap", kafka3.bootstrap, "--port", str(port),
                     "--interval", "1", "--alerts", str(rules), "--no-history")
    wait_serving(cmd, port)
    s = wait_exported(port, 60, cluster=kafka3.bootstrap, group=idle, topic=cluster["topic"])
    assert value(s, "groupscope_group_lag_messages", cluster=kafka3.bootstrap, group=idle,
                 topic=cluster["topic"]) == LAG
    wait_until(lambda: "FIRING behind" in cmd.stderr() and idle in cmd.stderr(), 30,
               what="the lag alert's log line")
    assert "Traceback" not in cmd.stderr()
    cmd.proc.send_signal(signal.SIGTERM)
    assert cmd.proc.wait(STOP_WITHIN_S) == 0

    with watch_server(kafka3.bootstrap, tmp_path / "watch.log", tmp_path / "data") as url, \
            chromium() as page:
        open_page(page, f"{url}/groups")
        wait_until(lambda: any(r and r[0] == idle for r in grid_rows(page)), 90,
                   what="the idle group's row on the Groups page")
        page.get_by_text("Kafka 3.9 · Share groups need Kafka 4.1 or later").first.wait_for(
            timeout=60_000)
    assert "Traceback" not in Path(tmp_path / "watch.log").read_text(errors="replace")

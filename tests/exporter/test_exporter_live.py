"""`groupscope exporter` against the real broker, as a real process scraped over HTTP.

Groups with known commits (seeded, no members) give exact lag to compare with; one live
group (real consumer processes and a producer) gives members and a rebalance to count.
"""

from __future__ import annotations

import signal
import time

import pytest
from confluent_kafka import Producer

from backend.contracts.history import DEPARTED, EPISODES_JSON, EXPIRED
from backend.contracts.overview import HEALTH_WORST_FIRST
from backend.netutil import free_port, port_open, wait_until
from backend.proc import STOP_WITHIN_S, abort_if_exited
from tests.exporter.conftest import Command, scrape, value, wait_exported
from tests.observer.conftest import create_topic, told_or_unseen
from tests.observer.seed import seed_groups

RECORDS = (12, 20, 7)  # records produced into partitions 0, 1, 2 of the seeded topic


def produce_exactly(kafka, topic: str, counts: tuple[int, ...]) -> None:
    producer = Producer(kafka.client_config())
    for partition, n in enumerate(counts):
        for i in range(n):
            producer.produce(topic, value=b"%d" % i, partition=partition)
    assert producer.flush(30) == 0


def wait_serving(cmd: Command, port: int) -> None:
    """Until the metrics port accepts and the command has printed its start line: the port
    opens a moment before that line is written, so reading stdout at the port alone races."""
    wait_until(lambda: port_open("127.0.0.1", port) and cmd.stdout().endswith("\n"),
               timeout=30, what="the metrics port and the start line",
               abort=abort_if_exited(cmd.proc, "groupscope", lambda: f": {cmd.stderr()}"))


def one_line_error(cmd: Command, timeout: float = 30) -> str:
    assert cmd.proc.wait(timeout) == 2, cmd.stderr()
    err = cmd.stderr().strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


def rebalances(samples, group: str) -> dict[str, float]:
    """The group's rebalance counters by cause."""
    return {dict(labels)["cause"]: v for (name, labels), v in samples.items()
            if name == "groupscope_group_rebalances_total" and dict(labels)["group"] == group}


def health_of(samples, cluster: str, group: str) -> dict[str, float | None]:
    return {h: value(samples, "groupscope_group_health", cluster=cluster, group=group,
                     groupscope_group_health=h) for h in HEALTH_WORST_FIRST}


@pytest.mark.timeout(180)
def test_exporter_serves_every_group_and_stops_on_sigterm(
        kafka, unique, groupscope, members_factory, producer_factory):
    c = kafka.bootstrap
    topic, live_topic = f"exp-{unique}", f"exp-live-{unique}"
    create_topic(kafka, topic, 3)
    create_topic(kafka, live_topic, 2)
    produce_exactly(kafka, topic, RECORDS)
    behind, caught_up, one = f"exp-behind-{unique}", f"exp-done-{unique}", f"exp-one-{unique}"
    commits = {behind: {(topic, 0): 2, (topic, 1): 5, (topic, 2): 7},
               caught_up: {(topic, p): n for p, n in enumerate(RECORDS)},
               one: {(topic, 0): 10}}
    seed_groups(kafka, commits)
    live = f"exp-live-group-{unique}"
    producer_factory(live_topic, rate=40.0)
    members = members_factory(live, live_topic, "classic")
    members.start("exp-a")
    members.start("exp-b")

    port = free_port()
    cmd = groupscope("exporter", "--bootstrap", c, "--port", str(port), "--interval", "1",
                     "--per-partition")
    wait_serving(cmd, port)
    assert f"http://localhost:{port}/metrics" in cmd.stdout()
    assert len(cmd.stdout().strip().splitlines()) == 1

    def settled():
        s = scrape(port)
        g = {"cluster": c, "group": live}
        ok = (value(s, "groupscope_group_lag_messages", cluster=c, group=behind,
                    topic=topic) is not None
              and value(s, "groupscope_group_members", **g) == 2
              and value(s, "groupscope_group_state", **g, groupscope_group_state="Stable") == 1
              and health_of(s, c, behind)["STOP"] == 1)
        return s if ok else None

    s = wait_until(settled, timeout=45, interval=0.5, what="every group exported, settled")

    # lag per group and topic: what was committed against the end offsets
    lag = {g: value(s, "groupscope_group_lag_messages", cluster=c, group=g, topic=topic)
           for g in commits}
    assert lag == {behind: (12 - 2) + (20 - 5) + (7 - 7), caught_up: 0, one: 12 - 10}
    # health: one state of the set, STOP for lag nobody consumes, OK when caught up
    assert sorted(health_of(s, c, behind).values()) == [0, 0, 0, 0, 0, 1]
    assert health_of(s, c, caught_up)["OK"] == 1
    assert value(s, "groupscope_group_members", cluster=c, group=behind) == 0
    assert value(s, "groupscope_group_state", cluster=c, group=behind,
                 groupscope_group_state="Empty") == 1
    # per partition, asked for: committed, end and lag of each
    for p, (done, end) in enumerate(zip((2, 5, 7), RECORDS, strict=True)):
        pl = {"cluster": c, "group": behind, "topic": topic, "partition": str(p)}
        assert value(s, "groupscope_partition_committed_offset", **pl) == done
        assert value(s, "groupscope_partition_lag_messages", **pl) == end - done
        assert value(s, "groupscope_partition_end_offset", cluster=c, topic=topic,
                     partition=str(p)) == end
    assert value(s, "groupscope_partition_lag_seconds", cluster=c, group=caught_up,
                 topic=topic, partition="0") == 0
    # the exporter's own collection metrics
    own = {"cluster": c}
    assert value(s, "groupscope_exporter_cluster_up", **own) == 1
    assert value(s, "groupscope_exporter_groups_listed", **own) >= 4
    assert value(s, "groupscope_exporter_groups_described", **own) >= 4
    assert value(s, "groupscope_exporter_cycle_requests", **own) >= 3
    assert 0 < value(s, "groupscope_exporter_cycle_duration_seconds", **own) < 30
    assert value(s, "groupscope_exporter_collection_errors_total", **own) == 0
    last = value(s, "groupscope_exporter_last_success_timestamp_seconds", **own)
    assert time.time() - 30 < last <= time.time()
    assert value(s, "process_resident_memory_bytes") > 0

    # a member dies: the group rebalances once, and the counters say so, by cause
    g = {"cluster": c, "group": live}
    before = rebalances(s, live)
    assert value(s, "groupscope_group_rebalancing", **g) == 0
    members.kill("exp-b")

    def rebalanced():
        s = scrape(port)
        return s if (value(s, "groupscope_group_members", **g) == 1
                     and sum(rebalances(s, live).values()) > sum(before.values())) else None

    try:
        s = wait_until(rebalanced, timeout=45, interval=0.5, what="the live group down to one")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; its rebalances: {rebalances(scrape(port), live)}") \
            from None
    after = rebalances(s, live)
    grew = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    # an expiry; or, when the exporter's cycles starved around it (load 25 and more), a
    # departure it says cannot be told, checked on its evidence below (never "left")
    assert len(grew) == 1 and set(grew.values()) == {1}, (before, after)
    (cause,) = grew
    assert cause in (EXPIRED, DEPARTED), grew
    assert value(s, "groupscope_group_membership_changes_total", change=cause, **g) >= 1
    counted = {**after, "unowned": value(
        s, "groupscope_group_unowned_partition_seconds_total", **g)}

    started = time.monotonic()
    cmd.proc.send_signal(signal.SIGTERM)
    assert cmd.proc.wait(STOP_WITHIN_S + 5) == 0, cmd.stderr()
    assert time.monotonic() - started < STOP_WITHIN_S
    assert not port_open("127.0.0.1", port)

    # the memory outlives the exporter: `history` names the cause, and a new exporter's
    # counters continue where the last one's stopped
    out = groupscope("history", "--group", live, "--bootstrap", c, "--since", "1h", "--json")
    assert out.proc.wait(60) == 0, out.stderr()
    (gone,) = [e for e in EPISODES_JSON.validate_json(out.stdout()) if "exp-b" in e.left]
    assert gone.cause == cause and told_or_unseen(gone, EXPIRED) == (cause == EXPIRED)
    again = groupscope("exporter", "--bootstrap", c, "--port", str(port), "--interval", "1")
    wait_serving(again, port)
    s = wait_until(lambda: (s := scrape(port)) and rebalances(s, live) and s, 30,
                   what="the live group's counters after the restart")
    assert rebalances(s, live) == {k: v for k, v in counted.items() if k != "unowned"}
    assert value(s, "groupscope_group_unowned_partition_seconds_total", **g) == \
        counted["unowned"]


@pytest.mark.timeout(90)
def test_without_per_partition_no_partition_series_and_a_taken_port_is_one_line(
        kafka, unique, groupscope):
    """Also: --groups and --exclude-groups pick the groups watched, by their whole id."""
    topic, group = f"exp-np-{unique}", f"exp-np-group-{unique}"
    left_out = f"exp-np-other-{unique}"
    create_topic(kafka, topic, 2)
    produce_exactly(kafka, topic, (3, 4))
    seed_groups(kafka, {g: {(topic, 0): 1, (topic, 1): 1} for g in (group, left_out)})
    port = free_port()
    first = groupscope("exporter", "--bootstrap", kafka.bootstrap, "--port", str(port),
                       "--interval", "1", "--groups", f"exp-np-.*-{unique}",
                       "--exclude-groups", f"exp-np-other-{unique}")
    wait_serving(first, port)

    s = wait_exported(port, 30, cluster=kafka.bootstrap, group=group, topic=topic)
    assert value(s, "groupscope_group_lag_messages", cluster=kafka.bootstrap, group=group,
                 topic=topic) == 5
    assert not [name for name, _ in s if name.startswith("groupscope_partition_")]
    exported = {dict(labels).get("group") for _name, labels in s} - {None}
    assert exported == {group}, "only the group --groups takes and --exclude-groups leaves"

    second = groupscope("exporter", "--bootstrap", kafka.bootstrap, "--port", str(port))
    err = one_line_error(second)
    assert err.startswith("groupscope exporter:") and f"port {port}" in err
    assert first.proc.poll() is None  # the first one is untouched
    first.proc.send_signal(signal.SIGINT)
    assert first.proc.wait(STOP_WITHIN_S) == 0


def test_unreachable_cluster_is_one_line_and_nothing_listens(groupscope):
    port = free_port()
    cmd = groupscope("exporter", "--bootstrap", f"127.0.0.1:{free_port()}", "--port", str(port))
    err = one_line_error(cmd)
    assert err.startswith("groupscope exporter:") and "refused" in err
    assert not port_open("127.0.0.1", port)


def test_a_malformed_alerts_file_is_one_line_before_anything_starts(tmp_path, groupscope):
    rules = tmp_path / "alerts.toml"
    rules.write_text('[[rule]]\nkind = "lag_seconds"\nabov = 300\n')
    port = free_port()
    # an unreachable cluster too: the file is checked first, so its error is the one shown
    cmd = groupscope("exporter", "--bootstrap", f"127.0.0.1:{free_port()}", "--port", str(port),
                     "--alerts", str(rules))
    err = one_line_error(cmd)
    assert err.startswith("groupscope exporter:") and "alerts.toml" in err
    assert not port_open("127.0.0.1", port)


@pytest.mark.timeout(90)
def test_alert_rules_fire_inside_the_exporter(kafka, unique, tmp_path, groupscope):
    topic, group = f"exp-al-{unique}", f"exp-al-group-{unique}"
    create_topic(kafka, topic, 1)
    produce_exactly(kafka, topic, (9,))
    seed_groups(kafka, {group: {(topic, 0): 4}})
    rules = tmp_path / "alerts.toml"
    rules.write_text(f'[[rule]]\nname = "nobody-consumes"\nkind = "empty_lag"\n'
                     f'groups = ["{group}"]\nfor = "0s"\n')
    port = free_port()
    cmd = groupscope("exporter", "--bootstrap", kafka.bootstrap, "--port", str(port),
                     "--interval", "1", "--alerts", str(rules))
    wait_serving(cmd, port)
    assert "1 rule(s)" in cmd.stdout()
    wait_until(lambda: "nobody-consumes" in cmd.stderr() and group in cmd.stderr(),
               timeout=30, what="the alert's log line")
    cmd.proc.send_signal(signal.SIGTERM)
    assert cmd.proc.wait(STOP_WITHIN_S) == 0

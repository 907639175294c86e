"""The Groups page (AppTest) against the real broker: seeded groups with known lag, the
shared overview watcher behind it, filters, and the first page of watch mode."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from streamlit.testing.v1 import AppTest

from backend.netutil import free_port, wait_until
from tests.dashboard.conftest import APP
from tests.dashboard.group import create_topic
from tests.observer.seed import seed_groups

PARTITIONS = 2
PER_PARTITION = 40


@pytest.fixture
def seeded(kafka, unique) -> dict[str, int]:
    """Three offsets-only groups on one topic: group -> expected total lag."""
    topic = f"gp-{unique}"
    create_topic(kafka, topic, PARTITIONS)
    producer = Producer(kafka.client_config())
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(topic, value=b"%d" % i, partition=p)
    assert producer.flush(30) == 0
    commits = {f"gp-{unique}-behind": 10, f"gp-{unique}-current": PER_PARTITION,
               f"gp-{unique}-far": 0}
    offsets = {g: {(topic, p): at for p in range(PARTITIONS)} for g, at in commits.items()}
    seed_groups(kafka, offsets)  # retries while a fresh broker's coordinator loads
    return {g: PARTITIONS * (PER_PARTITION - at) for g, at in commits.items()}


def _watch_env(monkeypatch, port: int, tmp_path) -> None:
    for key in ("GROUPSCOPE_KAFKA_CONFIG", "GROUPSCOPE_TOPIC", "GROUPSCOPE_GROUP"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("GROUPSCOPE_READONLY", "1")
    monkeypatch.setenv("GROUPSCOPE_BOOTSTRAP", f"127.0.0.1:{port}")
    monkeypatch.setenv("GROUPSCOPE_DATA", str(tmp_path))


def _table(at):
    frames = [d.value for d in at.dataframe if "catch_up" in d.value.columns]
    return frames[0] if frames else None


@pytest.mark.timeout(180)
def test_watch_mode_opens_on_every_group_with_lag_and_filters(
        monkeypatch, broker, seeded, unique, tmp_path, fresh_pollers):
    _watch_env(monkeypatch, broker.port, tmp_path)
    at = AppTest.from_file(APP, default_timeout=30)

    def described():
        at.run()
        assert not at.exception, at.exception
        df = _table(at)
        if df is None:
            return None
        mine = df[df["group"].isin(list(seeded))]
        return (mine,) if len(mine) == len(seeded) and not (mine["lag"] == "…").any() else None

    (mine,) = wait_until(described, 90, interval=0.5, what="the seeded groups described")
    assert at.title[0].value == "Consumer groups"  # the first page of watch mode
    by_group = mine.set_index("group")
    for group, lag in seeded.items():
        cells = by_group.loc[group]
        assert cells["lag"] == f"{lag:,}", (group, cells.to_dict())
        assert cells["state"] == "Empty" and cells["members"] == "0"
        assert cells["topics"] == f"gp-{unique}"
        assert list(cells["health"]) == ["OK"]
        assert len(cells["trend"]) >= 1 and cells["trend"][-1] == lag
    current = by_group.loc[f"gp-{unique}-current"]
    assert current["catch_up"] == "caught up" and current["lag_seconds"] == "0 s"
    # lag in seconds from the records' broker timestamps: they were written just now
    assert by_group.loc[f"gp-{unique}-far"]["lag_seconds"].endswith(" s")
    footer = [c.value for c in at.caption if "groups listed" in c.value]
    assert footer and "described" in footer[0]
    # no control anywhere: watch mode
    assert not [b for b in at.button if (b.key or "").startswith("ctl_")]

    # filter by name: only the matching group is left
    at.text_input(key="groups_name").input(f"{unique}-behind").run()
    df = _table(at)
    assert list(df["group"]) == [f"gp-{unique}-behind"]
    # sort by lag: the farthest behind first among this test's groups
    at.text_input(key="groups_name").input(f"gp-{unique}").run()
    at.selectbox(key="groups_sort").select("lag (messages)").run()
    assert list(_table(at)["group"]) == [f"gp-{unique}-far", f"gp-{unique}-behind",
                                         f"gp-{unique}-current"]
    # a health filter none of them can match: their commits never go backwards
    at.multiselect(key="groups_health").select("REWIND").run()
    assert _table(at) is None
    assert "No group matches the filter." in [i.value for i in at.info]


def test_the_groups_page_is_in_the_demo_too(monkeypatch, broker, seeded, tmp_path,
                                             fresh_pollers):
    for key in ("GROUPSCOPE_BOOTSTRAP", "GROUPSCOPE_KAFKA_CONFIG", "GROUPSCOPE_READONLY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("GROUPSCOPE_KAFKA_PORT", str(broker.port))
    monkeypatch.setenv("GROUPSCOPE_DATA", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=30)
    at.switch_page("screens/groups.py")

    def listed():
        at.run()
        assert not at.exception, at.exception
        df = _table(at)
        return df is not None and df["group"].isin(list(seeded)).sum() == 3

    wait_until(listed, 90, interval=0.5, what="the seeded groups on the demo's Groups page")


def test_an_unreachable_cluster_is_one_line_in_place(monkeypatch, tmp_path, fresh_pollers):
    dead = free_port()
    _watch_env(monkeypatch, dead, tmp_path)
    at = AppTest.from_file(APP, default_timeout=30)

    def error_shown():
        at.run()
        assert not at.exception, at.exception
        return [e.value for e in at.error if str(dead) in e.value] or None

    errors = wait_until(error_shown, 60, interval=0.5, what="the cluster's error on Groups")
    assert "\n" not in errors[0] and "refused" in errors[0]

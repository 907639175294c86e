"""The Offsets page of `groupscope watch --allow-offset-writes` in a real browser, and its
absence without the flag.

On a real broker: a group with committed offsets and no member (Empty) is previewed to the
beginning (per partition, nothing changed), applied once its name is typed, and reads back
exactly the previewed offsets, each change logged with who asked. A group with a member is
refused in one line and keeps its offsets. Without the flag, `watch` has no such page and
its URL shows no form.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from backend.kafka.javaadmin.reader import KafkaReader
from backend.netutil import wait_until
from tests.dashboard.browser import button, open_page, save_shot
from tests.dashboard.group import Member, create_topic
from tests.dashboard.screen import assert_fits
from tests.dashboard.test_groups_browser import watch_server
from tests.observer.seed import seed_groups

PARTITIONS = 2
RECORDS = 100  # per partition
COMMITTED = 80


def _committed(kafka, group: str) -> dict[tuple[str, int], int]:
    reader = KafkaReader(kafka, client_id="test-offsets-page")
    try:
        answer = reader.committed([group]).get(group, {})
        assert not isinstance(answer, str), answer
        return answer
    finally:
        reader.close()


def _fill(page, key: str, text: str) -> None:
    box = page.locator(f".st-key-{key} input")
    box.fill(text)
    box.press("Enter")


@pytest.mark.slow  # two watch servers and a member's session: the second lane
@pytest.mark.timeout(300)
def test_the_offsets_page_previews_applies_an_empty_group_and_refuses_a_live_one(
        broker, kafka, chromium, unique, artifacts_dir, tmp_path) -> None:
    topic, idle, busy = f"ledger-{unique}", f"invoicer-{unique}", f"auditor-{unique}"
    create_topic(kafka, topic, PARTITIONS)
    producer = Producer(kafka.client_config())
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(topic, value=b"%d" % i, partition=p)
    assert producer.flush(30) == 0
    seed_groups(kafka, {idle: {(topic, p): COMMITTED for p in range(PARTITIONS)}})
    member = Member(kafka, busy, topic, "auditor-1")
    log = tmp_path / "watch.log"
    try:
        wait_until(lambda: _committed(kafka, busy), 60, what=f"{busy} committing")
        with watch_server(kafka.bootstrap, log, tmp_path / "data",
                          "--allow-offset-writes") as url, chromium() as page:
            try:
                open_page(page, f"{url}/offsets", page.get_by_text("Reset offsets"))
                _fill(page, "off_group", idle)
                button(page, "off_preview").click()
                said = (f"2 partitions of 1 topic, 2 changing: replays {COMMITTED * 2} "
                        "records, skips 0")
                page.get_by_text(said, exact=False).first.wait_for(timeout=60_000)
                assert _committed(kafka, idle) == {(topic, p): COMMITTED
                                                    for p in range(PARTITIONS)}
                save_shot(page, artifacts_dir / "offsets-preview.png")
                assert_fits(page, "offsets", artifacts_dir / "screens")  # its plan shown
                apply = page.locator(".st-key-off_apply button")
                assert apply.is_disabled()  # the name not typed yet
                _fill(page, "off_confirm", idle)
                wait_until(lambda: not apply.is_disabled(), 30, what="Apply enabled")
                apply.click()
                page.get_by_text("every offset reads back as previewed").first.wait_for(
                    timeout=60_000)
                assert _committed(kafka, idle) == {(topic, p): 0 for p in range(PARTITIONS)}
                text = log.read_text(errors="replace")
                for p in range(PARTITIONS):
                    assert f"reset group {idle} {topic}-{p}: {COMMITTED} → 0" in text, text

                # a group with a member: refused in one line, its offsets as they were
                before = _committed(kafka, busy)
                _fill(page, "off_group", busy)
                button(page, "off_preview").click()
                page.get_by_text("The group is Stable", exact=False).first.wait_for(
                    timeout=60_000)
                _fill(page, "off_confirm", busy)
                wait_until(lambda: not apply.is_disabled(), 30, what="Apply enabled")
                apply.click()
                page.get_by_text("stop its members first").first.wait_for(timeout=60_000)
                assert _committed(kafka, busy).keys() == before.keys()
            finally:
                save_shot(page, artifacts_dir / "offsets-last.png")

        # without the flag: no Offsets page, no form at its address
        with watch_server(kafka.bootstrap, tmp_path / "plain.log", tmp_path / "data2") as url, \
                chromium() as page:
            open_page(page, f"{url}/offsets", page.get_by_text("Groups"))
            assert page.locator(".st-key-off_preview").count() == 0
            assert page.get_by_text("Reset offsets").count() == 0
            nav = page.locator("[data-testid='stTopNavLink'], [data-testid='stNavLink']")
            assert "Offsets" not in " ".join(nav.all_inner_texts())
    finally:
        member.close()

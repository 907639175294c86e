"""The brokers view in a real browser, on three real KRaft nodes with real group members: the
Live lanes name each partition's leader and ISR, a killed broker shows as down on Live, Status
and Timeline, and its return brings the ISRs back to three."""

from __future__ import annotations

import re

from confluent_kafka.admin import AdminClient, NewTopic

from backend.broker.nodes import EmbeddedCluster
from backend.netutil import wait_until
from tests.dashboard.browser import lanes, open_page, save_shot, web_server
from tests.observer.conftest import Members, SteadyProducer

PARTITIONS = 6
SHOT = "brokers.png"  # copied to assets/screenshots/ for the README

BROKERS_JS = """
() => [...document.querySelectorAll('.gs-broker')].map(c => ({
  id: Number(c.dataset.broker), state: c.dataset.state, text: c.innerText}))
"""


def brokers(page) -> dict[int, dict]:
    """The brokers view's cards as the browser shows them, by broker id."""
    return {c["id"]: c for c in page.evaluate(BROKERS_JS) or []}


def test_lanes_show_leader_and_isr_and_a_killed_broker_is_down_everywhere(
        cluster3: EmbeddedCluster, chromium, unique, artifacts_dir, tmp_path) -> None:
    settings = cluster3.settings
    topic, group = f"rf3-{unique}", f"rf3-group-{unique}"
    admin = AdminClient(settings.client_config())  # kept: results die with their client
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(60)
    env = {"GROUPSCOPE_BOOTSTRAP": settings.bootstrap, "GROUPSCOPE_KAFKA_CONFIG": "",
           "GROUPSCOPE_GROUP": group, "GROUPSCOPE_TOPIC": topic,
           "GROUPSCOPE_DATA": str(tmp_path / "data")}  # no supervisor there: no controls
    members = Members(settings, group, topic, "classic", "range")
    producer = SteadyProducer(settings, topic, keys=12, rate=20.0)
    try:
        producer.start()
        for name in ("ada", "bruno"):
            members.start(name)
        with web_server(env, tmp_path / "web.log") as url, chromium() as page:
            open_page(page, url)

            def full_isr():
                current = lanes(page)
                return current if (len(current) == PARTITIONS and all(
                    lane["kafka"] and lane["kafka"].endswith("ISR 1,2,3") for lane in current)
                    and {lane["owner"] for lane in current} == {"ada", "bruno"}) else None

            try:
                before = wait_until(full_isr, 180, interval=0.3,
                                    what="six owned lanes, each with ISR 1,2,3")
            except TimeoutError:
                save_shot(page, artifacts_dir / "brokers-failed.png")
                print("lanes seen:", lanes(page))
                print(members.report())
                raise
            leaders = {lane["partition"]: lane["kafka"].split(" ")[0] for lane in before}
            assert set(leaders.values()) <= {"L1", "L2", "L3"}
            cards = wait_until(lambda: (seen := brokers(page)) and len(seen) == 3 and seen,
                               30, what="three broker cards")
            assert {c["state"] for c in cards.values()} == {"up"}

            victim = int(leaders["P0"][1:])
            cluster3.kill(victim)
            rest = ",".join(str(b) for b in (1, 2, 3) if b != victim)

            def shrunk():
                current = lanes(page)
                card = brokers(page).get(victim)
                return current if (card and card["state"] == "down" and len(current) ==
                                   PARTITIONS and all(lane["kafka"].endswith(f"ISR {rest}")
                                                      and lane["kafka"] != f"L{victim}"
                                                      for lane in current)) else None

            after = wait_until(shrunk, 45, interval=0.3,
                               what=f"broker {victim} down and out of every ISR")
            assert all(not lane["kafka"].startswith(f"L{victim} ") for lane in after)
            assert f"{PARTITIONS} under-replicated" in page.inner_text("body")
            # the feed names the change in Kafka's words
            feed = page.locator(".st-key-feed_box")
            wait_until(lambda: f"Broker {victim} went down" in feed.inner_text(), 30,
                       what="the broker's fall in the event feed")
            view = page.locator(".st-key-live_brokers_cards, [data-testid='gs-brokers']").first
            view.scroll_into_view_if_needed()
            save_shot(page, artifacts_dir / SHOT, full_page=False)
            save_shot(page, artifacts_dir / "brokers-live-full.png")

            # Status: every topic, the internal ones too, from the cluster poller
            open_page(page, f"{url}/status")
            status = page.locator(".st-key-brokers-status")
            wait_until(lambda: f"broker {victim}" in status.inner_text()
                       and brokers(page).get(victim, {}).get("state") == "down", 30,
                       what="the Status page's brokers with the victim down")
            assert "under-replicated" in status.inner_text()
            status.screenshot(path=str(artifacts_dir / "brokers-status.png"))

            # Timeline: leaders over time and Kafka's changes (a data grid drawn on a canvas:
            # its heading's count is what the page's text holds)
            open_page(page, f"{url}/timeline")

            def changes() -> int:
                found = re.search(r"Kafka changes \((\d+)\)", page.inner_text("body"))
                return int(found.group(1)) if found else 0

            wait_until(lambda: changes() >= 3, 30,
                       what="the broker's fall, its leaders and ISRs among the Kafka changes")
            assert "Leaders of" in page.inner_text("body")

            cluster3.start_node(victim)
            open_page(page, url)
            wait_until(full_isr, 90, interval=0.5, what="every ISR back to 1,2,3")
            wait_until(lambda: brokers(page).get(victim, {}).get("state") == "up", 30,
                       what=f"broker {victim}'s card up again")  # its own refresh
    finally:
        producer.stop()
        members.stop_all()

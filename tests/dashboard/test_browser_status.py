"""The Status page in a real browser: `groupscope web` served, Chromium shows the real cluster."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from dashboard.theme import PROJECTOR_QUERY
from tests.dashboard.browser import open_page, save_shot, web_server

STATUS_PATH = "status"


def test_status_page_in_chromium(broker, kafka, spark_remote, chromium, unique, artifacts_dir,
                                 tmp_path):
    # The topics table is a virtualised grid that renders only its visible rows, and the
    # session broker holds every earlier test's topics: a name that sorts first stays visible.
    topic = f"0-browser-{unique}"
    admin = AdminClient(kafka.client_config())
    admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic].result(30)
    env = {"GROUPSCOPE_KAFKA_PORT": str(broker.port), "SPARK_REMOTE": spark_remote,
           "GROUPSCOPE_BOOTSTRAP": "", "GROUPSCOPE_KAFKA_CONFIG": ""}
    with web_server(env, tmp_path / "web.log") as url, chromium() as page:
        open_page(page, f"{url}/{STATUS_PATH}")
        try:
            _check(page, topic)
        finally:
            save_shot(page, artifacts_dir / "status-page.png")
        # the dark theme from dashboard/.streamlit/config.toml follows the browser's preference
        page.emulate_media(color_scheme="dark")
        page.reload()
        _check(page, topic)
        background = page.evaluate(
            "getComputedStyle(document.querySelector('.stApp')).backgroundColor")
        save_shot(page, artifacts_dir / "status-page-dark.png")
        assert background == "rgb(11, 18, 32)", background  # theme.dark backgroundColor
        # the projector theme: black on white even in a dark browser, kept across pages
        open_page(page, f"{url}/{STATUS_PATH}?{PROJECTOR_QUERY[0]}={PROJECTOR_QUERY[1]}")
        _check(page, topic)
        assert _background(page) == "rgb(255, 255, 255)"
        page.get_by_role("link", name="Groups").first.click()
        page.get_by_text("Consumer groups").first.wait_for(timeout=30_000)
        assert _background(page) == "rgb(255, 255, 255)", "the projector theme was dropped"
        save_shot(page, artifacts_dir / "groups-projector.png")


def _background(page) -> str:
    return page.evaluate("getComputedStyle(document.querySelector('.stApp')).backgroundColor")


def _check(page, topic: str) -> None:
    assert page.get_by_text("Page not found").count() == 0
    assert page.get_by_text("Page not found").count() == 0
    page.get_by_text("Cluster status").first.wait_for(timeout=30_000)
    kafka_card = page.locator(".st-key-kafka-status")
    spark_card = page.locator(".st-key-spark-status")
    for card in (kafka_card, spark_card):
        page.wait_for_function(
            "el => / reachable/.test(' ' + el.innerText) && !el.innerText.includes('checking')",
            arg=card.element_handle(timeout=30_000), timeout=30_000)
        assert "unreachable" not in card.inner_text()
    page.locator("[data-testid='stDataFrame']").first.wait_for(timeout=30_000)
    page.wait_for_function(
        "name => [...document.querySelectorAll('[data-testid=stDataFrame]')]"
        ".some(e => e.innerText.includes(name) || e.innerHTML.includes(name))",
        arg=topic, timeout=30_000)

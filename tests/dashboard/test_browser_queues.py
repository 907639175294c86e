"""The Queues page in a real browser on a running stack: the consumer group and the share
group scaled past the topic's two partitions from the page (the consumer group's third
replica idle, every share replica working), a share replica killed from the page, each
car's proof, the Streams page's order per car, and the presenter's replay from it."""

from __future__ import annotations

import re

import pytest

from backend.netutil import wait_until
from backend.supervisor.client import ControlClient
from tests.dashboard.browser import (
    button,
    choose,
    open_page,
    press_until,
    reload_if_code_lost,
    save_shot,
    stack_env,
    supervisor,
    web_server,
)

FIRST_RENDER_S = 180.0  # as the broker-fault test's pages: a first render at load 20 and more

TABLE_JS = """
key => {
  const el = document.querySelector('.st-key-' + key);
  // a dataframe draws its cells on a canvas; its accessible copy is in the HTML
  return el ? el.innerText + ' | ' + el.innerHTML : '';
}
"""


def _text(page, key: str) -> str:
    """The text of a panel; the page loaded again first if some of its code was lost."""
    reload_if_code_lost(page)
    return page.evaluate(TABLE_JS, key) or ""


def _shot(page, artifacts_dir, name: str) -> None:
    save_shot(page, artifacts_dir / f"{name}.png")


@pytest.mark.slow  # a minute or more, mostly waiting for replicas: the second lane
def test_the_queues_page_shows_idle_consumers_working_sharers_and_a_kill(
        broker, spark_remote, chromium, stack, unique, artifacts_dir, tmp_path):
    group, topic, share = f"gs-{unique}", f"telemetry-{unique}", f"queue-{unique}"
    env = stack_env(broker.port, spark_remote, group, topic)
    data = tmp_path / "data"
    data.mkdir()
    with supervisor(env, ["--group", group, "--topic", topic, "--partitions", "2",
                          "--replicas", "1", "--streams", "6", "--rate", "60",
                          "--no-standby", "--share-group", share],
                    tmp_path / "backend.log", data), \
            web_server({**env, "GROUPSCOPE_DATA": str(data)}, tmp_path / "web.log") as url, \
            chromium() as page:
        try:
            open_page(page, f"{url}/queues", page.get_by_text("Share group", exact=False),
                      FIRST_RENDER_S)
            for key in ("q_cg_n", "q_sg_n"):
                box = page.locator(f".st-key-{key} input")
                box.fill("3")
                box.press("Enter")
            # a click on a page with live fragments can be lost on a loaded machine: pressed
            # until the page says it was done (scaling to 3 twice is scaling to 3 once)
            scaled = page.get_by_text("scale share group to 3:")
            press_until(page, "q_scale", lambda: scaled.count() > 0, 60,
                        what="the scale said done", shown=lambda: _text(page, "q-share"))

            def contrast() -> bool:
                consumers, sharers = _text(page, "q-consumer"), _text(page, "q-share")
                return ("1 idle" in consumers and "none: idle" in consumers
                        and "3 replicas, 3 of them have summarised records" in sharers)

            wait_until(contrast, 240, interval=1.0,
                       what="one idle consumer replica and three working sharers")
            # each car's proof is drawn (its out-of-order count is whatever the run gave)
            wait_until(lambda: "records after a higher seq" in _text(page, "q-cars"), 60,
                       what="each car's proof")
            wait_until(lambda: "accepted" in _text(page, "q-acks"), 60,
                       what="the share replicas' acknowledgements")
            page.locator(".st-key-q-acks").first.scroll_into_view_if_needed()
            _shot(page, artifacts_dir, "queues-acknowledgements")
            _shot(page, artifacts_dir, "queues-side-by-side")

            control = ControlClient.discover(data, timeout=10)
            victim = control.status().share.running[0].name
            choose(page, "q_victim", f"share/{victim}")
            killed = page.get_by_text(f"kill {victim} (share group):")
            press_until(page, "q_kill", lambda: killed.count() > 0 or victim not in {
                r.name for r in control.status().share.running}, 60,
                what=f"the kill of {victim} received", shown=lambda: _text(page, "q-share"))
            wait_until(lambda: victim not in {r.name for r in control.status().share.running},
                       30, what=f"{victim} gone from the share group's replicas")

            wait_until(lambda: "2 replicas, " in _text(page, "q-share"), 30,
                       what="the page without the killed sharer")
            _shot(page, artifacts_dir, "queues-after-kill")

            # the Streams page says per car how the share group beside received it
            open_page(page, f"{url}/streams")
            said = re.compile(rf"The share group {share} on the same topic has had [\d,]+ "
                              "records arrive out of order")
            wait_until(lambda: said.search(page.inner_text("body")), 60,
                       what="the share group's order per car")
            _shot(page, artifacts_dir, "streams-beside-a-share-group")

            # the presenter's replay: a preview per partition and per car, then applied
            def replay_open() -> bool:
                """The replay's expander open, its Preview drawn. At load 30 the click on its
                summary has been lost in a fragment's rerun: clicked again after 8 s."""
                if button(page, "rp_preview").is_visible():
                    return True
                page.locator(".st-key-replay summary").first.click()
                return False

            wait_until(replay_open, 90, interval=8.0, what="the replay's Preview drawn")
            tables = page.locator(".st-key-replay [data-testid='stDataFrame']")

            def previewed() -> bool:
                """The preview's two tables (per partition, per car) shown; else Preview
                clicked (again: a preview changes nothing), the expander opened first when a
                rerun closed it (at load 29 the button was gone for the rest of a minute)."""
                if tables.count() == 2 and "records, skips" in _text(page, "replay"):
                    return True
                if not button(page, "rp_preview").is_visible():
                    page.locator(".st-key-replay summary").first.click(timeout=10_000)
                    return False
                button(page, "rp_preview").click(timeout=10_000)
                return False

            wait_until(previewed, 150, interval=15.0, what="the replay's preview")
            _shot(page, artifacts_dir, "replay-preview")
            before = len(control.status().running)
            moved = page.get_by_text("replay: moved to earliest:")
            # the apply has begun once the replicas stop (or it is already done); a lost
            # click is clicked again, a received one never is
            press_until(page, "rp_apply", lambda: moved.count() > 0
                        or len(control.status().running) < before, 60,
                        what="the replay under way", shown=lambda: _text(page, "replay"))
            moved.first.wait_for(timeout=120_000)
            wait_until(lambda: len(control.status().running) == before, 30,
                       what=f"{before} consumer replicas running again")
        finally:
            _shot(page, artifacts_dir, "queues-last")

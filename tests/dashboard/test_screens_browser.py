"""Every page of the stage at the sizes it is seen at: nothing cut, nothing overlapping.

A real stack (the supervisor with PySpark replicas on the session's broker and Spark, the
dashboard served by `groupscope web`) in Chromium, as the presenter sees it: each page is
opened once it has something to show, then laid out at a projector's 1280×720, a laptop's
1366×768, full HD and a participant's phone (390×844), and measured (tests/dashboard/screen.py:
a cut label, two texts overlapping, the page scrolling sideways, a chip or an owner wrapping,
a lane's text under 14 px). A problem counts only when two measurements a second apart both
show it: a live panel redrawn between them is not a layout fault. The screenshots judged are
saved in test-artifacts/screens/.
"""

from __future__ import annotations

import pytest

from backend.netutil import wait_until
from tests.dashboard.browser import open_page, stack_env, supervisor, web_server
from tests.dashboard.screen import SIZES, Verdict, judged

# `slow`: a minute and more of page loads and layouts, most of it waiting on the browser
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

# (address, what shows the page has drawn what it is about)
PAGES: tuple[tuple[str, str], ...] = (
    ("", ".gs-lanes .own"),  # Live, the default page
    ("queues", "h1"),
    ("lab", ".st-key-lab-start"),  # no lab yet: its form (tests/lab judge one measured)
    ("groups", ".st-key-groups_name input"),
    ("streams", "h1"),
    ("timeline", "h1"),
    ("watch", "h1"),
    ("status", "h1"),
)
def test_every_page_fits_every_screen(broker, spark_remote, chromium, stack, unique,
                                      artifacts_dir, tmp_path) -> None:
    group, topic = f"gs-{unique}", f"telemetry-{unique}"
    env = stack_env(broker.port, spark_remote, group, topic)
    data = tmp_path / "data"
    data.mkdir()
    shots = artifacts_dir / "screens"
    verdicts: list[Verdict] = []
    with supervisor(env, ["--group", group, "--topic", topic, "--partitions", "6",
                          "--replicas", "3", "--streams", "12", "--rate", "50"],
                    tmp_path / "backend.log", data), \
            web_server({**env, "GROUPSCOPE_DATA": str(data)}, tmp_path / "web.log") as url, \
            chromium(viewport=SIZES[0]) as page:
        for path, ready in PAGES:
            page.set_viewport_size({"width": SIZES[0][0], "height": SIZES[0][1]})
            open_page(page, f"{url}/{path}", page.locator(ready), 120)
            if path == "":  # the lanes owned: what the stage is about
                wait_until(lambda: page.locator(".gs-lanes .own").count() >= 6, 120,
                           interval=0.5, what="six lanes on the Live page")
            for size in SIZES:
                verdicts.append(judged(page, path or "live", size, shots))
    failed = [v for v in verdicts if v.problems]
    assert not failed, "\n".join(str(v) for v in failed)

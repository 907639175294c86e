"""The Lab page in Chromium on a running supervisor: four groups started from the page (real
PySpark replicas on the session's broker and Spark), a kill from the page applied to all of
them, the stopwatches and the scoreboard filled, and the kill's cost judged from the
measured records: the eager group stopped every partition, the cooperative and the KIP-848
group only the victim's. Then the lab stops from the page and its replicas are gone."""

from __future__ import annotations

import psutil
import pytest

from backend.contracts.lab import DEFAULT_LAB_PROTOCOLS, KILL
from backend.netutil import wait_until
from backend.supervisor.client import ControlClient
from tests.dashboard.browser import (
    open_page,
    press_until,
    save_shot,
    stack_env,
    supervisor,
    web_server,
)
from tests.dashboard.screen import SIZES, judged

# `slow`: four groups of replicas warming up on one Spark, then a static member's 30 s session
pytestmark = pytest.mark.slow


def _lab(control: ControlClient):
    return control.status().lab


def _replicas_of(lab_name: str) -> list[int]:
    """Processes whose command line names one of the lab's groups."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if any(lab_name in part for part in proc.info["cmdline"] or ()):
            found.append(proc.info["pid"])
    return found


@pytest.mark.timeout(600)
def test_a_kill_from_the_lab_page_is_measured_for_every_protocol(
        broker, spark_remote, chromium, unique, artifacts_dir, tmp_path):
    group, topic = f"gs-{unique}", f"telemetry-{unique}"
    env = stack_env(broker.port, spark_remote, group, topic)
    data = tmp_path / "data"
    data.mkdir()
    with supervisor(env, ["--group", group, "--topic", topic, "--partitions", "2",
                          "--replicas", "0", "--streams", "4", "--rate", "10"],
                    tmp_path / "backend.log", data), \
            web_server({**env, "GROUPSCOPE_DATA": str(data)}, tmp_path / "web.log") as url, \
            chromium() as page:
        control = ControlClient.discover(data, timeout=20)
        try:
            open_page(page, f"{url}/lab", page.get_by_text("No lab runs"))
            body = lambda: page.inner_text("body")  # noqa: E731
            press_until(page, "lab_start", lambda: _lab(control) is not None, 60,
                        "the lab started", shown=body)
            lab = _lab(control)
            assert [g.lab for g in lab.groups] == list(DEFAULT_LAB_PROTOCOLS)

            wait_until(lambda: _lab(control).phase == "ready", 300, interval=1.0,
                       what="every lab group processing every partition")
            page.get_by_text("Ready: apply an event").first.wait_for(timeout=30_000)
            rows = page.locator('[data-testid="gs-lab-lanes"]')
            wait_until(lambda: rows.count() == 4, 30, what="four rows of lanes")
            save_shot(page, artifacts_dir / "lab-ready.png")

            press_until(page, "lab_event_kill", lambda: _lab(control).event == KILL, 60,
                        "the kill applied", shown=body)
            lab = wait_until(
                lambda: (s := _lab(control)).phase == "ready"
                and all(g.score is not None for g in s.groups) and s,
                180, interval=1.0, what="every group's kill measured")
            page.get_by_text("Scoreboard").first.wait_for(timeout=30_000)
            save_shot(page, artifacts_dir / "lab-after-kill.png")
            text = body()
            for g in lab.groups:
                assert f"{g.score.stalled} of {g.score.partitions}" in text, g

            by = {g.lab: g.score for g in lab.groups}
            assert by["eager"].victim_partitions
            assert by["eager"].stopped == by["eager"].partitions, by["eager"]
            for name in ("cooperative", "consumer"):
                s = by[name]
                assert s.victim_partitions, s
                assert set(s.stopped_partitions) == set(s.victim_partitions), s
                assert set(s.stalled_partitions) == set(s.victim_partitions), s
            for s in by.values():
                assert s.recovered_s is not None and s.recovered_s > 0, s
            watches = page.locator('[data-testid="gs-lab-watch"]').all_inner_texts()
            assert len(watches) == 4 and all(w.endswith(" s") for w in watches), watches
            # the page with its four rows and the scoreboard fits every screen it is seen on
            verdicts = [judged(page, "lab-measured", size, artifacts_dir / "screens")
                        for size in SIZES]
            assert not [v for v in verdicts if v.problems], \
                "\n".join(str(v) for v in verdicts if v.problems)
            page.set_viewport_size({"width": SIZES[0][0], "height": SIZES[0][1]})

            press_until(page, "lab_stop", lambda: _lab(control) is None, 60,
                        "the lab stopped", shown=body)
            page.get_by_text("No lab runs").first.wait_for(timeout=30_000)
            wait_until(lambda: not _replicas_of(lab.name), 30, what="the lab's replicas gone")
        except Exception:
            save_shot(page, artifacts_dir / f"lab-failed-{unique}.png")
            raise

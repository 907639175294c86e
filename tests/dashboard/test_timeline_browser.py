"""The Timeline page in a real browser, on `groupscope watch` over a memory written beforehand:
the newest rebalance's card shows its cause and evidence, "previous" and "worst" move the card,
the lag chart is drawn with the rebalances shaded; and a memory that cannot be read is one
warning line on a page that still renders."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from backend.contracts.history import (
    CRASHED,
    EXPIRED,
    HISTORY_FILE,
    JOINED,
    LEFT,
    Cause,
    Episode,
    Impact,
    Moved,
)
from backend.history.sqlite import SqliteStore
from backend.history.store import Cycle, GroupLag
from backend.netutil import wait_until
from tests.dashboard.browser import open_page, press_until, save_shot
from tests.dashboard.test_groups_browser import watch_server

MIN_MS = 60_000
SHOT = "timeline.png"
GARBAGE = b"not a database, whatever its name says\n" * 64


def _episodes(cluster: str, group: str, now: int) -> list[Episode]:
    """Four rebalances of the last hour, oldest first; the second is the worst (the only one
    with partitions left without an owner), the last the newest."""
    def ep(ago_min: int, secs: float, cause: Cause, **impact) -> Episode:
        start = now - ago_min * MIN_MS
        return Episode(cluster, group, start, start + int(secs * 1000), "classic", "state",
                       causes=(cause,), impact=Impact(**impact), final=True)

    return [
        ep(50, 0.6, Cause(JOINED, "carol (carol-7f3 on /10.1.0.9) joined", member="carol"),
           moved=(Moved("orders", 2, "ada", "carol"),), gap_ms=600, lag_before=40,
           lag_peak=55, lag_after=38),
        ep(35, 6.5, Cause(EXPIRED, "bruno (bruno-19c on /10.1.0.7) stopped committing with "
                                   "records waiting and stayed listed 45.0 s until the group "
                                   "noticed", member="bruno", dead_ms=45_000),
           moved=(Moved("orders", 0, "bruno", "ada"), Moved("orders", 1, "bruno", "carol")),
           unowned_partition_seconds=91.0, gap_ms=51_500, lag_before=40, lag_peak=9_400,
           lag_after=45),
        ep(20, 0.4, Cause(LEFT, "carol (carol-7f3 on /10.1.0.9) committed until 0.2 s before "
                                "it was gone: it left the group", member="carol"),
           moved=(Moved("orders", 1, "carol", "ada"), Moved("orders", 2, "carol", "ada")),
           gap_ms=420, lag_before=30, lag_peak=70, lag_after=31),
        ep(5, 1.2, Cause(CRASHED, "the replica dora ended on its own with exit code 3",
                         member="dora", exit_code=3),
           moved=(Moved("orders", 3, "dora", "ada"),), gap_ms=1_300, lag_before=35,
           lag_peak=160, lag_after=36),
    ]


def _lag(group: str, now: int, episodes: list[Episode]) -> list[GroupLag]:
    """A point every 10 s over the last hour, the lag at each episode's peak while it ran."""
    points = []
    for ts in range(now - 60 * MIN_MS, now, 10_000):
        during = [e for e in episodes if e.start_ms <= ts <= (e.end_ms or 0) + 30_000]
        lag = (during[0].impact.lag_peak or 0) if during else 40 + ts // 10_000 % 7
        points.append(GroupLag(group, ts, lag))
    return points


def _write_memory(path: Path, cluster: str, bootstrap: str, group: str) -> list[Episode]:
    """The memory as a recorder of this cluster writes it: under Kafka's cluster id (the key
    `watch`'s own recorder files its cycles under, so the page reads one cluster), named by
    the servers the page is pointed at."""
    now = int(time.time() * 1000)
    episodes = _episodes(cluster, group, now)
    store = SqliteStore(path)
    try:
        store.write(Cycle(cluster, bootstrap, now, episodes=episodes,
                          lag=_lag(group, now, episodes)))
    finally:
        store.close()
    return episodes


def _card(page) -> str:
    # a fragment's rerun can briefly show the old and the new copy of an element
    return page.locator(".st-key-timeline_card").first.inner_text(timeout=10_000)


def _wait_card(page, *texts: str, what: str) -> str:
    def showing() -> str | None:
        card = _card(page)
        return card if all(t in card for t in texts) else None

    return wait_until(showing, 60, interval=0.3, what=what)


@pytest.mark.timeout(300)
def test_timeline_scrubs_the_memory_and_survives_an_unreadable_one(
        broker, kafka, chromium, unique, artifacts_dir, tmp_path):
    group = f"payments-{unique}"
    cluster = AdminClient(kafka.client_config()).list_topics(timeout=30).cluster_id
    data = tmp_path / "data"
    data.mkdir()
    joined, worst, left, newest = _write_memory(data / HISTORY_FILE, cluster, kafka.bootstrap,
                                                group)
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / HISTORY_FILE).write_bytes(GARBAGE)

    with chromium(viewport=(1500, 2000)) as page:  # the whole page, for the picture
        with watch_server(kafka.bootstrap, tmp_path / "watch.log", data, "--group",
                          group) as url:
            try:
                _scrub(page, url, group, joined, worst, left, newest, artifacts_dir)
            finally:
                save_shot(page, artifacts_dir / "timeline-last.png")
        with watch_server(kafka.bootstrap, tmp_path / "watch-damaged.log", damaged,
                          "--group", group) as url:
            try:
                _unreadable(page, url, damaged / HISTORY_FILE)
            finally:
                save_shot(page, artifacts_dir / "timeline-damaged.png")


def _scrub(page, url: str, group: str, joined: Episode, worst: Episode, left: Episode,
           newest: Episode, artifacts_dir: Path) -> None:
    open_page(page, f"{url}/timeline", page.get_by_role("heading", name=f"Rebalances of {group}"))

    # the newest episode is shown first: its cause, its evidence, its cost
    card = _wait_card(page, CRASHED, newest.causes[0].evidence, what="the newest episode's card")
    assert "1 partition moved: dora → ada (orders-3)" in card, card
    assert "lag 35 → peak 160 → 36" in card, card

    # every episode of the span in the table, newest first
    def rows() -> list[list[str]]:
        return page.evaluate("""
() => [...document.querySelectorAll('.st-key-timeline_episodes table tbody tr')]
        .map(tr => [...tr.querySelectorAll('td')].map(td => td.innerText.trim()))
""") or []

    def four_rows() -> list[list[str]] | None:
        shown = rows()
        return shown if len(shown) == 4 else None

    table = wait_until(four_rows, 90, what="four episodes in the table")  # 30 s: not at load 29
    causes = [next(c for c in row if c in (CRASHED, LEFT, EXPIRED, JOINED)) for row in table]
    assert causes == [CRASHED, LEFT, EXPIRED, JOINED], table

    # the lag chart: the line and a band per episode, each cause in the legend
    chart = page.locator(".st-key-timeline_lag .js-plotly-plot").first
    chart.wait_for(timeout=90_000)
    wait_until(lambda: page.locator(".st-key-timeline_lag .barlayer .point").count() >= 4, 90,
               what="a band per episode on the lag chart")
    line = page.locator(".st-key-timeline_lag .scatterlayer path.js-line")
    wait_until(lambda: any(len(line.nth(i).get_attribute("d") or "") > 100
                           for i in range(line.count())), 30, what="the lag line drawn")
    # read until whole: the chart's fragment redraws it every few seconds, and a read in the
    # middle of a redraw once found no legend at all
    def legend() -> str:
        return " ".join(page.locator(".st-key-timeline_lag .legendtext").all_text_contents())

    try:
        wait_until(lambda: all(c in legend() for c in (CRASHED, LEFT, EXPIRED, JOINED)), 90,
                   interval=0.5, what="every cause in the chart's legend")
    except TimeoutError:
        raise AssertionError(f"the legend reads {legend()!r}") from None
    text = page.inner_text("body")
    assert "partition-seconds without an owner" in text  # how the worst is chosen, said

    # the last hour: the same four, the chart spread over it, for the picture
    # a click lost in a fragment's rerun on a loaded machine is made again, as a user would;
    # the span is a required choice, so a second click on it changes nothing
    span = page.locator(".st-key-timeline_span button", has_text="last 1 h").first
    deadline = time.monotonic() + 60
    while True:
        span.click()
        try:
            wait_until(lambda: "4 rebalances last 1 h" in page.inner_text("body"), 15,
                       what="the span narrowed to the last hour")
            break
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise
    wait_until(lambda: page.locator(".st-key-timeline_lag .barlayer .point").count() >= 4, 90,
               what="the bands on the last hour's chart")
    save_shot(page, artifacts_dir / SHOT, full_page=False)
    # a band names its cause and evidence on hover, not by its colour alone
    assert LEFT in _hover(page, causes[::-1].index(LEFT), left.causes[0].evidence)

    # previous: the one before the newest
    press_until(page, "timeline_previous",
                lambda: left.causes[0].evidence in _card(page), 60,
                what="the previous episode's card", shown=lambda: _card(page))
    assert LEFT in _card(page)
    # worst: the one that left partitions without an owner
    press_until(page, "timeline_worst",
                lambda: worst.causes[0].evidence in _card(page), 60,
                what="the worst episode's card", shown=lambda: _card(page))
    card = _card(page)
    assert "91.0 partition-seconds without an owner" in card, card
    assert "processing gap 51.5 s" in card and "lag 40 → peak 9,400 → 45" in card, card


def _hover(page, band: int, expected: str) -> str:
    """The hover box's text once it shows `expected`, with the mouse in the middle of the
    chart's `band`-th band (bands in the order of their causes' first episodes). The mouse
    leaves the chart before each try: a box left from an earlier hover, or a refresh that
    redrew the chart under the mouse, would show something else."""
    points = page.locator(".st-key-timeline_lag .barlayer .point")
    label = page.locator(".st-key-timeline_lag .hoverlayer .hovertext")

    def showing() -> str | None:
        page.mouse.move(1, 1)
        box = points.nth(band).bounding_box(timeout=5_000)
        if box is None:
            return None
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        text = " ".join(label.all_text_contents())
        return text if expected in text else None

    return wait_until(showing, 90, interval=0.5, what=f"{expected!r} on hover")


def _unreadable(page, url: str, path: Path) -> None:
    open_page(page, f"{url}/timeline", page.get_by_role("heading", name="Timeline"))
    # the words of each warning (its icon is a ligature: text too)
    warnings = page.locator("[data-testid=stAlertContentWarning] [data-testid=stMarkdownContainer]")

    def memory_warnings() -> list[str] | None:
        shown = [w for w in warnings.all_inner_texts() if str(path) in w]
        return shown or None

    shown = wait_until(memory_warnings, 60, interval=0.5, what="the memory's warning")
    assert len(shown) == 1 and "\n" not in shown[0].strip(), shown
    assert "damaged" in shown[0] or "not a database" in shown[0], shown
    # the rest of the page still renders: the span picker, the live view, the scrubber
    page.get_by_role("heading", name="Scrub back through the last snapshots").wait_for(
        timeout=30_000)
    assert page.locator(".st-key-timeline_span").count() >= 1
    assert page.locator(".st-key-timeline_card").count() == 0

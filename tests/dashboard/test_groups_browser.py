"""`groupscope watch` in a real browser: it opens on the Groups page, which lists the seeded
groups with their lag; the name filter narrows it; selecting a group opens its page, which
for a group that is not groupscope's speaks of members and has no dead-letter tile."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import Producer

from backend.netutil import wait_until
from dashboard.groups_model import COLUMNS
from tests.dashboard.browser import open_page, save_shot, web_server
from tests.dashboard.group import Member, create_topic
from tests.observer.conftest import Members, SteadyProducer
from tests.observer.seed import seed_groups

PARTITIONS = 3
BACKLOG = 200  # records per partition before the groups commit
# offsets-only groups (Empty, as most groups of a production cluster are): name -> commit
SEEDED = {"payments": 20, "invoices": 120, "audit-log": 190, "search-indexer": BACKLOG}
LIVE = "fraud-scorer"  # a classic group with a real member
KIP848 = "recommender"  # a KIP-848 group (protocol "consumer") with a real member
SHOT = "overview.png"  # copied to assets/screenshots/ for the README


def watch_server(bootstrap: str, log_path: Path, data: Path, *extra: str):
    """`groupscope watch --bootstrap … [extra]` on a free port, with none of this process's
    GROUPSCOPE_* settings; yields its URL; always stopped."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUPSCOPE_")}
    env["GROUPSCOPE_DATA"] = str(data)
    return web_server(env, log_path, command=("watch", "--bootstrap", bootstrap, *extra),
                      inherit=False)


def grid_rows(page) -> list[list[str]]:
    """The cells of the Groups table's rendered rows (the grid keeps an accessible table of
    the visible rows beside its canvas)."""
    return page.evaluate("""
() => [...document.querySelectorAll('[data-testid=stDataFrame] table tbody tr')]
        .map(tr => [...tr.querySelectorAll('td')].map(td => td.innerText.trim()))
""") or []


def _filter(page, text: str) -> None:
    box = page.locator(".st-key-groups_name input")
    box.fill(text)
    box.press("Enter")


@pytest.mark.idle  # a watch, Chromium and live members for half a minute, mostly waiting
@pytest.mark.timeout(300)
def test_watch_opens_on_groups_filters_and_opens_a_foreign_group(
        broker, kafka, chromium, unique, artifacts_dir, tmp_path):
    topic = f"orders-{unique}"
    create_topic(kafka, topic, PARTITIONS)
    producer = Producer(kafka.client_config())
    for p in range(PARTITIONS):
        for i in range(BACKLOG):
            producer.produce(topic, value=b"%d" % i, partition=p)
    assert producer.flush(30) == 0
    names = {f"{name}-{unique}": at for name, at in SEEDED.items()}
    commits = {g: {(topic, p): at for p in range(PARTITIONS)} for g, at in names.items()}
    seed_groups(kafka, commits)  # retries while a fresh broker's coordinator loads
    live_group, kip848 = f"{LIVE}-{unique}", f"{KIP848}-{unique}"
    member = Member(kafka, live_group, topic, "scorer-1")
    kip848_members = Members(kafka, kip848, topic, "consumer", "uniform")
    kip848_members.start("rec-1")
    # nobody reads for the seeded groups while this writes: they fall behind
    writer = SteadyProducer(kafka, topic, rate=20.0).start()
    try:
        with watch_server(kafka.bootstrap, tmp_path / "watch.log", tmp_path / "data") as url, \
                chromium(viewport=(1700, 900)) as page:
            try:
                _check(page, url, names, live_group, kip848, unique, artifacts_dir)
            finally:
                save_shot(page, artifacts_dir / "groups-last.png")
    finally:
        writer.stop()
        member.close()
        kip848_members.stop_all()


def _check(page, url: str, names: dict[str, int], live_group: str, kip848: str, unique: str,
           artifacts_dir: Path) -> None:
    # the root: Groups is watch mode's first page
    open_page(page, url, page.get_by_role("heading", name="Consumer groups"))
    _filter(page, unique)  # the session's broker holds other tests' groups too
    ours = set(names) | {live_group, kip848}

    def listed_with_lag():
        rows = {r[0]: r for r in grid_rows(page) if r and r[0] in ours}
        described = {g: r for g, r in rows.items() if "…" not in r[1:9]}
        return described if len(described) == len(ours) else None

    rows = wait_until(listed_with_lag, 90, interval=0.5, what="our groups described")
    for group, committed in names.items():
        cells = rows[group]
        lag = int(cells[COLUMNS.index("lag")].replace(",", ""))  # at least the backlog left
        assert lag >= PARTITIONS * (BACKLOG - committed), (group, cells)
        assert "Empty" in cells and "0" == cells[COLUMNS.index("members")], cells
    assert rows[live_group][4] == "1" and "Stable" in rows[live_group], rows[live_group]
    assert rows[live_group][3] == "classic / range", rows[live_group]
    assert rows[kip848][3] == "consumer / uniform" and rows[kip848][4] == "1", rows[kip848]

    # more cycles give every row a trend and a rate, and the groups nobody reads for (lag,
    # no owner, a commit that never moves) turn STOP from the third: the README's screenshot
    def stopped():
        got = {r[0]: r for r in grid_rows(page) if r and r[0] in names}
        return got if len(got) == len(names) and all(
            r[COLUMNS.index("rate")].endswith("msg/s") for r in got.values()) and any(
            "STOP" in r[1] for r in got.values()) else None

    rated = wait_until(stopped, 90, interval=0.5, what="rates and STOP after three cycles")
    catch_up = COLUMNS.index("catch_up")
    assert any(r[catch_up].startswith("falling behind +") for r in rated.values()), rated
    # health, worst first: the STOP rows lead the table
    first = grid_rows(page)[0]
    assert "STOP" in first[1], first
    shot = artifacts_dir / SHOT
    save_shot(page, shot)

    # the filter narrows the table to the matching group
    only = f"invoices-{unique}"
    _filter(page, only)
    wait_until(lambda: [r[0] for r in grid_rows(page) if r] == [only], 30, interval=0.3,
               what="only the filtered group in the table")

    # selecting the KIP-848 group's row opens its page
    _filter(page, kip848)
    wait_until(lambda: [r[0] for r in grid_rows(page) if r] == [kip848], 30, interval=0.3,
               what="the KIP-848 group alone in the table")
    _select_first_row(page)
    page.get_by_role("heading", name="Watch a consumer group").wait_for(timeout=30_000)
    header = page.locator("h3").filter(has_text=kip848).first
    header.wait_for(timeout=60_000)
    wait_until(lambda: "group epoch" in header.inner_text(), 30,
               what="the KIP-848 group's epoch in its header")
    metrics = page.locator("[data-testid=stMetricLabel]")
    wait_until(lambda: "members" in metrics.all_inner_texts(), 30,
               what="the members tile on the group's page")
    labels = metrics.all_inner_texts()
    assert "replicas" not in labels and "dead letters" not in labels, labels
    page.get_by_role("heading", name="Members").wait_for(timeout=30_000)
    page.locator(".gs-card[data-replica='rec-1']").wait_for(timeout=30_000)
    body = page.inner_text("body")
    assert "msg/s · batch" not in body and "dead letters" not in body
    save_shot(page, artifacts_dir / "group-page-foreign.png")


def _select_first_row(page) -> None:
    """Tick the first row's selection box: the grid draws it on a canvas, left of the row."""
    grid = page.locator("[data-testid=stDataFrame]").first
    box = grid.bounding_box()
    assert box is not None
    grid.click(position={"x": 16, "y": 35 + 17})

"""`groupscope watch` remembers across a restart: a member killed while one `watch` ran is on
the Timeline of the next, with its cause, in a real browser; and `groupscope history` says the
same from the file alone."""

from __future__ import annotations

import subprocess
import sys

import pytest

from backend.contracts.history import EXPIRED, HISTORY_FILE
from backend.history.sqlite import SqliteStore
from backend.netutil import wait_until
from tests.dashboard.browser import open_page
from tests.dashboard.test_groups_browser import watch_server
from tests.observer.conftest import REPO, Members, SteadyProducer, create_topic, told_or_unseen

SESSION_MS = 15_000


def _episodes(path) -> list:
    """Every final episode in the memory file, oldest first."""
    if not path.exists():
        return []
    store = SqliteStore(path)
    try:
        return [e for c in store.clusters() for e in store.episodes(c.key)
                if e.end_ms is not None]
    finally:
        store.close()


def _departure(path, member: str):
    """The final episode in which `member` left, once the memory has it."""
    return next((e for e in _episodes(path) if member in e.left), None)


@pytest.mark.timeout(300)
def test_a_rebalance_seen_by_one_watch_is_on_the_next_ones_timeline(
        broker, kafka, chromium, unique, tmp_path):
    topic, group = f"remember-{unique}", f"remember-{unique}"
    create_topic(kafka, topic, 4)
    data = tmp_path / "data"
    data.mkdir()
    producer = SteadyProducer(kafka, topic, rate=40.0).start()
    # a session long enough that a loaded machine's polls still see the killed member listed
    # and silent before it goes (what makes it "expired", not "left")
    members = Members(kafka, group, topic, "classic", "range",
                      extra={"session.timeout.ms": SESSION_MS})
    try:
        members.start("keeps")
        members.start("killed")
        with watch_server(kafka.bootstrap, tmp_path / "watch-1.log", data, "--group", group,
                          "--interval", "1"):
            # three looks after both were listed: the killed one's partitions seen committing
            # (a member killed before any look saw its commits advance cannot be told expired)
            wait_until(lambda: (data / HISTORY_FILE).exists() and _looks_with_both(data, group)
                       >= 3, 90, what="three looks at both members in the first watch's memory")
            members.kill("killed")
            try:
                episode = wait_until(lambda: _departure(data / HISTORY_FILE, "killed"),
                                     60 + SESSION_MS / 1000, what="the departure in the memory")
            except TimeoutError as exc:
                kept = _episodes(data / HISTORY_FILE)
                raise AssertionError(f"{exc}; the memory has {kept}") from exc
        assert episode.left == ("killed",)
        # an expiry, unless the watch (starved by a loaded machine) did not look for seconds
        # around it: then "cannot be told", never "left"
        expired = told_or_unseen(episode, EXPIRED)
        with chromium() as page, watch_server(kafka.bootstrap, tmp_path / "watch-2.log", data,
                                              "--group", group) as url:
            open_page(page, f"{url}/timeline",
                      page.get_by_role("heading", name=f"Rebalances of {group}"))

            def card() -> str | None:
                text = page.locator(".st-key-timeline_card").first.inner_text(timeout=10_000)
                return text if episode.cause in text and "killed" in text else None

            shown = wait_until(card, 60, interval=0.5, what="the departure on the new Timeline")
            told = ("stayed listed", "until the group noticed") if expired \
                else ("went unseen for", "cannot be told")
            assert all(words in shown for words in told), shown
    finally:
        members.stop_all()
        producer.stop()
    out = subprocess.run([sys.executable, "-m", "backend.cli", "history", "--group", group,
                          "--history", str(data / HISTORY_FILE), "--bootstrap",
                          kafka.bootstrap, "--since", "1h"], capture_output=True, text=True,
                         timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert episode.cause in out.stdout and "killed" in out.stdout


def _looks_with_both(data, group: str) -> int:
    """How many of watch's looks the memory has since its last state change, when that change
    listed two members (0 otherwise)."""
    store = SqliteStore(data / HISTORY_FILE)
    try:
        for c in store.clusters():
            states = store.states(c.key, group, 0)
            if states and states[-1].members == 2:
                since = states[-1].ts_ms
                return sum(1 for ts in store.lag(c.key, group, since, partitions=False).times
                           if ts > since)
        return 0
    finally:
        store.close()

"""The README's screenshots from a real `groupscope up`, by one command: `make screenshots`.

Why a script: pictures copied by hand from test artifacts drift from the product and carry
whatever the test happened to set up (a pytest temporary path, "No supervisor" in a sidebar
whose test ran no supervisor). This one starts what a user starts -- `groupscope up
--brokers 3`, on free ports, in a temporary data directory (never the user's `.groupscope`)
-- acts on it through the control API that `groupscope ctl` uses, and photographs each page
in headless Chromium (Playwright driving Debian's chromium, as the browser tests do) once the
page shows what its picture is about: at a projector's 1280x720 under the names the README
and the guides use, and again at full HD as NAME-1920x1080.png. Written into
assets/screenshots/:

  status.png             Status, from the top: Kafka (three brokers) and Spark reachable;
                         taken once the brokers view below also says three up and none
                         under-replicated, with the presenter's Kill button next to each
                         (so the page reaches this stack's supervisor)
  overview.png           Groups: the stack's group and a share group, both described, the
                         stack's with its lag rate
  share-group.png        the share group's page (opened from its Groups row): every
                         partition delivered to a member, both members among the sharers
  live-after-kill.png    Live: a replica killed (`ctl kill`), its partitions owned by the
                         others, no lane unowned
  timeline.png           Timeline: the kill above from the backend's memory, its causes (the
                         presenter's kill, the expiry it caused) and cost, the lag shaded
  live-idle-warning.png  Live: scaled to one replica more than partitions (`ctl scale`), the
                         warning names the idle replica and that replica owns no lane
  queues.png             Queues: share replicas scaled past the partitions (`ctl share
                         scale`) beside the consumer group's, every share replica working,
                         a consumer replica idle
  lab-after-kill.png     Lab: the four default groups of two replicas (`POST /lab/start`),
                         one replica of each killed at the same instant, the scoreboard
                         measured; the lab is stopped afterwards
  replay-preview.png     Streams: the presenter's replay to the beginning previewed, per
                         partition and per car (not applied)
  streams-at-most-once.png  Streams: the replicas restarted committing before processing
                         (`ctl options --commit before-processing`), one killed until the
                         summaries show gaps: the records that commit mode lost
  brokers.png            Status: the broker that led the most partitions killed (`ctl broker
                         kill`), shown down and leading none; it is started again afterwards

Not made here: room-presenter.png, room-participant.png and room-leaderboard.png. A room
needs a participant's laptop on the room's network, which the tests play with a network
namespace (root, iproute2); they come from the room tests (tests/system/room) in
test-artifacts/.

Every wait polls a real condition with a deadline (the stack's own output, the control API,
the page's markup), never a fixed sleep; a page that does not get there ends the run with one
line naming the picture and what did not appear, writes nothing more, and keeps the
temporary directory (`up`'s output, the stack's logs, the page as it was) for a look. Before
each picture the page is checked for the control token and the temporary directory: neither
may be on screen. A picture is written whole or not at all (a temporary file renamed).

Whatever it started is stopped on the way out, after an error, Ctrl-C or SIGTERM alike: the
browser is closed, `up` gets SIGTERM and stops its processes in order (SIGKILL if it has not
exited in time), and any process still carrying this run's mark in its environment (every
descendant of this one inherits it, Chromium included) is SIGKILLed by pid.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as `python tools/screenshots.py` from anywhere
    sys.path.insert(0, str(REPO))

from backend.contracts import DEFAULT_GROUP, INPUT_TOPIC  # noqa: E402
from backend.contracts.lab import DEFAULT_LAB_PROTOCOLS, KILL  # noqa: E402
from backend.control_files import TOKEN_FILE  # noqa: E402
from backend.kafka.clusterfile import read_cluster  # noqa: E402
from backend.kafka.settings import KafkaSettings  # noqa: E402
from backend.netutil import free_port, wait_until  # noqa: E402
from backend.proc import STOP_WITHIN_S, reap, send, spawn  # noqa: E402
from backend.supervisor.client import ControlClient  # noqa: E402
from dashboard.groups_model import COLUMNS  # noqa: E402
from tests.dashboard.browser import CHROMIUM, chromium_page, lanes  # noqa: E402
from tests.dashboard.screen import settle  # noqa: E402

if TYPE_CHECKING:
    from confluent_kafka import ShareConsumer
    from playwright.sync_api import Page

T = TypeVar("T")

OUT = REPO / "assets" / "screenshots"
VIEWPORT = (1280, 720)  # a workshop projector: the pictures the README and guides show
ALSO_AT = ((1920, 1080),)  # each picture again at these sizes, as NAME-WxH.png
BROKERS = 3  # the Status page's brokers view needs more than one; three make a quorum
REPLICAS = 3  # what `groupscope backend` starts by default (its --replicas)
SHARE_GROUP = "dispatch"  # made by this script on the telemetry topic
SHARE_MEMBERS = ("dispatch-a", "dispatch-b")
RUN_MARK = "GROUPSCOPE_SCREENSHOTS_RUN"  # this run's id, inherited by all it starts
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# Settings of the user's shell that would point `up` elsewhere or change the stack shown:
# the pictures are of the default demo, on this machine, in a directory of its own.
NOT_INHERITED = (
    "GROUPSCOPE_BOOTSTRAP", "GROUPSCOPE_KAFKA_CONFIG", "SPARK_REMOTE", "GROUPSCOPE_SPARK_TOKEN",
    "GROUPSCOPE_SPARK_UI", "GROUPSCOPE_BROKERS", "GROUPSCOPE_SPARK_WORKERS", "GROUPSCOPE_GROUP",
    "GROUPSCOPE_TOPIC", "GROUPSCOPE_READONLY", "GROUPSCOPE_ROOM_ADDRESS",
    "GROUPSCOPE_ROOM_KAFKA_PORT", "GROUPSCOPE_CONTROL_PORT", "GROUPSCOPE_REPLICA_COMMAND",
    "GROUPSCOPE_PASSCODE_LOCKOUT_S", "FORWARDED_ALLOW_IPS",
)

# Deadlines, in seconds: generous for a busy two-core laptop, finite for a stuck run.
UP_S = 420.0  # three Kafka JVMs, Spark, the supervisor and its first replicas
READY_S = 240.0  # every replica a member, every partition owned, the group Stable
PAGE_S = 120.0  # a page drawing a steady state
MOVED_S = 60.0  # a killed replica's partitions elsewhere: 6 s session timeout and a rebalance
IDLE_S = 300.0  # four more replicas started and the group settled
BROKER_S = 90.0  # a killed node fenced (3 s) and its leaderships moved
BROKER_BACK_S = 120.0
LOSS_TRIES = 5  # kills under before-processing until one loses the batch it held
UP_STOP_S = STOP_WITHIN_S + 50.0  # `up` stops in order within STOP_WITHIN_S; then SIGKILL

# The Groups table's rendered rows: the grid keeps an accessible table of the visible rows
# beside its canvas (as tests/dashboard/test_groups_browser.py reads it).
GRID_ROWS_JS = """
() => [...document.querySelectorAll('[data-testid=stDataFrame] table tbody tr')]
        .map(tr => [...tr.querySelectorAll('td')].map(td => td.innerText.trim()))
"""
TEXT_JS = "sel => { const e = document.querySelector(sel); return e ? e.innerText : ''; }"
COUNT_JS = "sel => document.querySelectorAll(sel).length"
STATUS_BROKERS_JS = """
() => [...document.querySelectorAll('.st-key-brokers-status .gs-broker')].map(c => ({
  id: Number(c.dataset.broker), state: c.dataset.state, text: c.innerText}))
"""
SHARERS_JS = """
() => [...document.querySelectorAll('.gs-share .sharers')].map(e => e.dataset.sharers || '')
"""
WARNINGS_JS = """
() => [...document.querySelectorAll("[data-testid='stAlertContentWarning']")]
        .map(e => e.innerText)
"""
HEADER_JS = """
group => ([...document.querySelectorAll('h3')].map(h => h.innerText)
          .find(t => t.includes(group)) || '')
"""
# Elements Streamlit is redrawing (faded) or has not drawn yet (skeletons).
UNSETTLED_JS = """
() => document.querySelectorAll('[data-stale="true"], [data-testid="stSkeleton"]').length
"""
# Bring the first element matching `selector` (and holding `text`) into the viewport:
# Streamlit scrolls its main area, not the window, so the scrolling ancestor is moved;
# `margin` keeps it clear of the fixed navigation bar (start) or the bottom edge (end).
SCROLL_JS = """
([selector, text, block, margin]) => {
  const el = [...document.querySelectorAll(selector)]
    .find(e => !text || e.innerText.includes(text));
  if (!el) return false;
  el.scrollIntoView({block});
  let box = el.parentElement;
  while (box && !(box.scrollHeight > box.clientHeight
                  && /(auto|scroll)/.test(getComputedStyle(box).overflowY))) {
    box = box.parentElement;
  }
  (box || document.scrollingElement).scrollBy(0, block === 'start' ? -margin : margin);
  return true;
}
"""


class NotShown(RuntimeError):
    """A page did not reach the state its picture is about in time, or showed what it must
    not; the message is the one line the run ends with."""


class StackGone(RuntimeError):
    """`groupscope up` exited while the pictures were being made."""


class Interrupted(BaseException):
    """SIGTERM or SIGHUP: unwinds like Ctrl-C's KeyboardInterrupt, so every `finally` that
    stops something runs, and no `except Exception` on the way swallows it."""


# ---- the stack ----------------------------------------------------------------------------

@dataclass
class Stack:
    """`groupscope up --brokers N` in `root` (data in root/data, its output in root/up.log),
    on free ports, in a session of its own so only this script decides when it stops."""

    root: Path
    brokers: int = BROKERS
    proc: subprocess.Popen[bytes] | None = None
    url: str = ""

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "up.log"

    def start(self) -> None:
        web = free_port()
        env = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
        env.update(GROUPSCOPE_DATA=str(self.data), GROUPSCOPE_KAFKA_PORT=str(free_port()),
                   GROUPSCOPE_SPARK_PORT=str(free_port()), GROUPSCOPE_WEB_PORT=str(web),
                   PYTHONUNBUFFERED="1")
        self.url = f"http://127.0.0.1:{web}"  # loopback: this browser is the presenter
        with self.log.open("wb") as out:  # the child keeps its own descriptor
            self.proc = spawn([sys.executable, "-m", "backend.cli", "up",
                               "--brokers", str(self.brokers)],
                              cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, start_new_session=True)

    def check(self) -> None:
        """The `abort` of every wait: a stack that has exited fails it at once."""
        if self.proc is not None and self.proc.poll() is not None:
            raise StackGone(f"`groupscope up` exited with code {self.proc.returncode} "
                            f"(its output: {self.log})")

    def said(self, text: str) -> bool:
        return text in self.log.read_text(errors="replace")

    def control(self) -> ControlClient:
        """Found afresh for every call: `up` restarts a supervisor that a signal killed,
        on another port."""
        return ControlClient.discover(self.data, timeout=30)

    def token(self) -> str:
        return (self.data / TOKEN_FILE).read_text().strip()

    def bootstrap(self) -> str | None:
        cluster = read_cluster(self.data / "broker")
        return str(cluster["bootstrap"]) if cluster else None

    def stop(self) -> None:
        """SIGTERM, as a terminal's Ctrl-C would reach it: `up` stops the dashboard and the
        supervisor first, then Kafka and Spark. SIGKILL if it has not exited in time; its
        children die with it (backend/proc.py's exec shim)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            send(self.proc, signal.SIGTERM)
        reap(self.proc, UP_STOP_S, group=True)


def until(picture: str, check: Callable[[], T | None], timeout: float, what: str,
          abort: Callable[[], object] | None = None, interval: float = 0.5) -> T:
    """wait_until, whose timeout is the run's one-line error naming what did not appear."""
    try:
        return wait_until(check, timeout, interval=interval, what=what, abort=abort)
    except TimeoutError:
        raise NotShown(f"{picture}: {what} did not appear within {timeout:.0f} s") from None


def _healthy(url: str) -> bool:
    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
        return resp.read().strip() == b"ok"


def wait_ready(stack: Stack) -> int:
    """Up, serving, three brokers alive, and the replicas owning every partition of a Stable
    group; the topic's partition count."""
    where = "the stack"
    until(where, lambda: stack.said("groupscope is up"), UP_S,
          f"`groupscope up --brokers {stack.brokers}` saying it is up", stack.check, 1.0)
    until(where, lambda: _healthy(stack.url), 60, "the dashboard's health endpoint answering",
          stack.check)

    def brokers_alive() -> bool:
        nodes = stack.control().brokers().brokers
        return len(nodes) == stack.brokers and all(n.alive for n in nodes)

    until(where, brokers_alive, 60, f"{stack.brokers} Kafka nodes alive", stack.check)

    def owned() -> int | None:
        status = stack.control().status()
        running = status.running
        mine = set().union(*(r.partitions for r in running)) if running else set()
        return status.partitions if (
            status.partitions and len(running) == REPLICAS and status.group_state == "Stable"
            and all(r.member and r.partitions for r in running)
            and mine == set(range(status.partitions))) else None

    return until(where, owned, READY_S,
                 f"{REPLICAS} replicas owning every partition of a Stable group", stack.check)


# ---- a share group ------------------------------------------------------------------------

@dataclass
class ShareLoad:
    """Two members of one share group reading the telemetry topic, polled on one thread (as
    tests/system/test_broker_faults.py's GroupLoad does): each poll acknowledges what the
    previous one delivered, so the group has sharers and a moving backlog to show."""

    bootstrap: str
    group: str = SHARE_GROUP
    members: tuple[str, ...] = SHARE_MEMBERS
    consumers: list[ShareConsumer] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> ShareLoad:
        from confluent_kafka import ShareConsumer

        settings = KafkaSettings(bootstrap=self.bootstrap)
        try:
            for member in self.members:
                consumer = ShareConsumer(settings.client_config(
                    **{"group.id": self.group, "client.id": member}))
                self.consumers.append(consumer)
                consumer.subscribe([INPUT_TOPIC])
        except BaseException:
            self.__exit__()
            raise
        self._thread = threading.Thread(target=self._run, name="share-load", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            for consumer in self.consumers:
                with contextlib.suppress(Exception):  # a broker away: the next poll retries
                    consumer.poll(0.05)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        for consumer in self.consumers:
            with contextlib.suppress(Exception):
                consumer.close()


# ---- the pages ----------------------------------------------------------------------------

@dataclass
class Camera:
    """The browser page, where the pictures go, and the checks every picture passes."""

    page: Page
    stack: Stack
    out: Path
    also_at: tuple[tuple[int, int], ...] = ALSO_AT

    def until(self, picture: str, check: Callable[[], T | None], timeout: float,
              what: str) -> T:
        """Wait for the page's state; on a miss, keep the page as it was beside the logs."""
        try:
            return until(picture, check, timeout, what, self.stack.check)
        except NotShown:
            with contextlib.suppress(Exception):
                self.page.screenshot(path=str(self.stack.root / f"failed-{picture}"))
            raise

    def open(self, path: str, picture: str) -> None:
        """Load a page until Streamlit has drawn something: on some first loads headless
        Chromium's Streamlit frontend never opens its websocket and stays blank, where a
        reload connects (tests/system/room/test_presenter_browser.py's open_app)."""
        url = f"{self.stack.url}/{path}"
        for attempt in range(3):
            if attempt == 0:
                self.page.goto(url)
            else:
                self.page.reload()
            with contextlib.suppress(TimeoutError):
                wait_until(lambda: self.page.inner_text("body").strip(), 20, interval=0.5,
                           what=f"{url} drawn", abort=self.stack.check)
                return
        raise NotShown(f"{picture}: the dashboard at {url} drew nothing in three loads")

    def _write(self, picture: str) -> None:
        partial = self.out / f".{picture}.partial.png"
        try:
            self.page.screenshot(path=str(partial), animations="disabled")
            os.replace(partial, self.out / picture)
        finally:
            partial.unlink(missing_ok=True)

    def text(self, selector: str) -> str:
        return str(self.page.evaluate(TEXT_JS, selector))

    def count(self, selector: str) -> int:
        return int(self.page.evaluate(COUNT_JS, selector))

    def scroll(self, selector: str, text: str = "", block: str = "start",
               margin: int = 80) -> None:
        self.page.evaluate(SCROLL_JS, [selector, text, block, margin])

    def shoot(self, picture: str, about: str) -> None:
        """Write the picture once nothing on the page is being redrawn, if nothing secret or
        local is on it; one line says what it shows."""
        with contextlib.suppress(TimeoutError):  # a fragment's redraw is a short fade
            wait_until(lambda: self.page.evaluate(UNSETTLED_JS) == 0, 5, interval=0.1)
        html = self.page.content()
        if self.stack.token() in html:
            raise NotShown(f"{picture}: the page shows the control token; not written")
        if str(self.stack.root) in self.page.inner_text("body"):
            raise NotShown(f"{picture}: the page shows the temporary directory "
                           f"{self.stack.root}; not written")
        self.out.mkdir(parents=True, exist_ok=True)
        self._write(picture)
        main = self.page.viewport_size
        if main and self.also_at:
            try:
                for width, height in self.also_at:
                    self.page.set_viewport_size({"width": width, "height": height})
                    settle(self.page)
                    self._write(picture.replace(".png", f"-{width}x{height}.png"))
            finally:
                self.page.set_viewport_size(main)
        shown = self.out / picture
        with contextlib.suppress(ValueError):
            shown = shown.relative_to(Path.cwd())
        print(f"wrote {shown}: {about}", flush=True)


def status_shot(cam: Camera) -> None:
    picture = "status.png"
    cam.open("status", picture)
    n = cam.stack.brokers
    summary = f"{n} of {n} brokers up · 0 under-replicated · 0 offline partitions"

    missing: list[str] = []

    def shown() -> bool:
        kafka, spark = cam.text(".st-key-kafka-status"), cam.text(".st-key-spark-status")
        cards = cam.page.evaluate(STATUS_BROKERS_JS) or []
        checks = {
            "Kafka reachable": "reachable" in kafka and "unreachable" not in kafka
            and f"{n} brokers" in kafka,
            "Spark answered": "answered a test query" in spark,
            "the brokers' summary": summary in cam.text(".st-key-brokers-status"),
            "every broker card up": len(cards) == n and all(c["state"] == "up" for c in cards),
            # the presenter's buttons: the page reaches this stack's supervisor
            # Streamlit may keep a stale copy of an element while it redraws: at least n
            "a Kill button per broker": cam.count(
                "[class*='st-key-status_brokers_kill_'] button:not([disabled])") >= n,
        }
        if not all(checks.values()):
            found = cam.count("[class*='st-key-status_brokers_kill_'] button")
            enabled = cam.count("[class*='st-key-status_brokers_kill_'] button:not([disabled])")
            checks[f"(Kill buttons found {found}, enabled {enabled})"] = False
        missing[:] = [name for name, ok in checks.items() if not ok]
        return not missing

    try:
        cam.until(picture, shown, PAGE_S,
                  f"Kafka and Spark reachable and \"{summary}\" with a Kill button per broker "
                  f"on the Status page")
    except NotShown as exc:
        raise NotShown(f"{exc} (missing: {', '.join(missing)})") from None
    cam.shoot(picture, f"Status: Kafka ({n} brokers) and Spark reachable, {n} of {n} "
                       f"brokers up")


def groups_shots(cam: Camera) -> None:
    """overview.png and share-group.png, while the share group's two members read."""
    bootstrap = cam.until("overview.png", cam.stack.bootstrap, 30,
                          "the Kafka cluster's cluster.json")
    with ShareLoad(bootstrap):
        picture = "overview.png"
        cam.open("groups", picture)
        ours = (DEFAULT_GROUP, SHARE_GROUP)

        def rows() -> dict[str, list[str]]:
            return {r[0]: r for r in cam.page.evaluate(GRID_ROWS_JS) or [] if r}

        protocol, members, rate = (COLUMNS.index(c) for c in ("protocol", "members", "rate"))

        def listed() -> dict[str, list[str]] | None:
            seen = rows()
            if not all(g in seen and len(seen[g]) > members for g in ours):
                return None
            share, own = seen[SHARE_GROUP], seen[DEFAULT_GROUP]
            described = all("…" not in cell for g in ours for cell in seen[g][1:9])
            # the grid draws only the columns in view: the rate, when it is, has its figure
            rated = len(own) <= rate or own[rate].endswith("msg/s")
            return seen if (described and share[protocol].startswith("share")
                            and share[members] == str(len(SHARE_MEMBERS))
                            and rated) else None

        cam.until(picture, listed, PAGE_S,
                  f"{DEFAULT_GROUP} (with its lag rate) and the share group {SHARE_GROUP} "
                  f"(with {len(SHARE_MEMBERS)} members) described on the Groups page")
        cam.shoot(picture, f"Groups: {DEFAULT_GROUP} and the share group {SHARE_GROUP}")

        picture = "share-group.png"
        box = cam.page.locator(".st-key-groups_name input")
        box.fill(SHARE_GROUP)
        box.press("Enter")
        cam.until(picture, lambda: list(rows()) == [SHARE_GROUP], 30,
                  f"{SHARE_GROUP} alone in the Groups table")
        # the grid draws each row's selection box on a canvas, left of the row
        cam.page.locator("[data-testid=stDataFrame]").first.click(
            position={"x": 16, "y": 35 + 17})

        def shared() -> list[str] | None:
            lanes_ = list(cam.page.evaluate(SHARERS_JS) or [])
            sharers = {name for s in lanes_ for name in s.split(",") if name}
            return lanes_ if (lanes_ and all(lanes_) and sharers == set(SHARE_MEMBERS)
                              and "share group" in cam.page.evaluate(HEADER_JS, SHARE_GROUP)
                              ) else None

        found = cam.until(picture, shared, PAGE_S,
                          f"{SHARE_GROUP}'s page with every partition delivered to a member "
                          f"and both {' and '.join(SHARE_MEMBERS)} among the sharers")
        cam.scroll(".gs-share", block="end", margin=24)
        cam.shoot(picture, f"{SHARE_GROUP}'s page: {len(found)} partitions shared by "
                           f"{', '.join(SHARE_MEMBERS)}")


def live_shots(cam: Camera, partitions: int) -> None:
    """live-after-kill.png, then live-idle-warning.png, on the Live page of one session."""
    picture = "live-after-kill.png"
    cam.open("", picture)  # Live is the default page: it lives at the root

    def header() -> str:
        return str(cam.page.evaluate(HEADER_JS, DEFAULT_GROUP))

    def controls() -> bool:  # the sidebar reaches this stack's supervisor
        return cam.count(".st-key-ctl_kill button:not([disabled])") > 0

    def owned_by(expect: int | None = None, without: str | None = None
                 ) -> list[dict[str, Any]] | None:
        current = lanes(cam.page)
        owners = {lane["owner"] for lane in current}
        return current if (len(current) == partitions and "unowned" not in owners
                           and (expect is None or len(owners) == expect)
                           and without not in owners and "Stable" in header()
                           and controls()) else None

    before = cam.until(picture, lambda: owned_by(REPLICAS), PAGE_S,
                       f"{partitions} lanes owned by {REPLICAS} replicas of a Stable group, "
                       f"with the sidebar's controls, on the Live page")
    victim = str(before[0]["owner"])
    cam.stack.control().kill(victim)
    after = cam.until(picture, lambda: owned_by(without=victim), MOVED_S,
                      f"{victim}'s partitions owned by the other replicas after `ctl kill "
                      f"{victim}`")
    cam.scroll(".gs-lanes", block="end", margin=24)
    heirs = sorted({str(lane["owner"]) for lane in after})
    cam.shoot(picture, f"Live: {victim} killed, every partition with {', '.join(heirs)}")

    picture = "live-idle-warning.png"
    n = partitions + 1
    cam.stack.control().scale(n)
    said = re.compile(rf"{n} replicas share {partitions} partitions, so ([a-z0-9-]+) is idle")

    def idle() -> str | None:
        named = next((m.group(1) for text in cam.page.evaluate(WARNINGS_JS) or []
                      if (m := said.search(text))), None)
        # the warning and the lanes are fragments on their own refresh: both must agree
        return named if named and owned_by(without=named) else None

    who = cam.until(picture, idle, IDLE_S,
                    f"the warning naming the one idle replica of {n} on {partitions} "
                    f"partitions, that replica owning no lane, after `ctl scale {n}`")
    cam.scroll("[data-testid='stAlertContentWarning']", block="start")
    cam.shoot(picture, f"Live: {n} replicas on {partitions} partitions, {who} idle")


def timeline_shot(cam: Camera) -> None:
    """timeline.png: the kill of live_shots on the Timeline, from the backend's memory: its
    cause (the presenter's kill, and the expiry it caused) and the lag it cost."""
    picture = "timeline.png"
    cam.open("timeline", picture)

    def card() -> str:
        return cam.text(".st-key-timeline_card")

    def killed() -> str | None:
        text = card()
        if "killed" in text and "by the presenter" in text:
            return text
        # the newest episode is shown first: the scale that followed the kill; step back
        if cam.count(".st-key-timeline_previous button:not([disabled])"):
            cam.page.locator(".st-key-timeline_previous button").first.click()
        return None

    cam.until(picture, killed, PAGE_S, "the kill's episode on the Timeline, its cause named")
    cam.until(picture, lambda: cam.count(".st-key-timeline_lag .barlayer .point") > 0,
              PAGE_S, "the lag chart with the rebalances shaded")
    cam.scroll(".st-key-timeline_card", block="start", margin=120)
    cam.shoot(picture, "Timeline: the kill's episode with its causes and cost, the lag shaded")


def queues_shot(cam: Camera, partitions: int) -> None:
    """queues.png, after live_shots left the consumer group one replica past the partitions;
    the share group gets as many replicas, and is scaled back to none after the picture."""
    picture = "queues.png"
    n = partitions + 1
    cam.stack.control().share_scale(n)
    cam.open("queues", picture)

    def side_by_side() -> bool:
        share, consumer = cam.text(".st-key-q-share"), cam.text(".st-key-q-consumer")
        return (f"{n} replicas, {n} of them have summarised records" in share
                and "1 idle" in consumer)

    cam.until(picture, side_by_side, PAGE_S,
              f"{n} share replicas all working beside an idle consumer replica, after `ctl "
              f"share scale {n}`")
    cam.scroll(".st-key-queue-lesson", margin=24)  # the lesson, the controls, both groups
    cam.shoot(picture, f"Queues: {n} share replicas all working on {partitions} partitions, "
                       f"one consumer replica idle")
    cam.stack.control().share_scale(0)


def lab_shot(cam: Camera) -> None:
    """lab-after-kill.png: the Lab's four default groups of two replicas, one replica of
    each killed at the same instant, the scoreboard measured; the lab is stopped after."""
    picture = "lab-after-kill.png"
    control = cam.stack.control()
    running = len(control.status().running)
    control.scale(3)  # the demo's three, not the seven the Live pictures left: a laptop's lab
    control.lab_start(list(DEFAULT_LAB_PROTOCOLS), replicas=2)
    try:
        cam.open("lab", picture)
        cam.until(picture, lambda: control.status().lab.phase == "ready", 6 * PAGE_S,
                  "every lab group processing every partition")
        control.lab_event(KILL)
        cam.until(picture, lambda: (lab := control.status().lab).phase == "ready"
                  and all(g.score is not None for g in lab.groups), 3 * PAGE_S,
                  "every group's kill measured")
        cam.until(picture, lambda: "Scoreboard" in cam.text("body"), PAGE_S,
                  "the scoreboard drawn")
        cam.shoot(picture, "Lab: one replica of each of four groups killed at once, each "
                           "protocol's stall measured")
    finally:
        control.lab_stop()
        control.scale(running)


def streams_shots(cam: Camera) -> None:
    """replay-preview.png (the presenter's preview, nothing applied), then
    streams-at-most-once.png: the replicas restarted with `--commit before-processing` and
    one killed until the summaries show records it committed but never summarised."""
    picture = "replay-preview.png"
    cam.open("streams", picture)
    cam.until(picture, lambda: cam.count(".st-key-replay") > 0, PAGE_S,
              "the presenter's Replay panel on the Streams page")
    cam.page.locator(".st-key-replay summary").first.click()
    cam.until(picture, lambda: cam.count(".st-key-rp_preview button") > 0, PAGE_S,
              "the Replay panel's Preview button")
    cam.page.locator(".st-key-rp_preview button").first.click()
    cam.until(picture, lambda: cam.count(".st-key-replay [data-testid='stDataFrame']") == 2
              and "records, skips" in cam.text(".st-key-replay"), PAGE_S,
              "the preview per partition and per car")
    cam.scroll(".st-key-replay", margin=24)
    cam.shoot(picture, "Streams: a replay to the beginning previewed, per partition and "
                       "per car; nothing applied")

    picture = "streams-at-most-once.png"
    control = cam.stack.control()
    running = len(control.status().running)
    control.set_options(commit="before-processing")
    control.scale(0)
    until(picture, lambda: not control.status().running, MOVED_S,
          "every replica stopped, to start again committing before processing",
          cam.stack.check)
    control.scale(running)
    cam.open("streams", picture)

    def gaps() -> int | None:
        found = re.search(r"gaps\s*\n\s*([\d,]+)", cam.text("[data-testid='stMain']"))
        return int(found.group(1).replace(",", "")) if found else None

    for attempt in range(LOSS_TRIES):  # a kill between batches loses nothing: try again
        until(picture, lambda: len(control.status().running) == running
              and all(r.member for r in control.status().running), READY_S,
              f"{running} replicas committing before processing, all members",
              cam.stack.check)
        victim = control.status().running[0].name
        control.kill(victim)
        with contextlib.suppress(NotShown):
            cam.until(picture, lambda: (gaps() or 0) > 0, MOVED_S + 30,
                      f"records lost after `ctl kill {victim}` (try {attempt + 1})")
            break
        control.start()
    else:
        raise NotShown(f"{picture}: {LOSS_TRIES} kills under before-processing lost "
                       "nothing the summaries could show")
    cam.scroll("[data-testid='stMain']", margin=24)
    cam.shoot(picture, f"Streams: {gaps()} records lost after a replica committing before "
                       "processing was killed")
    control.set_options(commit="after-summary")


def brokers_shot(cam: Camera) -> None:
    """brokers.png; the killed node is started again before the stack stops."""
    picture = "brokers.png"
    cam.open("status", picture)
    n = cam.stack.brokers

    def cards() -> dict[int, dict[str, Any]]:
        return {int(c["id"]): c for c in cam.page.evaluate(STATUS_BROKERS_JS) or []}

    def leads(card: dict[str, Any]) -> int:
        found = re.search(r"leads (\d+)", str(card["text"]))
        return int(found.group(1)) if found else 0

    def all_up() -> dict[int, dict[str, Any]] | None:
        seen = cards()
        return seen if len(seen) == n and all(c["state"] == "up" for c in seen.values()) \
            and any(leads(c) for c in seen.values()) else None

    seen = cam.until(picture, all_up, PAGE_S, f"{n} brokers up on the Status page")
    victim = max(seen, key=lambda i: leads(seen[i]))
    led = leads(seen[victim])
    cam.stack.control().broker_kill(victim)

    def moved() -> bool:
        now = cards()
        card = now.get(victim)
        return bool(card and card["state"] == "down" and leads(card) == 0
                    and sum(c["state"] == "up" for c in now.values()) == n - 1
                    and f"{n - 1} of {n} brokers up" in cam.text(".st-key-brokers-status"))

    cam.until(picture, moved, BROKER_S,
              f"broker {victim} down and leading nothing (it led {led}) after `ctl broker "
              f"kill {victim}`")
    cam.scroll(".st-key-brokers-status", block="end", margin=24)
    cam.shoot(picture, f"Status: broker {victim} killed, its {led} leaderships moved")

    cam.stack.control().broker_start(victim)

    def back() -> bool:
        return any(b.id == victim and b.alive for b in cam.stack.control().brokers().brokers)

    until(picture, back, BROKER_BACK_S, f"broker {victim} running again after `ctl broker "
                                       f"start {victim}`", cam.stack.check)


# ---- the run ------------------------------------------------------------------------------

def _sweep(mark: str) -> int:
    """SIGKILL, by pid, every live process still carrying this run's mark: what an orderly
    stop left behind (a browser whose driver was interrupted, say)."""
    import psutil

    killed = 0
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(RUN_MARK) == mark and proc.status() != psutil.STATUS_ZOMBIE:
                proc.kill()
                killed += 1
    return killed



def _catch_signals(caught: list[str]) -> None:
    """Ctrl-C raises KeyboardInterrupt, SIGTERM and SIGHUP Interrupted, each noted in
    `caught` (a browser call cut short may surface as another error). Not
    backend.proc.StopSignals: its watchdog ends the process a few seconds after the signal,
    before `up` has been stopped and waited for."""

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        caught.append(signal.Signals(signum).name)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Interrupted(signal.Signals(signum).name)

    for s in STOP_SIGNALS:
        signal.signal(s, on_signal)


def _ignore_signals() -> None:
    """For the clean-up: a second Ctrl-C must not cut it short and leave `up` running (it
    is bounded by UP_STOP_S)."""
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def _viewport(text: str) -> tuple[int, int]:
    found = re.fullmatch(r"(\d+)x(\d+)", text.strip())
    if not found:
        raise argparse.ArgumentTypeError(f"{text!r}: give WIDTHxHEIGHT, e.g. 1400x900")
    return int(found.group(1)), int(found.group(2))


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="tools/screenshots.py",
        description="Make the README's screenshots from a real `groupscope up --brokers 3` "
                    "(free ports, a temporary data directory) in headless Chromium: "
                    "status.png, overview.png, share-group.png, live-after-kill.png, "
                    "live-idle-warning.png, timeline.png, queues.png, replay-preview.png, "
                    "streams-at-most-once.png, brokers.png. The room-*.png "
                    "pictures need a second laptop (a network namespace) and come from "
                    "the room tests. "
                    "Takes several minutes; everything it starts is stopped on exit.")
    p.add_argument("--out", type=Path, default=OUT,
                   help=f"where the PNGs go (default {OUT.relative_to(REPO)})")
    p.add_argument("--viewport", type=_viewport, default=VIEWPORT, metavar="WxH",
                   help=f"browser viewport, the pictures' size (default "
                        f"{VIEWPORT[0]}x{VIEWPORT[1]})")
    p.add_argument("--keep", action="store_true",
                   help="keep the temporary directory (up's output, the stack's logs) even "
                        "after a run that succeeded; a failed run always keeps it")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if not Path(CHROMIUM).exists():
        print(f"screenshots: {CHROMIUM} is missing: apt-get install -y chromium-headless-shell",
              file=sys.stderr)
        return 2
    mark = uuid.uuid4().hex
    os.environ[RUN_MARK] = mark  # inherited by `up`, Playwright's driver and Chromium
    root = Path(tempfile.mkdtemp(prefix="groupscope-screenshots-"))
    stack = Stack(root)
    caught: list[str] = []
    failed: str | None = None
    code = 0
    leftovers = 0
    print(f"screenshots: starting `groupscope up --brokers {BROKERS}` in {root}; this takes "
          f"several minutes", file=sys.stderr, flush=True)
    _catch_signals(caught)
    try:
        stack.start()
        partitions = wait_ready(stack)
        with chromium_page(viewport=args.viewport) as page:  # closed before `up` stops
            page.set_default_timeout(15_000)
            page.set_default_navigation_timeout(60_000)  # a busy machine's first load
            page.emulate_media(color_scheme="light")
            cam = Camera(page, stack, args.out)
            status_shot(cam)
            groups_shots(cam)
            live_shots(cam, partitions)
            timeline_shot(cam)
            queues_shot(cam, partitions)
            lab_shot(cam)
            streams_shots(cam)
            brokers_shot(cam)
    except (KeyboardInterrupt, Interrupted):
        code = 130
    except Exception as exc:  # one line, whatever failed: a page, the stack, a call
        code = 130 if caught else 1
        if not caught:
            failed = next(iter(str(exc).splitlines()), "") or type(exc).__name__
    finally:
        _ignore_signals()
        try:
            stack.stop()
        finally:
            leftovers = _sweep(mark)
    if caught:
        print(f"screenshots: stopped by {caught[0]}; everything it started is stopped",
              file=sys.stderr)
    if failed is not None:
        print(f"screenshots: {failed} (up's output, the stack's logs and the page: {root})",
              file=sys.stderr)
    if leftovers:
        print(f"screenshots: killed {leftovers} leftover process(es) of this run",
              file=sys.stderr)
    if failed is None and not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    elif failed is None:
        print(f"screenshots: kept {root}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())

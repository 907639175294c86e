"""Presenter and viewers in real browsers: a real `groupscope web` on every interface, the
presenter's Chromium on this host, a participant's Chromium inside a network namespace (a
laptop on the room's LAN), and the room files `up --room` writes."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

from backend.contracts.room import ENV_ROOM_ADDRESS, PASSCODE_TRIES
from backend.netutil import free_port, wait_until
from dashboard.presenter import ENV_LOCKOUT_S
from tests.dashboard.browser import open_page, save_shot, web_server
from tests.system.room.conftest import PASSCODE, write_room
from tests.system.room.netns import Laptop

# both mostly wait (a page to draw, the lock-out window to pass): the third lane
pytestmark = pytest.mark.idle

# the lock-out window of these tests' server (ENV_LOCKOUT_S): long enough for three refusals,
# a forged message and a second browser's first page inside it at load 20 and more (30 s was
# not: the window ran out under the new browser's refusal, whose right passcode then unlocked
# it); the wait for its end is idle time in the third lane
LOCKOUT_S = 90
KEEP_SOCKETS_JS = """
(() => {
  const Native = window.WebSocket;
  window.__gsSockets = [];
  window.WebSocket = class extends Native {
    constructor(...args) { super(...args); window.__gsSockets.push(this); }
  };
})();
"""
SEND_JS = """
bytes => {
  const open = window.__gsSockets.filter(s => s.readyState === 1);
  if (!open.length) return 0;
  open[open.length - 1].send(new Uint8Array(bytes));
  return open.length;
}
"""
CTL_KEYS_JS = """
() => [...document.querySelectorAll('[class*="st-key-ctl_"]')]
        .map(e => [...e.classList].find(c => c.startsWith('st-key-ctl_')).slice(7))
"""
HEALTH = "import sys,urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=5).read())"


@dataclass
class Wire:
    """The Streamlit protocol messages one page's websockets carried, both ways."""

    received: list[ForwardMsg] = field(default_factory=list)
    sent: list[BackMsg] = field(default_factory=list)

    def attach(self, page: Any) -> None:
        def on_socket(ws: Any) -> None:
            ws.on("framereceived", lambda data: self._keep(data, ForwardMsg, self.received))
            ws.on("framesent", lambda data: self._keep(data, BackMsg, self.sent))

        page.on("websocket", on_socket)

    @staticmethod
    def _keep(data: object, kind: type, into: list) -> None:
        if isinstance(data, bytes):
            msg = kind()
            msg.ParseFromString(data)
            into.append(msg)

    def element(self, key: str) -> tuple[str, str] | None:
        """(widget id, fragment id) of the last element drawn with user key `key`."""
        for msg in reversed(self.received):
            if msg.WhichOneof("type") != "delta" or \
                    msg.delta.WhichOneof("type") != "new_element":
                continue
            element = msg.delta.new_element
            widget = getattr(element, element.WhichOneof("type") or "", None)
            widget_id = getattr(widget, "id", "")
            if isinstance(widget_id, str) and widget_id.endswith(f"-{key}"):
                return widget_id, msg.delta.fragment_id
        return None

    def full_runs_since(self, page: Any, index: int) -> int:
        """Script runs started after message `index`. Playwright's sync API delivers frame
        events only while it is called, so this lets the page run a moment first."""
        page.wait_for_timeout(100)
        return sum(1 for m in self.received[index:] if m.WhichOneof("type") == "new_session")

    def last_full_rerun(self) -> BackMsg:
        runs = [m for m in self.sent if m.WhichOneof("type") == "rerun_script"
                and not m.rerun_script.fragment_id]
        assert runs, "the page sent no rerun request"
        return runs[-1]


@dataclass
class Room:
    url: str  # loopback, as the presenter's browser opens it
    room_url: str  # the host's address on the room LAN, as a laptop opens it
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def room_server(laptop: Laptop, tmp_path: Path, **env: str) -> Iterator[Room]:
    """`groupscope web` as a room serves it (every interface) with a room's data dir; yields
    its two URLs once the laptop can reach it too."""
    data = tmp_path / "data"
    data.mkdir()
    write_room(data, laptop.host_address)
    full_env = {"GROUPSCOPE_DATA": str(data), "GROUPSCOPE_READONLY": "",
                ENV_ROOM_ADDRESS: laptop.host_address,  # as `up --room` sets it: every interface
                "GROUPSCOPE_BOOTSTRAP": f"127.0.0.1:{free_port()}",
                "SPARK_REMOTE": f"sc://127.0.0.1:{free_port()}", "GROUPSCOPE_GROUP": "room-test",
                **env}
    log = tmp_path / "web.log"
    with web_server(full_env, log) as url:
        room_url = f"http://{laptop.host_address}:{url.rsplit(':', 1)[1]}"
        done = laptop.run([sys.executable, "-c", HEALTH, f"{room_url}/_stcore/health"],
                          timeout=30, capture_output=True, text=True)
        assert done.returncode == 0 and "ok" in done.stdout, done.stderr
        yield Room(url, room_url, log)


def ctl_keys(page: Any) -> list[str]:
    return page.evaluate(CTL_KEYS_JS)


def live_page_shown(page: Any) -> bool:
    body = page.inner_text("body")
    return "Stream locator" in body and "Replicas" in body


def passcode_box(page: Any) -> Any:
    return page.locator(".st-key-gs_passcode input")


def send(page: Any, msg: BackMsg) -> None:
    """Put `msg` on the page's own websocket, as a hand-crafted client would. A page whose
    socket is reconnecting (a CI run found none open right after a forged rerun) gets it on
    its next one."""
    data = list(msg.SerializeToString())
    try:
        wait_until(lambda: page.evaluate(SEND_JS, data) >= 1, 45, interval=0.2,
                   what="an open websocket on the page to send on")
        return
    except TimeoutError:
        if page.inner_text("body").strip():
            raise
    # blank, no socket: a fresh clone at load 25 found the laptop's page so after the first
    # forged rerun, for 90 s (the frontend that never opens its websocket: `open_page`). A
    # person reloads; the widget and fragment ids are the app's, the same in a new session
    print(f"{page.url}: blank with no open websocket for 45 s; loading it again")
    open_page(page, None)
    wait_until(lambda: page.evaluate(SEND_JS, data) >= 1, 90, interval=0.2,
               what="an open websocket on the reloaded page to send on")


def with_trigger(rerun: BackMsg, widget_id: str) -> BackMsg:
    """A copy of a full-page rerun request that also says "button `widget_id` was clicked"."""
    forged = BackMsg()
    forged.CopyFrom(rerun)
    forged.rerun_script.is_auto_rerun = False
    forged.rerun_script.widget_states.widgets.append(WidgetState(id=widget_id,
                                                                 trigger_value=True))
    return forged


def try_passcode(page: Any, passcode: str, within_s: float = 90.0) -> None:
    """Type `passcode` and click Unlock, within `within_s` (as long as the page's first wait:
    in a CI run the box was away for more than 30 s, in a rerun). While the sidebar reruns,
    the form is drawn anew: a CI run's click found its button detached again and again for
    30 s. A click that could not be made is tried again with the passcode typed afresh (a
    new form's box is empty); one Playwright made has reached the page, and is not repeated."""
    deadline = time.monotonic() + within_s
    while True:
        left_ms = max(1_000, (deadline - time.monotonic()) * 1000)
        try:
            passcode_box(page).fill(passcode, timeout=left_ms)
            page.locator(".st-key-gs_unlock button").click(timeout=min(left_ms, 10_000))
            return
        except PlaywrightTimeout:
            if time.monotonic() >= deadline:
                raise


def shot(page: Any, artifacts_dir: Path, name: str) -> None:
    save_shot(page, artifacts_dir / f"{name}.png")


def test_a_laptop_sees_the_live_page_without_controls_and_replayed_events_do_nothing(
        chromium: Callable[..., Any], laptop_chromium: Callable[..., Any], laptop: Laptop,
        artifacts_dir: Path, tmp_path: Path) -> None:
    with room_server(laptop, tmp_path) as room:
        # the presenter: this host's browser, on loopback and on the room address alike
        wire = Wire()
        with chromium() as page:
            wire.attach(page)
            open_page(page, room.url)
            wait_until(lambda: "ctl_start" in ctl_keys(page) and live_page_shown(page), 90,
                       what="the presenter's controls on the Live page")
            # the replica cards (with their Kill buttons) may draw a rerun after the sidebar
            wait_until(lambda: page.get_by_role("button", name="Kill").count() >= 1, 30,
                       what="a Kill button on the presenter's Live page")
            # the passcode box goes with the sidebar's next rerun, not in the same instant
            wait_until(lambda: passcode_box(page).count() == 0, 30,
                       what="the passcode box gone once unlocked")
            assert page.get_by_role("link", name="Watch").count() == 1
            shot(page, artifacts_dir, "room-presenter")
            start = wire.element("ctl_start")
            assert start is not None, "no ctl_start button on the presenter's wire"
            open_page(page, room.room_url)
            wait_until(lambda: "ctl_start" in ctl_keys(page), 60,
                       what="controls for this host's browser on the room address")

        # a participant's laptop
        seen = Wire()
        with laptop_chromium() as page:
            page.add_init_script(KEEP_SOCKETS_JS)
            seen.attach(page)
            open_page(page, room.room_url)
            wait_until(lambda: live_page_shown(page) and
                       passcode_box(page).count() == 1, 90,
                       what="the Live page and the passcode box on the laptop")
            assert ctl_keys(page) == []
            for name in ("Kill", "Stop", "Start", "Scale", "Add partitions"):
                assert page.get_by_role("button", name=name).count() == 0, name
            assert PASSCODE not in page.content()
            # no Watch page: its form would read any file on the server, the passcode's too
            assert page.get_by_role("link", name="Watch").count() == 0
            assert page.get_by_role("link", name="Streams").count() == 1
            shot(page, artifacts_dir, "room-viewer")

            # replay the presenter's "Start" on the laptop's own websocket: a full rerun that
            # carries its trigger, then a rerun of the presenter's controls fragment. The first
            # also submits the laptop's own passcode form with a guess, to show that a forged
            # click on a widget the session does have is acted on: one wrong try is logged
            widget_id, fragment_id = start
            box, unlock = seen.element("gs_passcode"), seen.element("gs_unlock")
            assert box is not None and unlock is not None
            plain = BackMsg()
            plain.CopyFrom(seen.last_full_rerun())
            forged = with_trigger(with_trigger(plain, unlock[0]), widget_id)
            forged.rerun_script.widget_states.widgets.append(
                WidgetState(id=box[0], string_value="forged-guess"))
            mark = len(seen.received)
            send(page, forged)
            wait_until(lambda: seen.full_runs_since(page, mark) >= 1, 30,
                       what="the server running the forged request")
            forged = with_trigger(plain, widget_id)
            forged.rerun_script.fragment_id = fragment_id
            send(page, forged)
            mark = len(seen.received)  # the session handles requests in order: once a plain
            send(page, plain)  # rerun sent after it has run, the fragment one was dealt with
            wait_until(lambda: seen.full_runs_since(page, mark) >= 1, 30,
                       what="the rerun sent after the forged ones")
            # a full rerun of the Live page: at load 30 (both lanes) the page has stayed blank
            # longer than 30 s while it ran, as a first render does (tests/system/
            # test_broker_faults.py, FIRST_RENDER_S)
            wait_until(lambda: live_page_shown(page), 120,
                       what="the Live page after the replay")
            assert ctl_keys(page) == []
            assert seen.element("ctl_start") is None and seen.element("ctl_kill") is None

            open_page(page, f"{room.room_url}/watch")
            wait_until(lambda: live_page_shown(page), 60, what="the default page instead")
            assert "client.properties" not in page.inner_text("body")

            # no replay for a viewer: the Streams page draws no Replay panel
            open_page(page, f"{room.room_url}/streams")
            wait_until(lambda: any(t in page.inner_text("body") for t in (
                "messages summarised", "No summaries yet")) and page.locator(
                "[data-testid='stStatusWidget']").count() == 0, 60,
                what="the Streams page drawn to its end")
            assert page.locator(".st-key-replay").count() == 0
            assert page.get_by_text("Replay: send the group back").count() == 0

        log = room.log_text()
        assert log.count(f"wrong presenter passcode from {laptop.laptop_address}") == 1, log
        assert "control action" not in log, log  # no ControlClient call, not even refused
        assert PASSCODE not in log and "forged-guess" not in log


def test_wrong_passcodes_lock_a_laptop_out_and_after_the_window_the_right_one_unlocks_it(
        laptop_chromium: Callable[..., Any], laptop: Laptop, artifacts_dir: Path,
        tmp_path: Path) -> None:
    refused = f"presenter passcode refused from {laptop.laptop_address}: locked out"

    def refused_again(page: Any, what: str) -> None:
        """The right passcode typed and refused once more. A click that lands while the
        sidebar reruns (after a forged "clear cache", say) can be lost before it reaches the
        app: then it is clicked again, at most three times."""
        before = room.log_text().count(refused)
        for attempt in range(3):
            try_passcode(page, PASSCODE)
            try:
                wait_until(lambda: room.log_text().count(refused) > before, 15, what=what)
                return
            except TimeoutError:
                if attempt == 2:
                    raise

    with room_server(laptop, tmp_path, **{ENV_LOCKOUT_S: str(LOCKOUT_S)}) as room:
        with laptop_chromium() as page:
            page.add_init_script(KEEP_SOCKETS_JS)
            open_page(page, room.room_url)
            try:
                passcode_box(page).wait_for(timeout=90_000)
            except Exception:
                save_shot(page, artifacts_dir / "room-passcode-missing.png")
                print("the server said:", room.log_text()[-4000:])
                raise
            wrong = f"wrong presenter passcode from {laptop.laptop_address}"
            for i in range(1, PASSCODE_TRIES):
                # a try counts once the server logged it: a click lost in a rerun (the page
                # was seen blank at load 60) is made again, never counted twice
                for attempt in range(3):
                    try_passcode(page, f"wrong-{i}")
                    try:
                        wait_until(lambda n=i: room.log_text().count(wrong) >= n, 15,
                                   what=f"wrong passcode {i} received")
                        break
                    except TimeoutError:
                        if attempt == 2:
                            raise
                left = PASSCODE_TRIES - i
                page.get_by_text(f"Wrong passcode: {left} more "
                                 f"{'try' if left == 1 else 'tries'}").wait_for(timeout=30_000)
            try_passcode(page, f"wrong-{PASSCODE_TRIES}")
            page.get_by_text("Too many wrong passcodes from this address: locked for") \
                .wait_for(timeout=30_000)
            locked_at = time.monotonic()

            # locked: the right passcode is refused, and still after a forged "clear cache"
            refused_again(page, "the first refusal")
            send(page, BackMsg(clear_cache=True))
            refused_again(page, "the refusal after clearing the cache")
            assert ctl_keys(page) == []

        # a new browser session from the same address is locked out as well
        with laptop_chromium() as page:
            open_page(page, room.room_url)
            page.get_by_text("Too many wrong passcodes from this address: locked for") \
                .wait_for(timeout=60_000)
            refused_again(page, "the refusal in a new session")
            assert time.monotonic() - locked_at < LOCKOUT_S, "too slow to test in the window"
            assert ctl_keys(page) == []
            log = room.log_text()
            assert log.count(f"wrong presenter passcode from {laptop.laptop_address}") \
                == PASSCODE_TRIES
            assert log.count(f"presenter passcode locked for {laptop.laptop_address}") == 1

            # once the window has passed, the right passcode unlocks this tab, and only it
            wait_until(lambda: time.monotonic() - locked_at > LOCKOUT_S + 0.5, LOCKOUT_S + 5,
                       what="the end of the lock-out window")
            try_passcode(page, PASSCODE)
            wait_until(lambda: "ctl_start" in ctl_keys(page), 60,
                       what="controls on the laptop after the right passcode")
            # the passcode box goes with the sidebar's next rerun, not in the same instant
            wait_until(lambda: passcode_box(page).count() == 0, 30,
                       what="the passcode box gone once unlocked")
            shot(page, artifacts_dir, "room-viewer-unlocked")
            other = page.context.new_page()
            try:  # a first render at load 29 took more than 60 s
                open_page(other, room.room_url, passcode_box(other), 120)
            except Exception:
                print("the other tab showed:", other.inner_text("body")[-3000:],
                      "\nits controls:", ctl_keys(other))
                raise
            assert ctl_keys(other) == []
        log = room.log_text()
        assert f"presenter passcode accepted from {laptop.laptop_address}" in log
        assert PASSCODE not in log and "wrong-1" not in log

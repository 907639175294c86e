"""Fixtures' machinery for browser tests: a real `groupscope web` server and headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from backend.cli import ARGV_LOG
from backend.netutil import free_port, wait_until
from backend.proc import abort_if_exited, spawn, terminate

REPO = Path(__file__).resolve().parents[2]
# Debian's headless shell (the same Blink as its `chromium`, without the browser around it):
# half the CPU to open a page and 0.55x the memory (bench/README.md, "The browser")
CHROMIUM = "/usr/bin/chromium-headless-shell"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def streamlit_healthy(url: str) -> bool:
    """Whether the Streamlit server at `url` answers its health check."""
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
            return resp.read().strip() == b"ok"
    except OSError:
        return False


def stack_env(broker_port: int, spark_remote: str, group: str, topic: str) -> dict[str, str]:
    """The environment of a supervisor and dashboard on the session's broker and Spark, for
    one group and topic: no external cluster named, whatever this shell has set."""
    return {"GROUPSCOPE_KAFKA_PORT": str(broker_port), "SPARK_REMOTE": spark_remote,
            "GROUPSCOPE_BOOTSTRAP": "", "GROUPSCOPE_KAFKA_CONFIG": "",
            "GROUPSCOPE_GROUP": group, "GROUPSCOPE_TOPIC": topic}


@contextmanager
def web_server(env: dict[str, str], log_path: Path,
               command: tuple[str, ...] = ("web",), inherit: bool = True) -> Iterator[str]:
    """Run `groupscope web` (or another serving `command`, e.g. `watch --bootstrap …`) on a
    free port with `env` (on top of this process's environment unless `inherit` is False);
    yield its URL; always stop it."""
    port = free_port()
    full_env = {**(os.environ if inherit else {}), **env, "GROUPSCOPE_WEB_PORT": str(port)}
    if ARGV_LOG in os.environ:  # an environment of its own still says what `make test` ran
        full_env.setdefault(ARGV_LOG, os.environ[ARGV_LOG])
    with open(log_path, "wb") as log:
        proc = spawn([sys.executable, "-m", "backend.cli", *command, "--port", str(port)],
                     cwd=REPO, env=full_env, stdout=log, stderr=subprocess.STDOUT,
                     start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: streamlit_healthy(url), 60,
                   what=f"the {command[0]} server's health endpoint",
                   abort=abort_if_exited(proc, command[0], lambda: f"; see {log_path}",
                                         AssertionError))
        yield url
    finally:
        terminate(proc, 15, group=True)


DEFAULT_TIMEOUT_MS = 90_000


@contextmanager
def chromium_page(viewport: tuple[int, int] = (1600, 1000), executable: str = CHROMIUM):
    """A Playwright page in Debian's Chromium with a fresh profile; closed on exit.

    `executable` replaces the path Playwright starts, e.g. a script that execs Chromium in a
    network namespace (tests/system/room/netns.py)."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install -y chromium-headless-shell")
    # in the run's own data directory (tests/conftest.py), which goes at the run's end: a
    # Chromium child still writing the profile as it is removed below left one in /tmp
    profile = tempfile.mkdtemp(prefix="gs-chromium-", dir=os.environ.get("GROUPSCOPE_DATA"))
    try:
        with sync_playwright() as pw:
            ctx = pw.chromium.launch_persistent_context(
                profile, executable_path=executable, headless=True, args=CHROMIUM_ARGS,
                viewport={"width": viewport[0], "height": viewport[1]})
            # what a call names no timeout for (a full-page screenshot, a click): Playwright's
            # 30 s ran out for a 1600x2200 screenshot at load 18
            ctx.set_default_timeout(DEFAULT_TIMEOUT_MS)
            failed = _FAILED.setdefault(ctx, [])
            ctx.on("requestfailed",
                   lambda req: failed.append(f"{req.url.split('/')[-1]} {req.failure}"))
            try:
                page = ctx.pages[0] if ctx.pages else ctx.new_page()
                try:
                    yield page
                except BaseException:
                    _print_page(page)
                    raise
            finally:
                ctx.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


SHOT_TIMEOUT_MS = 30_000


def save_shot(page, path: Path | str, full_page: bool = True) -> bool:
    """A picture of `page` for test-artifacts/, never a test's verdict: a shot that cannot be
    taken is said and skipped. A full-page shot makes Chromium lay the page out at its whole
    height and wait for a frame; on a live page at load 25 (fragments redrawing every half
    second) no frame came within 90 s, and the room's test failed on its picture alone. Then
    the visible part is taken instead, and failing that nothing."""
    tries = [full_page, False] if full_page else [False]
    for whole in tries:
        try:
            page.screenshot(path=str(path), full_page=whole, timeout=SHOT_TIMEOUT_MS)
            return True
        except Exception as exc:  # Playwright's timeout, or the page went away
            print(f"screenshot {Path(path).name} ({'full page' if whole else 'viewport'}) "
                  f"not taken: {str(exc).splitlines()[0]}")
    return False


# Streamlit's frontend fetches an element's code (the table, a select box) when a page first
# shows one. In a CI run at load 25 one such fetch was lost and the page said this where the
# Groups table belonged, for good: a reader would reload, and so does a test that opens one.
SCRIPT_LOST = "Failed to fetch dynamically imported module"


# What a page fetched, to say in a test's output what a blank page lacked: its scripts and
# styles, each with the milliseconds its fetch took
FETCHED_JS = """
() => performance.getEntriesByType('resource')
        .filter(e => /[.](js|css)([?]|$)/.test(e.name))
        .map(e => e.name.split('/').pop() + ' ' + Math.round(e.duration) + ' ms')
"""


# How long a page may stay blank before it is loaded again. On some loads headless Chromium's
# Streamlit frontend never draws: no frame, no websocket, no session on the server, for 60 to
# 180 s in runs beside the other lanes at load 20 and more, and for good; a reload draws it, as
# it would for a person. A first render that is only slow (the script's first run importing
# pandas, plotly and pyarrow) draws Streamlit's frame well within this.
BLANK_RELOAD_S = 30.0
BLANK_RELOADS = 2

# requests a context's pages saw fail (url, Chromium's reason): what a blank page lacked
_FAILED: weakref.WeakKeyDictionary[object, list[str]] = weakref.WeakKeyDictionary()


def open_page(page, url: str | None, ready=None, timeout_s: float = 60.0, **goto) -> None:
    """Load `url` (None: reload the page where it is) and wait up to `timeout_s` for `ready`
    (a locator; by default any text at all). The page is loaded again while it stays blank for
    BLANK_RELOAD_S, or when some of its code was lost (`code_lost`), at most BLANK_RELOADS
    times. Every test opens its pages through this, so one rule decides when a page's failure
    is Chromium's and when it is the app's."""
    _load(page, url, goto)
    reloads, loaded = 0, time.monotonic()
    deadline = loaded + timeout_s
    while True:
        body = page.inner_text("body").strip()
        lost = code_lost(page, body)
        now = time.monotonic()
        blank = not body and now - loaded >= BLANK_RELOAD_S
        if (lost or blank) and reloads < BLANK_RELOADS:
            reloads += 1
            why = f"lost {lost[:3]}" if lost else f"blank after {now - loaded:.0f} s"
            print(f"{page.url}: {why}; loading it again. It had fetched: "
                  f"{page.evaluate(FETCHED_JS)}; failed: {failed_requests(page)}")
            _load(page, None, {})
            loaded, deadline = time.monotonic(), deadline + BLANK_RELOAD_S
            continue
        if ready.first.is_visible() if ready is not None else body:
            return
        if now >= deadline:
            raise TimeoutError(f"{page.url}: {ready if ready is not None else 'any text'} "
                               f"not shown within {timeout_s:.0f} s ({reloads} reloads)")
        time.sleep(0.5)


def _load(page, url: str | None, goto: dict) -> None:
    """Forget the requests that failed before, then navigate: those were the last load's.
    (Forgetting after would race the new page's first fetches; what the navigation itself
    aborts is ERR_ABORTED, which `code_lost` does not count.)"""
    failed = _FAILED.get(page.context)
    if failed is not None:
        failed.clear()
    if url is None:
        page.reload()
    else:
        page.goto(url, **goto)


def failed_requests(page) -> list[str]:
    return list(_FAILED.get(page.context, []))


def code_lost(page, body: str | None = None) -> list[str]:
    """The scripts and styles the page could not fetch since it was loaded (or Streamlit's
    SCRIPT_LOST in its text, `body` if the caller has it). Streamlit fetches an element's code
    when it first shows one, and a failed fetch stays failed until a reload: a Queues run
    beside the other lanes lost 16 of them at once to Chromium's ERR_NETWORK_CHANGED (its cause
    not found: a namespace and veth pair made and removed beside a loading page did not bring
    it) and waited out 4 minutes."""
    lost = [f for f in failed_requests(page)
            if re.search(r"[.](js|css) ", f) and "ERR_ABORTED" not in f]
    if body is None:
        body = page.inner_text("body")
    return [*lost, SCRIPT_LOST] if SCRIPT_LOST in body else lost


def reload_if_code_lost(page, ready=None, timeout_s: float = 60.0) -> bool:
    """For a test's waits once its page is open: when some of the page's code was lost since it
    was loaded, open it again (`open_page`, waiting for `ready`) and say so; whether it did.
    The test then does again what it had done on the page (a filter typed, a tab chosen)."""
    lost = code_lost(page)
    if not lost:
        return False
    print(f"{page.url}: {len(lost)} scripts or styles lost on the way ({lost[:3]}); "
          "loading it again")
    open_page(page, None, ready, timeout_s)
    return True


PAGE_TEXT_SHOWN = 6000  # characters of a failed test's page printed, from its top


def _print_page(page) -> None:
    """What a page showed when a test failed with it open, into the test's captured output:
    CI keeps only pytest's report, and "waited 60 s for X" says nothing of what was there
    instead (an exception box, a spinner, an older run's elements)."""
    try:
        text = page.inner_text("body", timeout=5_000)
    except Exception as exc:  # a closed or crashed page: say so and let the failure stand
        print(f"the page at {page.url} could not be read: {exc}")
        return
    print(f"the page at {page.url} showed:\n{text[:PAGE_TEXT_SHOWN]}")
    if failed_requests(page):
        print(f"requests that failed: {failed_requests(page)}")


@contextmanager
def supervisor(env: dict[str, str], args: list[str], log_path: Path,
               data_dir: Path) -> Iterator[subprocess.Popen]:
    """Run `groupscope backend` (replicas + fleet + control API); SIGTERM it, then SIGKILL."""
    full_env = {**os.environ, **env, "GROUPSCOPE_DATA": str(data_dir)}
    with open(log_path, "wb") as log:
        proc = spawn(
            [sys.executable, "-m", "backend.cli", "backend", "--data-dir", str(data_dir), *args],
            cwd=REPO, env=full_env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        wait_until((data_dir / "control.json").exists, 120,
                   what="the supervisor's control.json",
                   abort=abort_if_exited(proc, "backend", lambda: f"; see {log_path}",
                                         AssertionError))
        yield proc
    finally:
        terminate(proc, 60, group=True)


LANES_JS = """
() => {
  const grid = document.querySelector('.gs-lanes');
  if (!grid) return null;
  const cells = [...grid.children].slice(4);
  const lanes = [];
  for (let i = 0; i + 3 < cells.length; i += 4) {
    // the owner cell may add "from <previous owner>" under the name for a few seconds
    const from = cells[i + 1].querySelector('.from');
    // on more than one broker the partition cell adds "L2 · ISR 1,2,3" under the number
    const kafka = cells[i].querySelector('.kafka');
    lanes.push({partition: cells[i].innerText.trim().split('\\n')[0].trim(),
                kafka: kafka ? kafka.innerText.trim() : null,
                owner: cells[i + 1].innerText.trim().split('\\n')[0].trim(),
                from: from ? from.innerText.trim() : null,
                streams: [...cells[i + 2].querySelectorAll('.gs-chip')].map(c => c.innerText)});
  }
  return lanes;
}
"""


def lanes(page) -> list[dict]:
    """The Live page's partition lanes as the browser shows them."""
    return page.evaluate(LANES_JS) or []


def button(page, key: str):
    # a fragment rerun can briefly show the old and the new copy of a widget
    return page.locator(f".st-key-{key} button").first


def press_until(page, key: str, done: Callable[[], object], timeout: float, what: str,
                shown: Callable[[], str] = lambda: "", again_s: float = 20.0) -> None:
    """Click the button `key`, and again every `again_s` until `done()` holds. `done` must
    see the action received (not only finished) unless the action is safe to repeat, like
    a preview, which changes nothing.

    On a loaded machine a click on a page with a live fragment was once lost: the button's
    rerun never reached the app (its log had no such action). A user clicks again, and so
    does this. A timeout says what `shown()` read on the page, so a failure names what the
    page said."""
    deadline = time.monotonic() + timeout
    while True:
        # the button itself may take a while to be drawn (a loaded machine rendering the
        # expander or page it is in): wait for it as long as the whole press may take
        left_ms = max(10_000, (deadline - time.monotonic()) * 1000)
        button(page, key).click(timeout=left_ms)
        try:
            wait_until(done, max(0.5, min(again_s, deadline - time.monotonic())), what=what)
            return
        except TimeoutError as exc:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{exc}; the page shows: {shown()!r}") from None
            print(f"{key}: no {what} after {again_s:.0f} s, clicking again; the page shows: "
                  f"{shown()[:300]!r}")


def choose(page, key: str, option: str) -> None:
    """Pick `option` in a selectbox by typing it, the way a keyboard user does.

    Clicking an option in the open list failed on a loaded CI machine: the live fragment's rerun
    every 2 s can re-render the list under the click. Typed text, ArrowDown and Enter settle in
    one go; the check reads the field after blur, when it shows the committed choice rather than
    what was typed."""
    field = page.locator(f".st-key-{key} input").first

    def committed() -> str:
        field.evaluate("el => el.blur()")
        return field.input_value(timeout=5_000)

    def chosen() -> bool:
        if committed() == option:
            return True
        field.click(timeout=10_000)
        field.fill(option, timeout=10_000)
        field.press("ArrowDown", timeout=10_000)
        field.press("Enter", timeout=10_000)
        return committed() == option

    wait_until(chosen, 60, interval=0.5, what=f"{option} chosen in {key}")

"""How a test opens a page: a blank page is loaded again, a page whose code was lost on the way
is loaded again, a page that never draws fails.

A local server stands in for Streamlit's blank first load (a page with no text at all, as
headless Chromium shows when its frontend never starts) and for a script whose fetch fails (the
connection closed with no answer, as Chromium's ERR_NETWORK_CHANGED leaves one); the browser is
real."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.dashboard import browser
from tests.dashboard.browser import open_page


@contextmanager
def pages(blank_loads: int, lost_scripts: int = 0,
          script_after_ms: int = 0) -> Iterator[tuple[str, list[str]]]:
    """A server whose first `blank_loads` answers are an empty page, then one with text that
    fetches /code.js `script_after_ms` after it loads; the first `lost_scripts` of those
    fetches get no answer. Yields its URL and the pages it served."""
    served: list[str] = []
    scripts: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/code.js":
                scripts.append(self.path)
                if len(scripts) <= lost_scripts:
                    return  # the connection closes with no answer: a failed request
                self._answer(b"document.body.dataset.code = 'ran';", "text/javascript")
                return
            if self.path != "/app":  # a favicon, say: not the page
                self.send_error(404)
                return
            served.append(self.path)
            fetch = (f"<script>setTimeout(() => {{ const s = document.createElement('script');"
                     f" s.src = 'code.js'; document.body.append(s); }}, {script_after_ms});"
                     f"</script>").encode()
            self._answer(b"<html><body></body></html>" if len(served) <= blank_loads else (
                b"<html><body><h1>drawn</h1>" + fetch + b"</body></html>"), "text/html")

        def _answer(self, body: bytes, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/app", served
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def quick_reloads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browser, "BLANK_RELOAD_S", 1.0)


def test_a_blank_first_load_is_loaded_again_until_it_draws(chromium, quick_reloads) -> None:
    with pages(blank_loads=2) as (url, served), chromium() as page:
        open_page(page, url, page.get_by_role("heading", name="drawn"), timeout_s=10)
    assert len(served) == 3  # two blank loads, each loaded again after a second


def test_a_page_that_never_draws_fails_after_its_reloads(chromium, quick_reloads) -> None:
    with (pages(blank_loads=100) as (url, served), chromium() as page,
          pytest.raises(TimeoutError, match="not shown within 3 s")):
        open_page(page, url, page.get_by_role("heading", name="drawn"), timeout_s=3)
    assert len(served) == 1 + browser.BLANK_RELOADS


def test_a_page_that_says_something_else_is_not_reloaded(chromium, quick_reloads) -> None:
    with (pages(blank_loads=0) as (url, served), chromium() as page,
          pytest.raises(TimeoutError)):
        open_page(page, url, page.get_by_text("something else"), timeout_s=3)
    assert len(served) == 1


def test_a_page_whose_script_was_lost_is_loaded_again(chromium, quick_reloads) -> None:
    with pages(blank_loads=0, lost_scripts=1) as (url, served), chromium() as page:
        # the heading shows at once, but its script's fetch fails: open_page sees it lost
        open_page(page, url, page.locator("body[data-code='ran']"), timeout_s=10)
    assert len(served) == 2


def test_code_lost_after_the_page_opened_is_loaded_again_once_asked(chromium,
                                                                   quick_reloads) -> None:
    with pages(blank_loads=0, lost_scripts=1, script_after_ms=1500) as (url, served), \
            chromium() as page:
        heading = page.get_by_role("heading", name="drawn")
        open_page(page, url, heading, timeout_s=10)
        assert not browser.reload_if_code_lost(page, heading)  # nothing lost yet
        page.wait_for_function("() => performance.getEntriesByName("
                               "location.origin + '/code.js').length > 0", timeout=10_000)
        page.wait_for_timeout(300)  # Chromium reports the failure a moment after
        assert browser.code_lost(page), browser.failed_requests(page)
        assert browser.reload_if_code_lost(page, page.locator("body[data-code='ran']"))
        assert not browser.code_lost(page)
    assert len(served) == 2

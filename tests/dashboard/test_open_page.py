"""How a test opens a page: a blank page is loaded again, a page that never draws fails.

A local server stands in for Streamlit's blank first load (a page with no text at all, as
headless Chromium shows when its frontend never starts); the browser is real."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.dashboard import browser
from tests.dashboard.browser import open_page


@contextmanager
def pages(blank_loads: int) -> Iterator[tuple[str, list[str]]]:
    """A server whose first `blank_loads` answers are an empty page, then one with text;
    yields its URL and the paths it served."""
    served: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/app":  # a favicon, say: not the page
                self.send_error(404)
                return
            served.append(self.path)
            body = b"<html><body></body></html>" if len(served) <= blank_loads else (
                b"<html><body><h1>drawn</h1></body></html>")
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
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

"""Where transitions go: a log line, or a Slack-compatible webhook.

A sink's `send()` is called from the overview watcher's thread, so it must return at once:
the webhook sink only queues, and a thread of its own posts, retries and gives up. Neither a
slow or failing webhook nor a bug here may block the watcher or end the process.

A webhook URL is a secret (whoever has it can post to the channel), so it is never logged,
printed, put in an exception message or a repr: failures name the sink ("webhook sink #2",
its position among the file's [[sink]] tables) and the URL's host only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import urlsplit

from backend.alerts.engine import FIRING, Transition

log = logging.getLogger("groupscope.alerts")

SLACK_SECTION_CHARS = 3000  # Slack refuses a section block whose text is longer
ICON = {"firing": ":red_circle:", "resolved": ":large_green_circle:"}  # Slack emoji codes


class Sink(Protocol):
    name: str

    def send(self, transition: Transition) -> None: ...

    def close(self, timeout: float = 5.0) -> None: ...


class LogSink:
    """One log line per transition, at WARNING for both states.

    A resolve is good news, but the log is an alert channel here: at INFO it would vanish
    under the default logging setup, and "resolved" is what tells an operator to stop looking.
    """

    name = "log"

    def __init__(self, logger: logging.Logger = log) -> None:
        self._log = logger

    def send(self, transition: Transition) -> None:
        self._log.warning("alert %s (cluster %s)", transition.headline, transition.cluster)

    def close(self, timeout: float = 5.0) -> None:
        pass


# ---- the webhook's body ----------------------------------------------------------------------

def _escape(text: str) -> str:
    """Slack reads &, < and > as markup (`<!channel>` pings a channel); group names are data."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(t: Transition) -> dict[str, Any]:
    """The JSON a Slack incoming webhook accepts: `text` (the notification, and the whole
    message for Slack-compatible receivers that read nothing else) and two Block Kit blocks
    for Slack itself. Nothing more, so Slack never answers 400 "invalid_blocks".
    """
    text = _escape(t.headline)
    when = datetime.fromtimestamp(t.since_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    since = "since" if t.state == FIRING else "firing since"
    context = _escape(f"cluster {t.cluster} · group {t.group} · {t.kind} · {since} {when}")
    section = f"{ICON[t.state]} *{t.state.upper()}* {_escape(t.rule)}: {_escape(t.text)}"
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": _clip(section)}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": _clip(context)}]},
        ],
    }


def _clip(text: str, limit: int = SLACK_SECTION_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---- the webhook sink --------------------------------------------------------------------------

class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """urllib would turn a redirected POST into a GET without the body and call it success;
    a webhook that redirects is misconfigured, so say so instead."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_STOP = object()


class WebhookSink:
    """POST each transition to a Slack-compatible incoming webhook, from a thread of its own.

    urllib rather than an HTTP library: one small JSON POST per incident change needs no
    connection pool, session or async, and the control client (`supervisor/client.py`) already
    speaks HTTP with it, so this adds no dependency. The queue is bounded (a storm drops the
    newest alerts with one log line rather than grow without limit); transient failures
    (connection errors, timeouts, HTTP 429 and 5xx) are retried with exponential backoff,
    other answers are not (a 404 will not heal). `close()` waits for the queue up to a timeout.
    """

    def __init__(self, url: str, name: str = "webhook sink", *, timeout: float = 5.0,
                 attempts: int = 4, backoff: float = 1.0, max_backoff: float = 30.0,
                 queue_size: int = 100) -> None:
        self._url = url
        parts = urlsplit(url)
        self.host = parts.hostname or "?"
        self.name = f"{name} ({self.host})"
        self._secrets = [s for s in (url, parts.netloc, parts.path, parts.query) if len(s) > 1]
        self.timeout, self.attempts = timeout, max(1, attempts)
        self.backoff, self.max_backoff = backoff, max_backoff
        self.delivered = self.failed = self.dropped = 0
        self._pending = 0  # queued or in flight; both threads change it, under the lock
        self._lock = threading.Lock()
        self._queue: queue.Queue[object] = queue.Queue(maxsize=queue_size)
        self._opener = urllib.request.build_opener(_NoRedirects())
        self._wake = threading.Event()
        self._deadline: float | None = None
        self._closed = False
        self._dropping = False  # one log line per burst of drops, not one per alert
        self._thread = threading.Thread(target=self._run, name=f"alerts {self.name}",
                                        daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"WebhookSink({self.name!r})"

    def send(self, transition: Transition) -> None:
        if self._closed:
            self.dropped += 1
            return
        try:
            with self._lock:
                self._pending += 1
            self._queue.put_nowait(transition)
            self._dropping = False
        except queue.Full:
            with self._lock:
                self._pending -= 1
            self.dropped += 1
            if not self._dropping:
                self._dropping = True
                log.warning("%s: queue full (%d waiting), dropping alerts until it drains",
                            self.name, self._queue.maxsize)

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what is queued within `timeout` seconds, then stop; never raises."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            waiting, delivered = self._pending, self.delivered
        self._deadline = time.monotonic() + timeout
        self._wake.set()  # cut a backoff short: it now has a deadline to respect
        with contextlib.suppress(queue.Full):
            self._queue.put(_STOP, timeout=max(0.0, timeout))
        self._thread.join(max(0.0, self._deadline - time.monotonic()))
        # counted from what waited at close, not from whether the thread is still running:
        # a post cut short by the deadline lets the thread end in time with alerts undelivered
        lost = waiting - (self.delivered - delivered)
        if lost > 0:
            log.warning("%s: %d alert(s) not delivered within %.1f s of closing",
                        self.name, lost, timeout)

    # ---- the thread ---------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if not isinstance(item, Transition):
                continue
            try:
                self._deliver(item)
            except Exception as exc:  # never let the thread die: the next alert must go out
                self.failed += 1
                log.warning("%s: could not send %s %s for group %s: %s", self.name,
                            item.state.upper(), item.rule, item.group, type(exc).__name__)
            finally:
                with self._lock:
                    self._pending -= 1

    def _deliver(self, t: Transition) -> None:
        if self._past_deadline():
            self.failed += 1  # close() reports what was left in one line
            return
        body = json.dumps(slack_body(t)).encode()
        error: str | None = "closing"
        for attempt in range(1, self.attempts + 1):
            error, retryable, retry_after = self._post(body)
            if error is None:
                self.delivered += 1
                return
            if not retryable or attempt == self.attempts:
                break
            delay = min(self.max_backoff, max(self.backoff * 2 ** (attempt - 1), retry_after))
            if not self._sleep(delay):
                break
        self.failed += 1
        log.warning("%s: gave up on %s %s for group %s after %d attempt(s): %s", self.name,
                    t.state.upper(), t.rule, t.group, attempt, self._scrub(error or "?"))

    def _post(self, body: bytes) -> tuple[str | None, bool, float]:
        """(None, _, _) when delivered, else (a safe one-line reason, retry?, Retry-After)."""
        timeout = self.timeout
        if self._deadline is not None:
            timeout = max(0.1, min(timeout, self._deadline - time.monotonic()))
        request = urllib.request.Request(
            self._url, data=body, method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "groupscope-alerts"})
        try:
            with self._opener.open(request, timeout=timeout) as response:
                response.read(4096)
            return None, False, 0.0
        except urllib.error.HTTPError as exc:  # str(exc) is safe, but exc.url is not: build
            code = exc.code
            retry_after = _seconds(exc.headers.get("Retry-After")) if exc.headers else 0.0
            exc.close()
            return f"HTTP {code}", code in (408, 429) or code >= 500, retry_after
        except urllib.error.URLError as exc:
            reason = exc.reason
            text = (reason.strerror or type(reason).__name__) if isinstance(reason, OSError) \
                else str(reason)
            return text or type(exc).__name__, True, 0.0
        except TimeoutError:
            return "timed out", True, 0.0
        except OSError as exc:  # a reset mid-answer, http.client's errors (not URLError)
            return exc.strerror or type(exc).__name__, True, 0.0
        except Exception as exc:  # http.client.HTTPException and the like: name only
            return type(exc).__name__, True, 0.0

    def _past_deadline(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    def _sleep(self, delay: float) -> bool:
        """Back off for `delay` s; False when that would pass the closing deadline."""
        end = time.monotonic() + delay
        while True:
            if self._deadline is not None and end > self._deadline:
                return False
            left = end - time.monotonic()
            if left <= 0:
                return True
            if self._deadline is None:
                self._wake.wait(left)  # close() sets it: recheck against the new deadline
            else:
                time.sleep(left)

    def _scrub(self, text: str) -> str:
        """Belt and braces: no part of the URL past its host in anything we log."""
        for secret in self._secrets:
            text = text.replace(secret, "…")
        return text


def _seconds(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value else 0.0
    except ValueError:
        return 0.0  # an HTTP date; the exponential backoff will do

"""/metrics at any size: the per-group families rendered once per cycle, not per scrape.

A scrape of 65 000 groups formats about 200 000 samples, seconds of this process's CPU while
its next cycle runs beside it (bench/README.md, "The Groups page and the exporter at 65 000
groups"). Those samples change only when the watcher completes a cycle, so `observe` (a
watcher listener, called after each complete cycle) has them rendered then, once for each
format a scraper asked for in the last `FORMAT_KEPT_S`, on a thread of its own; a scrape sends
those bytes and appends what is its own, built afresh: the exporter's families, the brokers',
the process's CPU and memory. gzip the same way: the deflate state after the per-group bytes
is kept, and a scrape compresses only its own tail. So a scrape costs bytes, not samples, and
shows the last complete cycle (as the alert rules do), not a cycle half read.

- The compatibility format (text 0.0.4) is rendered from the first cycle on, before anyone
  asked, and a scrape asking for a format not rendered yet gets it when it accepts it (as
  Prometheus does), while its own is rendered from the next cycle on; a format nobody asked
  for in `FORMAT_KEPT_S` is dropped. Before the first complete cycle (a minute on a large
  cluster, the rows filling in as they are described) a scrape renders what there is.
- `name[]` (a few families) and anything but a GET go to prometheus_client's own app, which
  reads the collector directly.
- The cost: one render per cycle while someone scrapes, however rarely they do.

The HTTP side stays prometheus_client's choices (`choose_encoder` for Accept, its gzip
test); only the assembly of the body is ours, since prometheus_client renders a whole
registry at each request and keeps nothing.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import ProcessCollector
from prometheus_client.exposition import (
    CONTENT_TYPE_PLAIN_0_0_4,
    choose_encoder,
    generate_latest,
    gzip_accepted,
)
from prometheus_client.metrics_core import Metric

from backend.contracts.overview import Overview
from backend.errors import one_line
from backend.exporter.metrics import OverviewCollector

log = logging.getLogger("groupscope.exporter")

PLAIN = CONTENT_TYPE_PLAIN_0_0_4  # the compatibility format, every scraper's fallback
FORMAT_KEPT_S = 600.0  # a format no scraper asked for in this long is no longer rendered
GZIP_LEVEL = 6  # zlib's default: a third of level 9's time (prometheus_client's) for ~7 % more
_EOF = b"# EOF\n"  # OpenMetrics' last line: once, after the scrape's own families

Encoder = Callable[[Any], bytes]


class _Families:
    """A list of families as prometheus_client's encoders take them (anything with collect)."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


@dataclass
class _Format:
    encoder: Encoder
    asked: float  # time.monotonic() of the last scrape in this format
    gzip: bool  # that scrape accepted gzip: keep the deflate state after the body


@dataclass
class _Rendered:
    """The per-group families of one overview in one format, ready to send. Bytes only: an
    overview kept here would keep every row of a past cycle alive beside the current one."""
    body: bytes  # no OpenMetrics '# EOF': the scrape's own families follow
    dropped: int  # groups the cap left out of `body`
    _gzip: tuple[bytes, Any] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def gzipped(self, tail: bytes) -> bytes:
        """`body + tail`, gzip-compressed, deflating `body` once whatever the scrapes."""
        with self._lock:
            if self._gzip is None:
                deflate = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: a gzip member
                self._gzip = (deflate.compress(self.body), deflate)
            head, state = self._gzip
            deflate = state.copy()
        return head + deflate.compress(tail) + deflate.flush()


class CycleExposition:
    """The /metrics body: the last complete cycle's per-group bytes, the scrape's own after."""

    def __init__(self, collector: OverviewCollector) -> None:
        self.collector = collector
        self._process = ProcessCollector(registry=None)
        self._lock = threading.Lock()
        self._rendering = threading.Lock()  # one render at a time: one set of families alive
        # by content type; the compatibility format from the start, for a first scrape
        self._formats = {PLAIN: _Format(generate_latest, time.monotonic(), gzip=True)}
        self._rendered: dict[str, _Rendered] = {}  # by content type
        self._complete: Overview | None = None  # the newest complete cycle's, to render
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-render", daemon=True)
        self._thread.start()

    # ---- the watcher's side ----------------------------------------------------------

    def observe(self, overview: Overview) -> None:
        """A watcher listener: a cycle is complete, render it (on the render thread)."""
        with self._lock:
            self._complete = overview
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            with self._lock:
                overview, self._complete = self._complete, None
                now = time.monotonic()
                for gone in [ct for ct, f in self._formats.items()
                             if now - f.asked > FORMAT_KEPT_S]:
                    del self._formats[gone]
                    self._rendered.pop(gone, None)
                formats = dict(self._formats)
            if self._stop.is_set() or overview is None or not formats:
                continue
            try:
                self._render(overview, formats)
            except Exception as exc:  # a render must never end the thread: scrapes go on
                log.warning("rendering /metrics failed: %s", one_line(exc))

    def _render(self, overview: Overview, formats: dict[str, _Format]) -> None:
        with self._rendering:
            families, dropped = self.collector.per_group(overview)
            for content_type, fmt in formats.items():
                rendered = _Rendered(_body(fmt.encoder, families), dropped)
                if fmt.gzip:
                    rendered.gzipped(b"")  # deflated here, not in the next scrape
                with self._lock:
                    self._rendered[content_type] = rendered

    def close(self, timeout: float = 2.0) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)

    # ---- the scraper's side ----------------------------------------------------------

    def scrape(self, accept: str | None, accept_encoding: str | None
               ) -> tuple[list[tuple[str, str]], bytes]:
        """The headers and body of a full scrape in the format `accept` asks for."""
        encoder, content_type = choose_encoder(accept or "")
        compress = gzip_accepted(accept_encoding or "")
        with self._lock:
            self._formats[content_type] = _Format(encoder, time.monotonic(), compress)
            rendered = self._rendered.get(content_type)
            if rendered is None and PLAIN in self._rendered and accepts_plain(accept):
                encoder, content_type = generate_latest, PLAIN  # its own from the next cycle
                rendered = self._rendered[PLAIN]
        latest = self.collector.latest()
        if rendered is None:
            rendered = self._render_now(latest, content_type, encoder)
        tail = encoder(_Families([*self.collector.own(latest, rendered.dropped),
                                  *self._process.collect()]))
        headers = [("Content-Type", content_type)]
        if compress:
            headers.append(("Content-Encoding", "gzip"))
            return headers, rendered.gzipped(tail)
        return headers, rendered.body + tail

    def _render_now(self, latest: Overview | None, content_type: str, encoder: Encoder
                    ) -> _Rendered:
        """A format's first scrape, or any before the first complete cycle: rendered here,
        after the render under way, if any (it may be this format's)."""
        with self._rendering:
            with self._lock:
                rendered = self._rendered.get(content_type)
            if rendered is not None:
                return rendered
            families, dropped = self.collector.per_group(latest)
            rendered = _Rendered(_body(encoder, families), dropped)
        if latest is not None and latest.cycle is not None:  # a complete cycle: kept
            with self._lock:
                self._rendered.setdefault(content_type, rendered)
        return rendered

    def wsgi_app(self, fallback: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        """A full GET served from here; `name[]`, other methods and the favicon by
        `fallback` (prometheus_client's app over the same collector)."""

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if (environ.get("REQUEST_METHOD") != "GET"
                    or environ.get("PATH_INFO") == "/favicon.ico"
                    or "name[]" in parse_qs(environ.get("QUERY_STRING", ""))):
                return fallback(environ, start_response)
            headers, body = self.scrape(environ.get("HTTP_ACCEPT"),
                                        environ.get("HTTP_ACCEPT_ENCODING"))
            start_response("200 OK", headers)
            return [body]

        return app


def accepts_plain(accept: str | None) -> bool:
    """Whether an Accept header takes the text format 0.0.4 (any client that says nothing, and
    Prometheus, which lists it after OpenMetrics)."""
    if not accept:
        return True
    for media_range in accept.split(","):
        kind, *params = (part.strip() for part in media_range.split(";"))
        values = dict(p.split("=", 1) for p in params if "=" in p)
        if values.get("q", "1").strip() in ("0", "0.0", "0.00", "0.000"):
            continue
        if kind in ("*/*", "text/*") or (
                kind == "text/plain" and values.get("version", "0.0.4") == "0.0.4"):
            return True
    return False


def _body(encoder: Encoder, families: list[Metric]) -> bytes:
    return encoder(_Families(families)).removesuffix(_EOF)

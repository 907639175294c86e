"""The /metrics body rendered once per complete cycle: synthetic overviews, the WSGI app
called directly, every body read back by prometheus_client's own parsers."""

from __future__ import annotations

import gzip
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)

from backend.contracts.overview import CycleStats
from backend.exporter.exposition import CycleExposition, accepts_plain
from backend.exporter.metrics import OverviewCollector
from backend.netutil import wait_until
from tests.exporter.conftest import Samples, parse, value
from tests.exporter.synthetic import CLUSTER, Latest, overview, part, row

OPENMETRICS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
CYCLE = CycleStats(started_ms=1_000, seconds=0.5, requests=3, groups_refreshed=2, errors=0)


def lagging(lag: int, *groups: str, cycles: tuple[CycleStats, ...] = (CYCLE,)):
    return overview(*(row(g, partitions=(part("t", 0, 0, lag),)) for g in groups),
                    cycles=cycles)


@pytest.fixture
def exposed() -> Iterator[tuple[Latest, CycleExposition]]:
    latest = Latest()
    exposition = CycleExposition(OverviewCollector(latest, max_groups=2))
    try:
        yield latest, exposition
    finally:
        exposition.close()


def get(exposition: CycleExposition, accept: str | None = None, encoding: str | None = None,
        query: str = "") -> tuple[dict[str, str], bytes]:
    registry = CollectorRegistry()
    registry.register(exposition.collector)
    app = exposition.wsgi_app(fallback=make_wsgi_app(registry))
    said: dict[str, str] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        said.update(headers, status=status)

    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": query}
    if accept:
        environ["HTTP_ACCEPT"] = accept
    if encoding:
        environ["HTTP_ACCEPT_ENCODING"] = encoding
    body = b"".join(app(environ, start_response))
    assert said["status"] == "200 OK"
    return said, body


def lag_of(samples: Samples, group: str) -> float | None:
    return value(samples, "groupscope_group_lag_messages", cluster=CLUSTER, group=group,
                 topic="t")


def test_a_scrape_shows_the_last_complete_cycle_not_the_one_half_read(exposed):
    latest, exposition = exposed
    latest.ov = lagging(5, "a")
    assert lag_of(parse(get(exposition)[1].decode()), "a") == 5
    latest.ov = lagging(9, "a")  # the next cycle, half read: not shown yet
    assert lag_of(parse(get(exposition)[1].decode()), "a") == 5
    exposition.observe(latest.ov)  # that cycle completes: rendered on the render thread
    wait_until(lambda: lag_of(parse(get(exposition)[1].decode()), "a") == 9, timeout=10,
               interval=0.05, what="the completed cycle served")


def test_before_the_first_complete_cycle_every_scrape_shows_the_newest_rows(exposed):
    latest, exposition = exposed
    latest.ov = lagging(5, "a", cycles=())
    assert lag_of(parse(get(exposition)[1].decode()), "a") == 5
    latest.ov = lagging(5, "a", "b", cycles=())  # more rows described, no cycle complete yet
    assert lag_of(parse(get(exposition)[1].decode()), "b") == 5


def test_the_exporters_own_series_are_fresh_at_every_scrape(exposed):
    latest, exposition = exposed
    latest.ov = lagging(5, "a", "b", "c")  # the cap is 2: one group dropped per scrape
    dropped = [value(parse(get(exposition)[1].decode()),
                     "groupscope_exporter_dropped_groups_total", cluster=CLUSTER)
               for _ in range(3)]
    assert dropped == [1, 2, 3]
    samples = parse(get(exposition)[1].decode())
    assert value(samples, "groupscope_exporter_cycle_requests", cluster=CLUSTER) == 3
    assert any(name == "process_resident_memory_bytes" for name, _ in samples)


def test_openmetrics_and_gzip_as_prometheus_asks(exposed):
    latest, exposition = exposed
    latest.ov = lagging(7, "a")
    get(exposition)  # the compatibility format, rendered from a complete cycle: kept
    headers, body = get(exposition, OPENMETRICS, "gzip")
    # OpenMetrics not rendered yet: the text format, which Prometheus accepts too, at once
    assert headers["Content-Type"] == CONTENT_TYPE_PLAIN_0_0_4
    assert headers["Content-Encoding"] == "gzip"
    assert lag_of(parse(gzip.decompress(body).decode()), "a") == 7
    exposition.observe(latest.ov)  # from the next cycle on, OpenMetrics is rendered too

    def openmetrics() -> tuple[dict[str, str], bytes] | None:
        headers, body = get(exposition, OPENMETRICS, "gzip")
        return (headers, body) if "openmetrics" in headers["Content-Type"] else None

    headers, body = wait_until(openmetrics, timeout=10, interval=0.05, what="OpenMetrics")
    assert headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    text = gzip.decompress(body).decode()
    assert text.count("# EOF") == 1 and text.endswith("# EOF\n")
    families = {f.name: f for f in openmetrics_families(text)}
    lag = families["groupscope_group_lag_messages"].samples
    assert [(s.labels["group"], s.value) for s in lag] == [("a", 7)]
    assert "groupscope_exporter_cluster_up" in families
    # served again from the kept render: the same per-group part, a fresh tail
    again = gzip.decompress(get(exposition, OPENMETRICS, "gzip")[1]).decode()
    own = "# HELP groupscope_exporter"
    assert again.split(own)[0] == text.split(own)[0]


def test_a_scraper_that_takes_only_openmetrics_gets_it_at_once(exposed):
    latest, exposition = exposed
    latest.ov = lagging(7, "a")
    get(exposition)
    headers, body = get(exposition, "application/openmetrics-text;version=1.0.0")
    assert headers["Content-Type"].startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")


@pytest.mark.parametrize(("accept", "plain"), [
    (None, True),
    ("", True),
    ("*/*", True),
    (OPENMETRICS, True),  # Prometheus lists the text format after OpenMetrics
    ("application/openmetrics-text;version=1.0.0", False),
    ("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0", False),
    ("text/plain;version=1.0.0;escaping=allow-utf-8", False),
    ("text/plain", True),
])
def test_which_scrapers_take_the_compatibility_format(accept, plain):
    assert accepts_plain(accept) is plain


def test_name_filter_is_prometheus_clients_own(exposed):
    latest, exposition = exposed
    latest.ov = lagging(5, "a")
    _, body = get(exposition, query="name[]=groupscope_group_members")
    assert set(name for name, _ in parse(body.decode())) == {"groupscope_group_members"}

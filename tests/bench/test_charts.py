"""bench/charts.py builds its figures from the benchmarks' JSON shapes (synthetic, tiny).

Pure: no broker, no Spark. Asserts the traces carry the numbers of the input (medians,
min–max error bars, ratios to the raw loop) and that a missing file is skipped, not fatal.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import charts


def _run(variant, n, mode, rate, wall):
    return {"variant": variant, "replicas": n, "mode": mode, "ok": True, "rate": rate,
            "wall_rate": wall}


THROUGHPUT = {
    "machine": {"nproc": 2}, "load": {"min": 1.0, "median": 2.0, "max": 3.0},
    "runs": [_run("groupscope", 1, "alo", 10.0, 8.0), _run("groupscope", 1, "alo", 14.0, 12.0),
             _run("raw", 1, "alo", 90.0, 100.0), _run("raw", 1, "alo", 70.0, 100.0),
             _run("groupscope", 1, "eos", 6.0, 5.0), _run("raw", 1, "eos", 50.0, 50.0),
             {"variant": "quix", "replicas": 1, "mode": "alo", "ok": False}],
}


def test_throughput_rows_from_runs():
    rows = {(r["variant"], r["mode"]): r for r in charts.throughput_rows(THROUGHPUT)}
    assert set(rows) == {("groupscope", "alo"), ("raw", "alo"), ("groupscope", "eos"),
                         ("raw", "eos")}  # the failed quix run is left out
    assert rows["groupscope", "alo"]["rate"] == {"median": 12.0, "min": 10.0, "max": 14.0,
                                                 "n": 2}
    assert rows["groupscope", "alo"]["wall_rate"]["median"] == 10.0


def test_throughput_figure_values_error_bars_and_ratio():
    fig = charts.throughput_figure(THROUGHPUT)
    alo = [t for t in fig.data if t.name == "at-least-once"]
    steady, wall, ratio = alo  # one trace per panel
    assert list(steady.x) == ["groupscope ×1", "raw loop"]
    assert list(steady.y) == [12.0, 80.0]
    assert list(steady.error_y.array) == [2.0, 10.0]
    assert list(steady.error_y.arrayminus) == [2.0, 10.0]
    assert list(wall.y) == [10.0, 100.0]
    assert list(ratio.y) == [0.1, 1.0]  # wall median / raw wall median
    eos_ratio = [t for t in fig.data if t.name == "exactly-once"][-1]
    assert list(eos_ratio.y) == [0.1, 1.0]
    assert "load average 1.0–3.0" in fig.layout.title.text


def test_scale_figure():
    data = {"args": {"streams": "50", "partitions": "8", "replicas": "2"}, "join_s": 12.5,
            "load": {"min": 1, "median": 1, "max": 1}, "machine": {"nproc": 2},
            "windows": [{"ok": True, "rate": 200.0, "produced_rate": 199.0,
                         "committed_rate": 190.0,
                         "series": [{"t": 0.0, "lag": 5, "poll_ms": 20.0},
                                    {"t": 1.0, "lag": 7, "poll_ms": 30.0}]}],
            "replicas": [{"name": "s00", "partitions": 4, "rss_mb": 150.0},
                         {"name": "s01", "partitions": 4, "rss_mb": 160.0}]}
    fig = charts.scale_figure(data)
    by_name = {t.name: t for t in fig.data}
    assert list(by_name["lag @ 200 msg/s"].y) == [5, 7]
    assert list(by_name["snapshot @ 200 msg/s"].y) == [20.0, 30.0]
    assert list(by_name["produced"].y) == [199.0] and list(by_name["committed"].y) == [190.0]
    assert list(by_name["partitions"].y) == [4, 4]
    assert list(by_name["RSS MiB"].y) == [150.0, 160.0]
    assert "joined in 12.5 s" in fig.layout.title.text


def test_main_skips_missing_and_writes_html(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    (results / "throughput.json").write_text(json.dumps(THROUGHPUT))
    out = tmp_path / "charts"
    assert charts.main(["--results", str(results), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "skip scale: no" in printed
    html = (out / "throughput.html").read_text()
    assert 'src="plotly.min.js"' in html and "groupscope ×1" in html
    assert (out / "plotly.min.js").stat().st_size > 1_000_000


def test_main_rejects_unknown_chart(tmp_path):
    assert charts.main(["--results", str(tmp_path), "--out", str(tmp_path), "--only",
                        "nope"]) == 2


@pytest.mark.parametrize("bad", [{"runs": [{"ok": True}]}, {"table": "x"}])
def test_main_skips_bad_shape(tmp_path, capsys, bad):
    (tmp_path / "throughput.json").write_text(json.dumps(bad))
    assert charts.main(["--results", str(tmp_path), "--out", str(tmp_path / "o"),
                        "--only", "throughput"]) == 0
    assert "unexpected shape" in capsys.readouterr().out


def _sp(med, lo, hi):
    return {"median": med, "min": lo, "max": hi, "n": 5}


def test_rebalance_figure():
    row = {"assignor": "range", "protocol": "classic", "event": "kill", "reps": 5,
           "a_broker_s": _sp(6.0, 5.0, 7.0), "b_observer_s": _sp(7.0, 6.0, 9.0),
           "c_processed_s": None, "moved": _sp(2, 2, 3)}
    stop_row = dict(row, event="stop", a_broker_s=_sp(0.5, 0.4, 0.9))
    empty = dict(row, assignor="uniform", reps=0)
    fig = charts.rebalance_figure({"table": [row, stop_row, empty]})
    a = [t for t in fig.data if t.legendgroup == "a_broker_s"]
    assert [list(t.y) for t in a] == [[6.0], [0.5]]  # kill, then stop; reps=0 left out
    assert list(a[0].error_y.array) == [1.0] and list(a[0].error_y.arrayminus) == [1.0]
    c = next(t for t in fig.data if t.legendgroup == "c_processed_s")
    assert list(c.y) == [None]  # missing measurement stays a gap, not a zero
    assert list(next(t for t in fig.data if t.name == "moved (kill)").y) == [2]


def test_latency_figure():
    data = {"results": [
        {"rate": 1000, "sustained": True, "latency_ms": {"p50": 900, "p90": 1500, "p99": 2500},
         "summarised_ms": {"p50": 700}, "shown_ms": {"p50": 200}},
        {"rate": 10000, "sustained": False, "latency_ms": {"p50": 5000, "p90": 9000,
                                                           "p99": 12000},
         "summarised_ms": None, "shown_ms": None}]}
    fig = charts.latency_figure(data)
    by = {t.name: t for t in fig.data}
    assert list(by["p99"].y) == [2500, 12000]
    assert list(by["p50"].x) == ["1000 msg/s", "10000 msg/s (not sustained)"]
    assert list(by["produce → summary written"].y) == [700, None]


def test_footprint_figure():
    data = {"summary": {"startup_s": {"broker ready": _sp(5.0, 4.0, 6.0),
                                      "up done": _sp(40.0, 35.0, 50.0)},
                        "start_replica_to_first_batch_s": _sp(8.0, 7.0, 9.0),
                        "rss_mb": {"spark": {"median": 900.0, "max": 950.0, "n": 3},
                                   "replica:r1": {"median": 170.0, "max": 171.0, "n": 3},
                                   "replica (any)": {"median": 170.0, "max": 180.0, "n": 9}}}}
    fig = charts.footprint_figure(data)
    start, rss = fig.data
    assert list(start.y) == ["broker ready", "up done", "start replica → first batch"]
    assert list(start.x) == [5.0, 40.0, 8.0]
    assert list(rss.y) == ["spark", "replica (any)"]  # per-replica roles folded into "any"
    assert list(rss.error_x.array) == [50.0, 10.0]

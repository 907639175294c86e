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

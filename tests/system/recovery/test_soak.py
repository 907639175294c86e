"""The soak, short form: `groupscope up` with a replica killed every 15 s for ~75 s.

The 10-minute run and its table live in docs/soak.md; this test keeps the checks that do not
depend on machine load: nothing of the stack survives `up`, no zombie outlives one sample,
and no long-lived process grows its fds or threads. RSS is reported, not asserted here: a
75 s run is mostly JVM warm-up.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from backend.cli import main


@pytest.mark.slow
def test_a_short_soak_leaves_no_orphans_no_zombies_and_no_fd_or_thread_growth(
        stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the guide's command (docs/soak.md), shorter; its verdict also judges RSS, not asserted
    main(["soak", "--duration", "75", "--kill-every", "15", "--json", str(tmp_path / "s.json")])
    table = capsys.readouterr().out
    print(table)
    result = json.loads((tmp_path / "s.json").read_text())
    assert result["samples"] >= 28, table[-2000:]
    assert result["kills"] >= 4 and not result["kill_errors"], table
    assert result["up_exit"] in (0, 130), table
    assert result["orphans"] == [], table
    # a run that passed leaves nothing behind, its data directory included; one that found a
    # problem (RSS, not asserted here) keeps it to be read, and the test removes it
    data = re.search(r"\(data in (\S+)\)", table)
    assert data, table[:2000]
    kept = Path(data.group(1))
    assert kept.exists() == bool(result["problems"]), table
    shutil.rmtree(kept, ignore_errors=True)
    # spark-class exec's into the JVM while its process-substitution child may still run; that
    # one bash then becomes the JVM's child, which never reaps it. At most that one, ever.
    zombies = result["lingering_zombies"]
    launcher = [z for z in zombies if "[bash] (spark, parent" in z]
    assert len(launcher) <= 1, table
    assert [z for z in zombies if z not in launcher] == [], table
    roles = {r["role"] for r in result["roles"]}
    assert {"broker", "spark", "backend", "web", "replica slot"} <= roles, table
    # Spark keeps a killed replica's session (and its threads) for the 3-minute session
    # timeout, longer than this run; the 10-minute soak in docs/soak.md shows them flat
    growth = [p for p in result["problems"] if ("fds grew" in p or "threads grew" in p)
              and not p.startswith("spark: threads")]
    assert growth == [], table

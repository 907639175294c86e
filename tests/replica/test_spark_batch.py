"""The Spark side of a batch on the real engine: validation reasons and per-stream numbers."""

from __future__ import annotations

import re
import sys
import uuid

import orjson
import pytest

from backend.contracts.summary import Summary
from backend.proc import run
from backend.replica.batch import MicroBatch
from backend.replica.deadletter import (
    REASON_KEY_MISMATCH,
    REASON_NOT_JSON,
    REASON_NOT_OBJECT,
    cheap_reason,
)
from tests.replica.harness import REPO, message
from tests.system.security.bad_input import malformed


@pytest.mark.parametrize("typed", [False, True], ids=["raw-feed", "typed-feed"])
def test_batch_aggregates_and_rejects_in_spark(summariser, typed):
    b = MicroBatch()
    offset = 0

    def add(key, value, partition=0):
        nonlocal offset
        b.add(partition, offset, key, value)
        offset += 1
        return offset - 1

    for seq in range(20):
        add(b"car-01", message("car-01", seq))
        add(b"car-02", message("car-02", seq), partition=3)
    add(b"car-01", message("car-01", 7))  # seq 7 twice in one batch: a duplicate, not old
    bad = {
        add(b"car-01", b"not json at all"): REASON_NOT_JSON,
        add(b"car-01", b"[1, 2]"): REASON_NOT_OBJECT,
        add(b"car-01", orjson.dumps({**orjson.loads(message("car-01", 99)), "rpm": "fast"})):
            "missing or wrong-typed field: rpm",
        add(b"car-01", orjson.dumps({k: v for k, v in orjson.loads(message("car-01", 99)).items()
                                     if k != "ts"})): "missing or wrong-typed field: ts",
        add(b"car-01", message("car-02", 99)): REASON_KEY_MISMATCH,
        add(b"car-01", message("car-01", 2.5)): "missing or wrong-typed field: seq",
    }
    # every kind in tests/system/security/bad_input.py that needs a parse to find
    for _kind, key, value, reason in malformed():
        if key is not None and value is not None and cheap_reason(key, value) is None:
            bad[add(key, value)] = reason
    if typed:
        table, rejected = b.to_typed_arrow()
        result = summariser.summarise(table, {"car-01": 4}, typed=True)
        assert not result.bad
        got_bad = {d.offset: d.reason for d in rejected}
    else:
        result = summariser.summarise(b.to_arrow(), {"car-01": 4})
        got_bad = {o: r for p, o, r in result.bad}
    assert got_bad == bad  # both feeds reject the same records for the same reasons

    one, two = result.partials[(0, "car-01")], result.partials[(3, "car-02")]
    assert (one.count, one.old, one.new_distinct, one.min_seq, one.max_seq) == (21, 5, 15, 0, 19)
    assert (two.count, two.old, two.new_distinct) == (20, 0, 20)
    speeds = [40.0 + s % 50 for s in range(20)]
    assert two.fields["speed_kmh"].sum == pytest.approx(sum(speeds))
    assert two.fields["speed_kmh"].max == max(speeds)
    assert sum(w.count for w in two.windows.values()) == 20

    s = Summary("car-01", 0, count=5, last_seq=4)
    s.merge_batch(one)
    assert s.count == 26 and s.last_seq == 19 and s.duplicates == 6 and s.gaps == 0
    assert s.complete


def test_the_batch_query_is_one_stage_without_a_shuffle_or_a_distinct_aggregate(summariser):
    """The lean plan: a batch runs as one task; distinct seqs come from a per-seq level."""
    from backend.replica.spark_summary import aggregate, batch_frame

    b = MicroBatch()
    for seq in range(50):
        b.add(seq % 3, seq, b"car-01", message("car-01", seq))
    table, _ = b.to_typed_arrow()
    df = aggregate(batch_frame(summariser.session(), table, {"car-01": 10}, typed=True),
                   validated=True)
    plan = df._explain_string(mode="formatted")
    assert "HashAggregate" in plan  # the plan was read at all
    # the batch crosses as one row of arrays, unpacked in the task (local_frame), not as a
    # local relation of one object per record that every analyser rule walks
    assert re.search(r"Arguments: inline\(arrays_zip\(", plan), plan
    for removed in ("Exchange", "Expand", "count(distinct", "merge_count(distinct"):
        assert removed.lower() not in plan.lower(), f"{removed} in the batch plan:\n{plan}"


def typed_batch(rows: int, streams: int = 1, windows: int = 1):  # type: ignore[no-untyped-def]
    """`rows` records over `streams` streams (each on one partition) and `windows` windows:
    streams x windows groups once there are that many rows."""
    from backend.contracts.summary import WINDOW_MS

    b = MicroBatch()
    for offset in range(rows):
        n, seq = offset % streams, offset // streams
        sid = f"car-{n:02d}"
        ts = 1_700_000_000_000 + (seq % windows) * WINDOW_MS
        b.add(n % 3, offset, sid.encode(), message(sid, seq, ts))
    return b.to_typed_arrow()[0]


# (rows, streams): the local plan; the grouping plan interpreted; the grouping plan compiled
PLAN_CASES = {"local": (50, 1), "interpreted": (1_500, 40), "compiled": (5_000, 12)}


@pytest.mark.parametrize("case", list(PLAN_CASES))
def test_a_batch_query_costs_the_engine_one_job_of_one_task_or_none(summariser, spark_engine,
                                                                     case):
    """What the engine runs per batch, counted by its own REST API: a caught-up replica's
    small batch no job at all (the local plan), a larger one one job of one task in either
    execution mode. A later plan that brings back a job, a shuffle or a second pass would
    multiply a caught-up replica's cost at rest (bench/README.md, "The demo at rest")."""
    import json
    import urllib.request

    from backend.netutil import wait_until
    from backend.replica.spark_summary import INTERPRETED_BELOW_ROWS, fits_local_plan

    def get(path: str):  # type: ignore[no-untyped-def]
        with urllib.request.urlopen(f"{spark_engine.ui_url}/api/v1/{path}", timeout=10) as r:
            return json.load(r)

    [app] = [a["id"] for a in get("applications")]
    rows, streams = PLAN_CASES[case]
    table = typed_batch(rows, streams)
    assert fits_local_plan(table) == (case == "local")
    assert (rows < INTERPRETED_BELOW_ROWS) == (case != "compiled")
    summariser.summarise(table, {"car-01": 10}, typed=True)  # the session's confs set

    def tagged(tag: str, batch) -> None:  # type: ignore[no-untyped-def]
        summariser.session().addTag(tag)  # the engine tags the jobs of what follows
        try:
            summariser.summarise(batch, {"car-01": 10}, typed=True)
        finally:
            summariser.session().removeTag(tag)

    def jobs(tag: str) -> list[dict]:
        return [j for j in get(f"applications/{app}/jobs")
                if any(tag in t for t in j.get("jobTags", []))]

    run = uuid.uuid4().hex[:8]
    tagged(f"batch-cost-{run}", table)
    # then a batch that surely runs a job: once the engine lists it, it lists the first one's
    tagged(f"barrier-{run}", typed_batch(*PLAN_CASES["compiled"]))
    wait_until(lambda: jobs(f"barrier-{run}") and all(
        j["status"] != "RUNNING" for j in jobs(f"barrier-{run}")),
        timeout=30, what="the barrier batch's job in the engine's status store")
    expected = [] if case == "local" else [("SUCCEEDED", 1)]
    assert [(j["status"], j["numTasks"]) for j in jobs(f"batch-cost-{run}")] == expected


def test_the_local_plan_is_answered_while_planning(summariser):
    """The local plan's physical plan is the local relation of its answer: Spark's optimiser
    evaluated the array functions over the packed row, so no operator is left to run."""
    from backend.replica.spark_summary import local_plan

    plan = local_plan(summariser.session(), typed_batch(60, 6), {"car-01": 3})._explain_string(
        mode="formatted")
    assert "LocalTableScan" in plan, plan
    for operator in ("HashAggregate", "Generate", "Project", "Exchange", "Filter"):
        assert operator not in plan, f"{operator} left in the local plan:\n{plan}"


@pytest.mark.parametrize("seed,repeats", [(11, True), (12, True), (13, False), (14, False)])
def test_the_local_plan_gives_the_grouping_plans_numbers(summariser, seed, repeats):
    """Random batches with streams on several partitions and windows, one stream never merged
    before, and seqs repeated, skipped and below the last merged one: both plans give the
    same partials. A window's sums add its rows in batch order in both plans where the
    grouping plan has one level (no repeated seq), so they are equal exactly; with repeated
    seqs it adds per seq first. A stream's sums add its windows in the order each plan
    returns them, so they are equal to rounding."""
    import random

    from backend.contracts.summary import WINDOW_MS
    from backend.replica.spark_summary import fits_local_plan, seqs_unique

    rng = random.Random(seed)
    last = {f"car-{i:02d}": rng.choice([-1, 5, 40]) for i in range(5)}
    streams = [*sorted(last), "car-99"]  # car-99: not in `last`, so every seq is new
    pairs = [(sid, seq) for sid in streams for seq in range(250)]
    rows = rng.choice([30, 300, 900])
    picked = ([rng.choice(pairs) for _ in range(rows)] if repeats
              else rng.sample(pairs, rows))
    b = MicroBatch()
    for offset, (sid, seq) in enumerate(picked):
        value = orjson.loads(message(sid, seq))
        value["ts"] = 1_700_000_000_000 + rng.randrange(0, 3 * WINDOW_MS)
        value["speed_kmh"] = rng.uniform(0, 250)
        b.add(rng.randrange(2), offset, sid.encode(), orjson.dumps(value))
    table, _ = b.to_typed_arrow()
    assert fits_local_plan(table)
    assert repeats or seqs_unique(table)
    local = summariser.query_local(table, last)
    grouped = summariser.query_grouped(table, last, typed=True)
    assert local.partials and set(local.partials) == set(grouped.partials)
    assert {sid for _, sid in local.partials} == set(streams)
    assert not local.bad and not grouped.bad
    exact = seqs_unique(table)

    def same_stats(mine, theirs, where, exactly: bool) -> None:  # type: ignore[no-untyped-def]
        for name, stats in mine.items():
            other = theirs[name]
            assert (stats.count, stats.min, stats.max) == (other.count, other.min,
                                                           other.max), (where, name)
            if exactly:
                assert (stats.sum, stats.sumsq) == (other.sum, other.sumsq), (where, name)
            else:
                assert stats.sum == pytest.approx(other.sum, rel=1e-12), (where, name)
                assert stats.sumsq == pytest.approx(other.sumsq, rel=1e-12), (where, name)

    for key, mine in local.partials.items():
        theirs = grouped.partials[key]
        assert (mine.count, mine.old, mine.new_distinct, mine.min_seq, mine.max_seq,
                mine.min_ts, mine.max_ts) == (theirs.count, theirs.old, theirs.new_distinct,
                                             theirs.min_seq, theirs.max_seq, theirs.min_ts,
                                             theirs.max_ts), key
        same_stats(mine.fields, theirs.fields, key, exactly=False)
        assert set(mine.windows) == set(theirs.windows), key
        for start, window in mine.windows.items():
            assert window.count == theirs.windows[start].count, (key, start)
            same_stats(window.fields, theirs.windows[start].fields, (key, start),
                       exactly=exact)


def test_a_small_batch_takes_the_local_plan_and_a_large_one_the_grouping_plan():
    from backend.replica.spark_summary import LOCAL_PLAN_BUDGET, fits_local_plan

    assert fits_local_plan(typed_batch(60, 12))  # a caught-up replica's batch
    assert fits_local_plan(typed_batch(LOCAL_PLAN_BUDGET // 10, 10))
    assert not fits_local_plan(typed_batch(LOCAL_PLAN_BUDGET // 10 + 1, 10))
    # groups are (partition, stream, window): one stream's many windows count
    assert fits_local_plan(typed_batch(LOCAL_PLAN_BUDGET // 10, 1, windows=10))
    assert not fits_local_plan(typed_batch(LOCAL_PLAN_BUDGET // 10, 1, windows=11))
    assert not fits_local_plan(typed_batch(LOCAL_PLAN_BUDGET + 1))  # the rows alone
    assert not fits_local_plan(typed_batch(2_000, 100))  # a scaled fleet's backlog


@pytest.mark.parametrize("plan", ["local", "grouping"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_duplicates_gaps_and_replays_are_counted_exactly(summariser, seed, plan):
    """Random seqs per stream -- repeated, skipped, below the last merged one -- against a
    plain Python count of the same rows, by either plan."""
    import random

    from backend.contracts.summary import WINDOW_MS

    rng = random.Random(seed)
    b = MicroBatch()
    rows: list[tuple[str, int, int]] = []
    last = {"car-01": 30, "car-02": -1, "car-03": 5}
    for offset in range(3_000):
        sid = rng.choice(sorted(last))
        seq = rng.randrange(0, 120)
        ts = 1_700_000_000_000 + seq * 250  # a repeated seq carries its original time
        value = orjson.loads(message(sid, seq))
        value["ts"] = ts
        b.add(0, offset, sid.encode(), orjson.dumps(value))
        rows.append((sid, seq, ts))
    table, _ = b.to_typed_arrow()
    result = (summariser.query_local(table, last) if plan == "local"
              else summariser.query_grouped(table, last, typed=True))
    for sid, known in last.items():
        mine = [(seq, ts) for s, seq, ts in rows if s == sid]
        part = result.partials[(0, sid)]
        assert part.count == len(mine)
        assert part.old == sum(1 for seq, _ in mine if seq <= known)
        assert part.new_distinct == len({seq for seq, _ in mine if seq > known})
        assert (part.min_seq, part.max_seq) == (min(s for s, _ in mine), max(s for s, _ in mine))
        windows = {ts // WINDOW_MS * WINDOW_MS for _, ts in mine}
        assert set(part.windows) == windows
        assert sum(w.count for w in part.windows.values()) == len(mine)


@pytest.mark.parametrize("seed", [4, 5])
def test_a_batch_without_repeated_seqs_gets_the_same_numbers_from_one_level(summariser, seed):
    """Seqs skipped and below the last merged one, but none twice: the one-level plan the
    replica then takes gives exactly what the per-seq plan gives."""
    import random

    from backend.replica.spark_summary import aggregate, batch_frame, fold, seqs_unique

    rng = random.Random(seed)
    last = {"car-01": 30, "car-02": -1, "car-03": 5}
    b = MicroBatch()
    for offset, (sid, seq) in enumerate(rng.sample(
            [(sid, seq) for sid in sorted(last) for seq in range(120)], 250)):
        b.add(offset % 3, offset, sid.encode(), message(sid, seq))
    table, _ = b.to_typed_arrow()
    assert seqs_unique(table)
    frame = batch_frame(summariser.session(), table, last, typed=True)
    one = fold(aggregate(frame, validated=True, unique=True).collect())
    two = fold(aggregate(frame, validated=True, unique=False).collect())
    assert one.partials == two.partials and one.partials
    def aggregations(df) -> int:  # "(5) HashAggregate" heads each node's details
        return len(re.findall(r"^\(\d+\) HashAggregate", df._explain_string(mode="formatted"),
                              re.M))

    assert aggregations(aggregate(frame, validated=True, unique=True)) == 2  # partial + final
    assert aggregations(aggregate(frame, validated=True, unique=False)) == 4


def test_small_batches_run_interpreted_large_ones_compiled_with_the_same_numbers(summariser):
    """The grouping plan's execution mode follows the batch size (INTERPRETED_BELOW_ROWS),
    both ways across the line, and the numbers do not depend on it: each batch is run again
    in the other mode and must give the same partials. The raw feed, whose batches always
    take the grouping plan."""
    import random

    from backend.replica.spark_summary import (
        EXECUTION_CONFS,
        INTERPRETED_BELOW_ROWS,
        SESSION_CONFS,
    )

    rng = random.Random(7)
    last = {"car-01": 3, "car-02": -1}
    for rows in (40, INTERPRETED_BELOW_ROWS + 500, 40):
        b = MicroBatch()
        for offset in range(rows):
            sid = rng.choice(sorted(last))
            b.add(offset % 3, offset, sid.encode(), message(sid, rng.randrange(0, rows // 2)))
        table = b.to_arrow()
        chosen = summariser.summarise(table, last)
        conf = summariser.session().conf
        mode = "interpreted" if rows < INTERPRETED_BELOW_ROWS else "compiled"
        for key, value in {**SESSION_CONFS, **EXECUTION_CONFS[mode]}.items():
            assert conf.get(key) == value, (rows, key)
        other = "compiled" if mode == "interpreted" else "interpreted"
        for key, value in EXECUTION_CONFS[other].items():
            conf.set(key, value)
        forced = summariser.query(table, last)
        assert chosen.partials and forced.partials == chosen.partials, rows
        summariser.reset()  # a new session: its settings must come back from scratch


def test_a_repeated_seq_is_seen_before_the_plan_is_chosen():
    from backend.replica.spark_summary import seqs_unique

    b = MicroBatch()
    for offset, (sid, seq) in enumerate([("car-01", 1), ("car-02", 1), ("car-01", 2)]):
        b.add(0, offset, sid.encode(), message(sid, seq))
    assert seqs_unique(b.to_typed_arrow()[0])
    b.add(0, 3, b"car-02", message("car-02", 1))
    assert not seqs_unique(b.to_typed_arrow()[0])


@pytest.mark.parametrize("args", [
    ["--assignor", "uniform"],
    ["--protocol", "consumer", "--assignor", "cooperative-sticky"],
    ["--protocol", "eager"],
    ["--batch-ms", "0"],
    ["--exactly-once", "--commit", "auto"],
])
def test_cli_rejects_bad_combinations_in_one_line(args):
    proc = run([sys.executable, "-m", "backend.cli", "replica", "--id", "x", *args],
               cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("groupscope replica: "), proc.stderr

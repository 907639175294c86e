"""The soak's rules: a trend across replica incarnations fails, batch-size spread does not; a
warm standby is never an incarnation."""

from __future__ import annotations

from backend.stack.soak import (
    STANDBY_ROLE,
    ProcSample,
    Tick,
    classify,
    judge_replica_slot,
    judge_role,
)

MB = 2**20


def _ticks(peaks_mb: list[int], life: float = 30.0) -> list[Tick]:
    """One incarnation per peak, born one after the other, each sampled at birth and peak."""
    ticks = []
    for i, peak in enumerate(peaks_mb):
        born = 100.0 + i * life
        for t, rss in ((born, 120), (born + life - 1, peak)):
            ticks.append(Tick(t, {f"replica:r{i}": {"rss": rss * MB, "fds": 34, "threads": 24,
                                                    "procs": 1}}, []))
    return ticks


def test_spread_from_batch_size_without_a_trend_passes() -> None:
    report = judge_replica_slot(_ticks([165, 240, 170, 168, 235, 166]), 0.0, 20.0)
    assert report.verdict == "ok", report.problems


def test_memory_growing_across_incarnations_fails() -> None:
    report = judge_replica_slot(_ticks([150, 160, 170, 200, 220, 240]), 0.0, 20.0)
    assert report.verdict == "FAIL"
    assert "later incarnations" in report.problems[0]


def test_a_long_lived_role_fails_on_rss_or_fd_growth_after_warm_up() -> None:
    def ticks(rss_mb: list[int], fds: list[int]) -> list[Tick]:
        return [Tick(float(i), {"spark": {"rss": r * MB, "fds": f, "threads": 40, "procs": 1}},
                     []) for i, (r, f) in enumerate(zip(rss_mb, fds, strict=True))]

    warm = judge_role("spark", ticks([900, 1600, 1650, 1640], [300, 339, 339, 340]), 1.0)
    assert warm.verdict == "ok", warm.problems  # growth during warm-up does not count
    grown = judge_role("spark", ticks([900, 1600, 1700, 2000], [300, 339, 380, 420]), 1.0)
    assert grown.problems == ["spark: RSS after warm-up 1600..2000 MB, more than 1.2x",
                              "spark: fds grew 339 -> 420"]


def test_the_warm_standby_is_its_own_role_until_it_takes_a_name() -> None:
    """A standby waiting for its order holds a handful of fds; judged as a replica it once made
    the first incarnation's peak 8 fds against 44 and failed a CI run on "fds grew"."""
    def proc(pid: int, ppid: int, start: float, cmd: str) -> ProcSample:
        return ProcSample(pid, ppid, start, "sleeping", 100 * MB, 8, 11, cmd)

    replica = "python -m backend.cli replica --group g --id {}"
    procs = {p.pid: p for p in (
        proc(10, 1, 1.0, "python -m backend.cli backend --replicas 3"),
        proc(11, 10, 2.0, replica.format("ada")),
        proc(12, 10, 3.0, replica.format("standby") + " --standby"),
        proc(13, 12, 3.5, "some child of the standby"))}
    roles = classify(1, procs)
    assert roles == {(10, 1.0): "backend", (11, 2.0): "replica:ada@2.0",
                     (12, 3.0): STANDBY_ROLE, (13, 3.5): STANDBY_ROLE}
    # judged: ada alone, though the standby sampled beside it holds fewer fds
    ticks = [Tick(t, {"replica:ada@2.0": {"rss": 200 * MB, "fds": 44, "threads": 31,
                                          "procs": 1},
                      STANDBY_ROLE: {"rss": 150 * MB, "fds": 8, "threads": 14, "procs": 1}},
                 []) for t in (0.0, 20.0)]
    report = judge_replica_slot(ticks, 0.0, 15.0)
    assert (report.verdict, report.samples, report.fds_first) == ("ok", 1, 44), report
    # the same process once it is replica bruno: an incarnation from then on
    procs[12] = proc(12, 10, 3.0, replica.format("bruno"))
    assert classify(1, procs)[(12, 3.0)] == "replica:bruno@3.0"

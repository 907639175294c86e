"""The chaos report as a table for people and a dict for `--json`."""

from __future__ import annotations

from typing import Any

from backend.chaos.run import ChaosReport
from backend.contracts import COMMIT_GUARANTEES


def rows(r: ChaosReport) -> list[tuple[str, str]]:
    cfg, v = r.config, r.verdict
    commit = cfg.options.commit
    mode = f"commit {commit}: {COMMIT_GUARANTEES[commit]}"
    dup_note = "" if v is None or not v.duplicates or cfg.options.exactly_once \
        else " (replays after crashes)"
    lost_note = (f" (what commit {commit} costs: offsets committed before the records "
                 "were summarised)" if r.careless and v is not None and v.lost else "")
    kind = (f"share group, {v.redelivered if v else '-'} redelivered, "
            f"{v.out_of_order if v else '-'} out of order" if cfg.share
            else f"{cfg.options.protocol}/{cfg.options.assignor}, {mode}")
    if cfg.share and v is not None and v.duplicates:
        dup_note = (" (all of them redeliveries)" if not v.unexplained_duplicates
                    else f" ({v.unexplained_duplicates} not explained by a redelivery)")
    out = [
        ("group", f"{r.group} ({kind})"),
        ("load", f"{cfg.rate:.0f} msg/s, {cfg.streams} streams, {cfg.partitions} partitions, "
                 f"{cfg.duration_s:.0f} s, seed {cfg.seed}"),
        ("replicas", f"{cfg.start_replicas} at start, between {cfg.min_replicas} and "
                     f"{cfg.max_replicas}"),
        ("kills (SIGKILL)", str(r.done.get("kill", 0))),
        ("graceful stops", str(r.done.get("stop", 0))),
        ("starts", str(r.done.get("start", 0))),
        ("scales", str(r.done.get("scale", 0))),
        *([("Kafka nodes killed / started", f"{r.done.get('broker_kill', 0)} / "
                                              f"{r.done.get('broker_start', 0)}")]
          if cfg.broker_kills else []),
        ("actions skipped", str(r.skipped)),
        ("rebalances seen", str(r.rebalances)),
        ("messages produced", "-" if v is None else str(v.produced)),
        ("messages processed", "-" if v is None else str(v.processed)),
        ("lost", "-" if v is None else f"{v.lost}{lost_note}"),
        ("duplicates", "-" if v is None else f"{v.duplicates}{dup_note}"),
        ("longest processing gap", f"{r.longest_stall_s:.1f} s"),
        ("longest rebalance gap", f"{r.longest_rebalance_gap_s:.1f} s"),
        ("max lag", f"{r.max_lag} messages"),
        ("drain", "did not finish" if r.drain_s is None else f"{r.drain_s:.1f} s"),
    ]
    if r.producer_failures:
        out.append(("producer failures", str(r.producer_failures)))
    if v is not None and v.unexpected:
        out.append(("unexpected seqs", str(v.unexpected)))
    if r.error:
        out.append(("error", r.error))
    out.append(("verdict", "PASS" if r.ok else "FAIL"))
    return out


def render(r: ChaosReport) -> str:
    width = max(len(k) for k, _ in rows(r))
    return "\n".join(f"{k:<{width}}  {val}" for k, val in rows(r))


def to_dict(r: ChaosReport) -> dict[str, Any]:
    cfg, v = r.config, r.verdict
    return {
        "ok": r.ok, "group": r.group, "topic": r.topic,
        "config": {"duration_s": cfg.duration_s, "rate": cfg.rate, "streams": cfg.streams,
                   "partitions": cfg.partitions, "start_replicas": cfg.start_replicas,
                   "min_replicas": cfg.min_replicas, "max_replicas": cfg.max_replicas,
                   "seed": cfg.seed, "broker_kills": cfg.broker_kills, "share": cfg.share,
                   **cfg.options.model_dump()},
        "actions": r.done, "skipped": r.skipped, "rebalances": r.rebalances,
        "produced": None if v is None else v.produced,
        "processed": None if v is None else v.processed,
        "lost": None if v is None else v.lost,
        "duplicates": None if v is None else v.duplicates,
        "unexpected": None if v is None else v.unexpected,
        "redelivered": None if v is None else v.redelivered,
        "unexplained_duplicates": None if v is None else v.unexplained_duplicates,
        "out_of_order": None if v is None else v.out_of_order,
        "longest_processing_gap_s": r.longest_stall_s,
        "longest_rebalance_gap_s": r.longest_rebalance_gap_s,
        "max_lag": r.max_lag, "drain_s": r.drain_s,
        "producer_failures": r.producer_failures, "error": r.error,
        "streams": [] if v is None else [s.__dict__ for s in v.streams if s.lost or s.duplicates],
    }

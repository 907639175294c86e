"""The lab's scoreboard over repetitions: a table for people (median and spread), a dict for
`--json` with every repetition kept."""

from __future__ import annotations

import statistics
from dataclasses import asdict
from typing import Any

from backend.contracts.lab import LAB_PROTOCOLS, STALL_RULE, Score
from backend.lab.run import LabConfig, LabResult

# (column, Score field, unit): the scoreboard's columns, in order
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("stopped", "stopped", ""),
    ("stalled", "stalled", ""),
    ("partition-s stalled", "stalled_s", " s"),
    ("longest stall", "longest_s", " s"),
    ("back after", "recovered_s", " s"),
    ("hand-offs", "moved", ""),
    ("processed twice", "twice", ""),
)


def spread(values: list[float | None]) -> str:
    """`median [min-max]`; a repetition that did not recover shows as `n/r not back`."""
    known = [v for v in values if v is not None]
    missing = len(values) - len(known)
    if not known:
        return "not back"
    med = statistics.median(known)
    text = _num(med) if len(known) == 1 else f"{_num(med)} [{_num(min(known))}-{_num(max(known))}]"
    return text + (f", {missing}/{len(values)} not back" if missing else "")


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}"


def table(config: LabConfig, results: list[LabResult]) -> str:
    head = ["protocol", "partitions", "cadence", *(c for c, _, _ in COLUMNS)]
    rows = []
    for lab in config.protocols:
        scores = [s for r in results for s in r.scores if s.lab == lab]
        if not scores:
            continue
        rows.append([LAB_PROTOCOLS[lab].title, str(scores[0].partitions),
                     spread([s.cadence_s for s in scores]) + " s",
                     *(_cell(scores, attr, unit) for _, attr, unit in COLUMNS)])
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=False)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True))
             for line in [head, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    reps = len(results)
    lines += ["", f"event: {config.event}; {reps} repetition{'s' if reps != 1 else ''}, "
                  f"median [min-max]; {config.replicas} replicas a group, "
                  f"{config.partitions} partitions, {config.rate:.0f} msg/s",
              f"how a stall is measured: {STALL_RULE}"]
    busy = [r.busy_cores for r in results if r.busy_cores is not None]
    if busy:
        lines.append(f"the machine before the event: {spread(busy)} of {results[0].cores} cores "
                     "busy (the fleet, every replica, Spark and the broker when local)")
    lines += [n for r in results for n in r.notes]
    return "\n".join(lines)


def _cell(scores: list[Score], attr: str, unit: str) -> str:
    text = spread([getattr(s, attr) for s in scores])
    return text if "not back" in text else text + unit


def to_dict(config: LabConfig, results: list[LabResult]) -> dict[str, Any]:
    return {"config": asdict(config), "stall_rule": STALL_RULE,
            "repetitions": [asdict(r) for r in results],
            "median": {lab: {attr: _median([getattr(s, attr) for r in results
                                            for s in r.scores if s.lab == lab])
                             for _, attr, _ in COLUMNS}
                       for lab in config.protocols}}


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None

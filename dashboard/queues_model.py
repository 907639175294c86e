"""Rows of the Queues page: the consumer group and the share group side by side.

Pure: from the supervisor's `Status`, the consumer group's summaries (Summary dicts from its
changelog) and the share group's folded `QueueSummary`s, the rows the page draws. Unit-tested.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from backend.contracts import Event, EventType
from backend.contracts.control import ReplicaInfo
from backend.contracts.queue_summary import QueueSummary

# a share replica's heartbeat counters (share_runner.py) and what each counts
ACK_COUNTERS = {"processed": "accepted", "released": "released", "rejected": "rejected",
                "redelivered": "redelivered"}


def _parts(partitions: Sequence[int]) -> str:
    return ", ".join(str(p) for p in partitions) if partitions else "none: idle"


def consumer_rows(replicas: Sequence[ReplicaInfo]) -> list[dict[str, Any]]:
    """One row per running consumer-group replica; one without a partition is idle."""
    return [{"replica": r.name, "partitions": _parts(r.partitions),
             "working": bool(r.partitions)} for r in replicas if r.alive]


def share_rows(replicas: Sequence[ReplicaInfo], queue: Mapping[str, QueueSummary],
               rates: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """One row per running share-group replica: its partitions (shared with others), the
    records it summarised (from the deltas) and its recent rate when known."""
    done = summarised_by(queue)
    return [{"replica": r.name, "partitions": _parts(r.partitions),
             "summarised": done.get(r.name, 0),
             "msg/s": round((rates or {}).get(r.name, 0.0), 1),
             "working": bool(done.get(r.name, 0))} for r in replicas if r.alive]


def rates(before: Mapping[str, int], after: Mapping[str, int], seconds: float
          ) -> dict[str, float]:
    """Records per second per replica between two counts taken `seconds` apart."""
    if seconds <= 0:
        return {}
    return {k: max(0, n - before.get(k, 0)) / seconds for k, n in after.items()}


def summarised_by(queue: Mapping[str, QueueSummary]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in queue.values():
        for name, n in s.replicas.items():
            out[name] = out.get(name, 0) + n
    return out


def car_rows(consumer: Mapping[str, Mapping[str, Any]], queue: Mapping[str, QueueSummary]
             ) -> list[dict[str, Any]]:
    """Per car: what each group's summaries prove. The consumer group reads a car's one
    partition in order, so a record is either new, replayed (a duplicate) or missing (a gap);
    the share group's proof counts out-of-order arrivals and redeliveries as well."""
    rows = []
    for car in sorted(set(consumer) | set(queue)):
        c = consumer.get(car) or {}
        q = queue.get(car)
        rows.append({
            "car": car,
            "consumer group: summarised": c.get("count"),
            "consumer group: duplicates": c.get("duplicates"),
            "consumer group: gaps": c.get("gaps"),
            "share group: summarised": q.count if q else None,
            "share group: out of order": q.out_of_order if q else None,
            "share group: redelivered": q.redelivered if q else None,
            "share group: duplicates": q.duplicates if q else None,
            "share group: lost or in flight": q.lost if q else None,
        })
    return rows


def deliveries(queue: Mapping[str, QueueSummary]) -> dict[int, int]:
    """Delivery count -> records summarised on that delivery, over every car (Spark's)."""
    out: dict[int, int] = {}
    for q in queue.values():
        for k, n in q.deliveries.items():
            out[k] = out.get(k, 0) + n
    return dict(sorted(out.items()))


def share_beats(events: Sequence[Event]) -> dict[str, Event]:
    """The newest heartbeat of each share replica among `events`."""
    out: dict[str, Event] = {}
    for ev in events:
        newer = ev.replica not in out or ev.ts > out[ev.replica].ts
        if ev.type == EventType.HEARTBEAT and ev.fields.get("share") and newer:
            out[ev.replica] = ev
    return out


def ack_rates(before: Mapping[str, Event], after: Mapping[str, Event]
              ) -> dict[str, dict[str, float]]:
    """Per share replica with a newer heartbeat in `after` than in `before`, records/s it
    accepted, released, rejected and took again between the two, and the records it held
    unacknowledged on average (the replica's own figure for its last interval). Its counters
    only grow while the process lives; a restart starts them again, which gives 0, never a
    negative."""
    out: dict[str, dict[str, float]] = {}
    for name, b in after.items():
        a = before.get(name)
        if a is None or b.ts <= a.ts:
            continue
        seconds = (b.ts - a.ts) / 1000.0
        out[name] = {label: max(0.0, (int(b.fields.get(k, 0)) - int(a.fields.get(k, 0)))
                                / seconds) for k, label in ACK_COUNTERS.items()}
        out[name]["in flight"] = float(b.fields.get("in_flight") or 0.0)
    return out

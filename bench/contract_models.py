"""What pydantic would cost on the hot-path contracts, next to the plain dataclasses they are.

The control plane's bodies are pydantic models (validation at an HTTP boundary, a few per
call). The observer's Snapshot and the replica events are built on every poll and for every
event read, so this measures, in one run, the same work both ways:

- a Snapshot of P partitions, S streams and M members: built (every poll), and serialised to a
  dict (`snapshot --json`): the contract's frozen dataclasses with `dataclasses.asdict` and with
  its `SNAPSHOT_JSON` TypeAdapter, against pydantic-model mirrors with `model_dump`;
- E events from their JSON-decoded dicts (`Event.from_dict` vs model validation).

The contract keeps dataclasses where pydantic measured slower to build, and lets pydantic
serialise them (SNAPSHOT_JSON) where it is faster.

Pure CPU, no broker: `python bench/contract_models.py [--json PATH]`. Quiet machine only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pydantic import BaseModel, ConfigDict  # noqa: E402

from backend.contracts import (  # noqa: E402
    SNAPSHOT_JSON,
    Event,
    MemberView,
    PartitionView,
    Snapshot,
    StreamView,
)

# The Snapshot as pydantic models would have it (the contract keeps dataclasses).

class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class MemberModel(_Frozen):
    member_id: str
    client_id: str
    host: str
    partitions: tuple[int, ...]
    target_partitions: tuple[int, ...] | None = None
    alive: bool = True
    idle: bool = False
    lag_messages: int = 0
    group_instance_id: str | None = None


class PartitionModel(_Frozen):
    partition: int
    owner: str | None
    committed: int | None
    end: int
    lag_messages: int
    lag_seconds: float | None
    health: str = "OK"
    owner_member_id: str | None = None
    lag_seconds_exact: bool = False


class StreamModel(_Frozen):
    stream_id: str
    partition: int
    owner: str | None
    source: str = "murmur2"


class SnapshotModel(_Frozen):
    taken_ms: int
    group: str
    topic: str | None
    state: str
    protocol: str
    assignor: str | None
    generation: int | None
    members: tuple[MemberModel, ...]
    partitions: tuple[PartitionModel, ...]
    streams: tuple[StreamModel, ...]
    rebalances: tuple[()] = ()
    health: str = "OK"
    total_lag: int = 0


class EventModel(BaseModel):
    """The replica event as a pydantic model (the contract keeps the dataclass)."""

    model_config = ConfigDict(frozen=True, extra="allow")
    ts: int
    group: str
    replica: str
    type: str


def _rows(p: int, s: int, m: int) -> tuple[list[dict], list[dict], list[dict]]:
    members = [dict(member_id=f"m-{i}", client_id=f"c-{i}", host="/127.0.0.1",
                    partitions=tuple(range(i, p, m))) for i in range(m)]
    parts = [dict(partition=i, owner=f"c-{i % m}", committed=1000 * i, end=1000 * i + 5,
                  lag_messages=5, lag_seconds=0.2) for i in range(p)]
    streams = [dict(stream_id=f"car-{i:05d}", partition=i % p, owner=f"c-{i % p % m}")
               for i in range(s)]
    return members, parts, streams


def _snapshot_dataclass(rows: tuple[list[dict], list[dict], list[dict]]) -> Snapshot:
    members, parts, streams = rows
    return Snapshot(taken_ms=1, group="g", topic="t", state="Stable", protocol="classic",
                    assignor="range", generation=3,
                    members=tuple(MemberView(**r) for r in members),
                    partitions=tuple(PartitionView(**r) for r in parts),
                    streams=tuple(StreamView(**r) for r in streams), rebalances=())


def _snapshot_model(rows: tuple[list[dict], list[dict], list[dict]]) -> SnapshotModel:
    members, parts, streams = rows
    return SnapshotModel(taken_ms=1, group="g", topic="t", state="Stable", protocol="classic",
                         assignor="range", generation=3,
                         members=tuple(MemberModel(**r) for r in members),
                         partitions=tuple(PartitionModel(**r) for r in parts),
                         streams=tuple(StreamModel(**r) for r in streams))


def _events(n: int) -> list[dict[str, Any]]:
    return [{"ts": 1_700_000_000_000 + i, "group": "g", "replica": "ada", "type": "heartbeat",
             "rate": 812.5, "batch_ms": 410, "partitions": [0, 1, 2]} for i in range(n)]


def _time(fn: Callable[[], object], repeats: int) -> list[float]:
    fn()  # warm up
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--members", type=int, default=100)
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = ap.parse_args()
    rows = _rows(args.partitions, args.streams, args.members)
    events = _events(args.events)
    shape = f"{args.partitions} p / {args.streams} s / {args.members} m"
    built, as_model = _snapshot_dataclass(rows), _snapshot_model(rows)
    cases = {
        f"snapshot {shape}, build (every poll)": (
            lambda: _snapshot_dataclass(rows), lambda: _snapshot_model(rows)),
        f"snapshot {shape}, to dict: asdict vs model_dump": (
            lambda: asdict(built), lambda: as_model.model_dump()),
        f"snapshot {shape}, to dict: asdict vs SNAPSHOT_JSON": (
            lambda: asdict(built), lambda: SNAPSHOT_JSON.dump_python(built)),
        f"{args.events} events from dicts": (
            lambda: [Event.from_dict(e) for e in events],
            lambda: [EventModel.model_validate(e) for e in events]),
    }
    load = os.getloadavg()[0]
    results = []
    print(f"load average at start {load:.2f}; medians of {args.repeats} runs")
    print(f"{'case':<64} {'dataclass ms':>13} {'pydantic ms':>12} {'ratio':>6}")
    for name, (plain, model) in cases.items():
        a = statistics.median(_time(plain, args.repeats)) * 1000
        b = statistics.median(_time(model, args.repeats)) * 1000
        results.append({"case": name, "dataclass_ms": round(a, 2), "pydantic_ms": round(b, 2),
                        "ratio": round(b / a, 2)})
        print(f"{name:<64} {a:>13.2f} {b:>12.2f} {b / a:>6.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"load_at_start": load, "results": results},
                                              indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A group's lag over an hour as one compressed block: how the memory keeps every cycle's
total lag (and each partition's, at a coarser step) for days in a few bytes a point.

A block holds two tables of points, oldest first: the group's (time, lag, lag in seconds)
at every cycle it was recorded, and its partitions' lags at the steps they were recorded
(time, then one lag per partition; -1 where a partition was not read). Each column is stored
as differences from its previous value, zigzagged (small either way: small positive) and cut
into byte planes (every value's lowest byte, then every value's next byte, ...), and the
whole block is compressed: the high planes of small changes are all zeros, so a lag that
moves a little costs about a byte a point, and one that does not change (or grows by the same
amount each cycle) next to nothing. A block still filling (rewritten every few minutes) is
compressed with zlib, cheap to redo; a finished hour's, written once, with LZMA: a tenth
smaller for eight times the CPU, about 1.6 ms a block (bench/README.md, "The memory").

Pure (numpy and zlib); the round trip is property-tested (tests/history/test_chunks.py).
"""

from __future__ import annotations

import lzma
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import orjson

FORMAT = 1
MISSING = -1  # a partition not read at that step; a lag in seconds not known (in tenths)
LZMA_TAG = b"\xfd"  # before a finished block's raw LZMA stream (a zlib stream starts 0x78)
LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 6}]


@dataclass
class LagBlock:
    """One group's points for a span of time, as plain lists (the writer appends to them)."""

    times: list[int] = field(default_factory=list)  # epoch ms
    lags: list[int] = field(default_factory=list)
    lag_tenths: list[int] = field(default_factory=list)  # lag in seconds x 10, MISSING: unknown
    # partitions: (topic, partition) keys in first-seen order, and per step its time and a lag
    # per key (MISSING where the key was not read at that step, or not known yet)
    keys: list[tuple[str, int]] = field(default_factory=list)
    part_times: list[int] = field(default_factory=list)
    part_lags: list[list[int]] = field(default_factory=list)

    def add(self, ts_ms: int, lag: int, lag_seconds: float | None) -> None:
        self.times.append(ts_ms)
        self.lags.append(lag)
        self.lag_tenths.append(MISSING if lag_seconds is None else round(lag_seconds * 10))

    def add_partitions(self, ts_ms: int, lags: dict[tuple[str, int], int]) -> None:
        index = {k: i for i, k in enumerate(self.keys)}
        for k in lags:
            if k not in index:
                index[k] = len(self.keys)
                self.keys.append(k)
        row = [MISSING] * len(self.keys)
        for k, v in lags.items():
            row[index[k]] = v
        self.part_times.append(ts_ms)
        self.part_lags.append(row)

    def extend(self, other: LagBlock) -> None:
        """Append a later block's points (the writer folds recent points into an hour's)."""
        for t, lag, tenths in zip(other.times, other.lags, other.lag_tenths, strict=True):
            self.times.append(t)
            self.lags.append(lag)
            self.lag_tenths.append(tenths)
        for t, row in zip(other.part_times, other.part_lags, strict=True):
            self.add_partitions(t, {k: v for k, v in zip(other.keys, row, strict=False)
                                    if v != MISSING})

    def __len__(self) -> int:
        return len(self.times)


def _deltas(values: Sequence[int]) -> np.ndarray:
    a = np.asarray(values, dtype=np.int64)
    return np.diff(a, prepend=np.int64(0)) if a.size else a


def _undo(deltas: np.ndarray) -> list[int]:
    return np.cumsum(deltas, dtype=np.int64).tolist()


def _planes(a: np.ndarray) -> bytes:
    """int64 values as zigzag byte planes: lowest bytes of all, then the next bytes, ..."""
    zz = ((a << 1) ^ (a >> 63)).astype("<u8")
    return zz.view(np.uint8).reshape(-1, 8).T.tobytes()


def _unplanes(data: bytes) -> np.ndarray:
    zz = np.frombuffer(data, dtype=np.uint8).reshape(8, -1).T.copy().view("<u8").ravel()
    return (zz >> 1).astype(np.int64) ^ -(zz & 1).astype(np.int64)


def encode(block: LagBlock, finished: bool = False) -> bytes:
    """The block's bytes: zlib while its hour fills, LZMA once it is `finished`."""
    n, steps, width = len(block.times), len(block.part_times), len(block.keys)
    matrix = np.full((steps, width), MISSING, dtype=np.int64)
    for i, row in enumerate(block.part_lags):
        matrix[i, :len(row)] = row
    head = orjson.dumps({"v": FORMAT, "n": n, "steps": steps,
                         "keys": [[t, p] for t, p in block.keys]})
    columns = np.concatenate([
        _deltas(block.times), _deltas(block.lags), _deltas(block.lag_tenths),
        _deltas(block.part_times),
        # each partition's column down the steps: the matrix transposed, then differenced
        np.diff(matrix.T, axis=1, prepend=np.zeros((width, 1), np.int64)).ravel()
        if steps else np.zeros(0, np.int64)])
    raw = len(head).to_bytes(4, "little") + head + _planes(columns)
    if finished:
        return LZMA_TAG + lzma.compress(raw, format=lzma.FORMAT_RAW, filters=LZMA_FILTERS)
    return zlib.compress(raw, 6)


def decode(data: bytes) -> LagBlock:
    raw = (lzma.decompress(data[1:], format=lzma.FORMAT_RAW, filters=LZMA_FILTERS)
           if data[:1] == LZMA_TAG else zlib.decompress(data))
    size = int.from_bytes(raw[:4], "little")
    head = orjson.loads(raw[4:4 + size])
    if head.get("v") != FORMAT:
        raise ValueError(f"lag block format {head.get('v')} is not {FORMAT}")
    n, steps = head["n"], head["steps"]
    keys = [(t, p) for t, p in head["keys"]]
    body = _unplanes(raw[4 + size:])
    cols, at = [], 0
    for count in (n, n, n, steps):
        cols.append(body[at:at + count])
        at += count
    by_key = body[at:at + steps * len(keys)].reshape(len(keys), steps)
    parts = np.cumsum(by_key, axis=1, dtype=np.int64).T.tolist() if steps else []
    return LagBlock(times=_undo(cols[0]), lags=_undo(cols[1]), lag_tenths=_undo(cols[2]),
                    keys=keys, part_times=_undo(cols[3]), part_lags=parts)

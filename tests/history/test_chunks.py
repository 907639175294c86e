"""The lag block's round trip, and what a steady group costs in it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from backend.history.chunks import MISSING, LagBlock, decode, encode

lags = st.integers(min_value=0, max_value=2**40)


@settings(max_examples=200, deadline=None)
@given(finished=st.booleans(),
       points=st.lists(st.tuples(st.integers(0, 2**41), lags,
                                 st.one_of(st.none(), st.floats(0, 1e6))), max_size=60),
       steps=st.lists(st.dictionaries(st.tuples(st.sampled_from("abc"), st.integers(0, 9)),
                                      lags, max_size=8), max_size=10))
def test_a_block_comes_back_as_it_went_in(finished, points, steps):
    block = LagBlock()
    for ts, lag, seconds in sorted(points, key=lambda p: p[0]):
        block.add(ts, lag, seconds)
    for i, parts in enumerate(steps):
        block.add_partitions(i * 60_000, parts)
    back = decode(encode(block, finished=finished))
    assert (back.times, back.lags, back.lag_tenths) == (block.times, block.lags,
                                                        block.lag_tenths)
    assert back.keys == block.keys and back.part_times == block.part_times
    for row, original in zip(back.part_lags, block.part_lags, strict=True):
        assert row[:len(original)] == original
        assert all(v == MISSING for v in row[len(original):])


def test_extending_a_block_keeps_every_partition_by_its_key():
    first, later = LagBlock(), LagBlock()
    first.add_partitions(0, {("t", 0): 5})
    later.add_partitions(60_000, {("t", 1): 7, ("t", 0): 6})
    first.extend(later)
    assert first.keys == [("t", 0), ("t", 1)]
    assert first.part_lags == [[5], [6, 7]]


def test_an_hour_of_a_steady_group_at_ten_second_cycles_takes_a_few_hundred_bytes():
    block = LagBlock()
    for i in range(360):  # lag growing by the same amount, its age by ten seconds a cycle
        block.add(1_700_000_000_000 + i * 10_000, 1000 + 50 * i, 30.0 + 10 * i)
    for i in range(60):
        block.add_partitions(1_700_000_000_000 + i * 60_000,
                             {("orders", p): 100 + 5 * i for p in range(20)})
    assert len(encode(block)) < 600 and len(encode(block, finished=True)) < 600


def test_a_finished_hour_of_a_moving_lag_is_smaller_than_the_open_one():
    block = LagBlock()
    lag = 5000
    for i in range(360):
        lag = max(0, lag + (i * 7919) % 121 - 60)  # up or down by up to 60 every cycle
        block.add(1_700_000_000_000 + i * 10_000, lag, lag / 50)
    assert len(encode(block, finished=True)) < 0.95 * len(encode(block))

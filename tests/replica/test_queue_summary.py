"""The share group's summary (`contracts.queue_summary`) against plain Python sets and a
record-by-record reference: seq ranges, the fold's counts, and a merge that is associative."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from backend.contracts.queue_summary import QueueDelta, QueueSummary, SeqRanges, fold_deltas
from backend.contracts.summary import FieldStats

seq_lists = st.lists(st.integers(min_value=0, max_value=60), max_size=40)


@given(seq_lists, seq_lists, st.integers(min_value=-1, max_value=70))
def test_seq_ranges_behave_as_the_set_they_stand_for(a: list[int], b: list[int],
                                                     bound: int) -> None:
    ra, rb = SeqRanges.of_seqs(a), SeqRanges.of_seqs(b)
    union = ra.union(rb)
    assert len(union) == len(set(a) | set(b))
    assert union.max == max(set(a) | set(b), default=-1)
    assert union.count_below(bound) == sum(1 for s in set(a) | set(b) if s < bound)
    assert all(s in union for s in a + b)
    for (lo1, hi1), (lo2, _) in zip(union.ranges, union.ranges[1:], strict=False):
        assert lo1 <= hi1 and hi1 + 1 < lo2  # sorted, disjoint, not adjacent
    gaps = {s for lo, hi in union.missing(limit=100) for s in range(lo, hi + 1)}
    assert gaps == set(range(union.max + 1)) - (set(a) | set(b))
    assert SeqRanges.from_list(union.to_list()) == union


def _delta(seqs: list[int], replica: str = "r", deliveries: dict[int, int] | None = None
           ) -> QueueDelta:
    """A delta as Spark makes it from records arriving in `seqs` order."""
    late, high = [], -1
    for s in seqs:
        if s < high:
            late.append(s)
        high = max(high, s)
    return QueueDelta("car-00", 0, replica, count=len(seqs), seqs=SeqRanges.of_seqs(seqs),
                      late=SeqRanges.of_seqs(late),
                      deliveries=deliveries or ({1: len(seqs)} if seqs else {}),
                      fields={"speed_kmh": FieldStats(len(seqs), float(sum(seqs)))}
                      if seqs else {})


@given(st.lists(seq_lists, max_size=8))
def test_a_fold_counts_what_a_record_by_record_reference_counts(batches: list[list[int]]
                                                                ) -> None:
    seen: list[int] = []
    out_of_order = 0
    for batch in batches:
        before = max(seen, default=-1)
        late, high = set(), -1
        for s in batch:
            if s < high:
                late.add(s)
            high = max(high, s)
        out_of_order += len({s for s in batch if s < before or s in late})
        seen += batch
    summaries = fold_deltas(_delta(b) for b in batches if b)
    if not seen:
        assert summaries == {}
        return
    s = summaries["car-00"]
    assert s.count == len(seen)
    assert s.distinct == len(set(seen))
    assert s.duplicates == len(seen) - len(set(seen))
    assert s.lost == max(seen) + 1 - len(set(seen))
    assert s.out_of_order == out_of_order
    assert s.fields["speed_kmh"].sum == sum(seen)


def test_in_order_deltas_have_nothing_out_of_order_lost_or_twice() -> None:
    s = fold_deltas([_delta(list(range(0, 50))), _delta(list(range(50, 120)), "b")])["car-00"]
    assert (s.count, s.lost, s.duplicates, s.out_of_order) == (120, 0, 0, 0)
    assert s.replicas == {"r": 50, "b": 70}


def test_a_redelivery_is_a_duplicate_only_when_summarised_twice() -> None:
    first = _delta(list(range(0, 10)), "alice")
    # bruno summarises 10..19; alice died holding 20..29 unsummarised; they come back
    later = [_delta(list(range(10, 20)), "bruno"),
             _delta(list(range(30, 40)), "bruno"),
             _delta(list(range(20, 30)), "bruno", deliveries={2: 10})]
    s = fold_deltas([first, *later])["car-00"]
    assert (s.lost, s.duplicates, s.redelivered, s.out_of_order) == (0, 0, 10, 10)
    # had alice summarised 20..29 before dying, the redelivery is counted twice
    twice = fold_deltas([first, _delta(list(range(20, 30)), "alice"), *later])["car-00"]
    assert (twice.lost, twice.duplicates) == (0, 10)


def _summary(deltas: list[QueueDelta]) -> QueueSummary:
    return fold_deltas(deltas).get("car-00") or QueueSummary("car-00", 0)


def _facts(s: QueueSummary) -> tuple:
    return (s.count, s.seqs, s.out_of_order, s.deliveries, s.replicas,
            {k: (v.count, v.sum) for k, v in s.fields.items()})


@settings(max_examples=60)
@given(st.lists(seq_lists, min_size=3, max_size=3))
def test_merge_is_associative_and_commutative(parts: list[list[int]]) -> None:
    a, b, c = (_summary([_delta(p, f"r{i}")] if p else []) for i, p in enumerate(parts))

    def merged(x: QueueSummary, y: QueueSummary) -> QueueSummary:
        out = QueueSummary("car-00", 0)
        out.merge(x)
        out.merge(y)
        return out

    assert _facts(merged(merged(a, b), c)) == _facts(merged(a, merged(b, c)))
    assert _facts(merged(a, b)) == _facts(merged(b, a))


def test_a_delta_survives_its_json_form() -> None:
    d = _delta([3, 1, 2, 2], deliveries={1: 3, 2: 1})
    again = QueueDelta.from_dict(d.to_dict())
    assert again.to_dict() == d.to_dict()
    assert again.late == SeqRanges.of_seqs([1, 2])

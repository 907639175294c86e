"""PauseBook: pause and resume only where they change something (see its docstring for why)."""

from __future__ import annotations

from backend.replica.membership import PauseBook


def test_a_healthy_assignment_is_never_paused_or_resumed() -> None:
    book = PauseBook()
    assert book.assigned([0, 1, 2]) == ([], [])


def test_a_failure_pauses_once_and_recovery_resumes_what_is_still_assigned() -> None:
    book = PauseBook()
    assert book.failed([0, 1, 2]) == [0, 1, 2]
    assert book.failed([0, 1, 2]) == []  # retries while backing off pause nothing again
    assert book.backing_off
    assert book.recovered([1, 2]) == [1, 2]  # 0 was revoked meanwhile
    assert not book.backing_off and book.paused == {0}


def test_partitions_assigned_while_backing_off_are_paused_too() -> None:
    book = PauseBook()
    book.failed([0])
    assert book.assigned([3, 4]) == ([3, 4], [])
    assert book.recovered([0, 3, 4]) == [0, 3, 4]


def test_a_partition_lost_while_paused_is_resumed_when_it_comes_back_healthy() -> None:
    """The broker-restart case: paused, session expired (lost), batch then succeeds empty,
    and the group hands the same partitions back - still paused inside librdkafka."""
    book = PauseBook()
    book.failed([0, 1, 2])
    assert book.recovered([]) == []  # lost: nothing assigned to resume
    assert book.assigned([0, 1, 2]) == ([], [0, 1, 2])
    assert book.paused == set()
    assert book.assigned([0, 1, 2]) == ([], [])  # and only once


def test_a_stale_pause_is_not_paused_again_on_the_next_failure() -> None:
    book = PauseBook()
    book.failed([5])
    book.recovered([])
    assert book.failed([5, 6]) == [6]  # 5 is still paused inside the client
    assert book.recovered([5, 6]) == [5, 6]

"""A replica's rate cap and static membership, without a broker: the gate's arithmetic, the
two reasons PauseBook keeps apart, and the consumer settings each choice turns into."""

from __future__ import annotations

import pytest

from backend.fleet.pacing import burst_for
from backend.replica.membership import (
    SESSION_TIMEOUT_MS,
    STATIC_SESSION_TIMEOUT_MS,
    GroupChoice,
    PauseBook,
    RateGate,
)


def test_no_cap_never_limits() -> None:
    gate = RateGate(None)
    assert gate.allowance(0.0) is None
    gate.took(0.0, 10_000)
    assert gate.allowance(0.0) is None and not gate.closed


def test_gate_closes_when_spent_and_reopens_after_half_a_burst() -> None:
    gate = RateGate(40.0)  # burst 10 tokens, reopens at 5
    assert gate.allowance(0.0) == burst_for(40.0) == 10  # a fresh replica is not paused
    gate.took(0.0, 10)
    assert gate.allowance(0.0) == 0 and gate.closed
    assert gate.allowance(0.1) == 0 and gate.closed  # 4 tokens: still under the reopening mark
    assert gate.allowance(0.125) == 5 and not gate.closed


def test_a_record_beyond_the_allowance_is_repaid() -> None:
    gate = RateGate(10.0)  # burst 2.5
    gate.took(0.0, 2)
    gate.took(0.0, 3)  # three more than it had: a debt
    assert gate.allowance(0.0) == 0
    assert gate.allowance(0.25) == 0  # 2.5 tokens earned, 3 owed
    assert gate.allowance(0.45) == 2  # 4.5 earned since 0.0, on top of the 2.5 it began with


@pytest.mark.parametrize("rate, cost", [(50.0, 0.001), (50.0, 0.05), (7.0, 0.001),
                                        (0.5, 0.01), (2000.0, 0.01)])
def test_a_loop_with_an_endless_backlog_takes_the_cap_on_average(rate: float,
                                                                 cost: float) -> None:
    """The runner's loop, simulated: an open gate's allowance is taken at once (the records
    are waiting) and handling them costs `cost` seconds; a closed gate's poll waits at most
    0.2 s or until it reopens. Over 60 s that takes the cap's worth, give or take a burst."""
    gate = RateGate(rate)
    taken, now, seconds = 0, 0.0, 60.0
    while now < seconds:
        allowance = gate.allowance(now)
        assert allowance is not None
        if allowance:
            gate.took(now, allowance)
            taken += allowance
            now += cost
        else:
            wait = gate.until_open(now)
            assert 0 < wait <= 1 / rate * max(1.0, burst_for(rate) / 2) + 1e-9
            now += min(0.2, wait)
    assert abs(taken - rate * seconds) <= burst_for(rate) + 1


def test_waits_for_a_token_are_quiet_unless_the_cap_is_tiny() -> None:
    """From 2 msg/s up the loop just waits for the next tokens; below, the wait is long
    enough that it pauses and keeps polling instead."""
    for rate, quiet in ((2000.0, True), (50.0, True), (2.0, True), (1.0, False), (0.1, False)):
        gate = RateGate(rate)
        gate.took(0.0, gate.allowance(0.0) or 0)  # the whole first burst
        assert gate.allowance(0.0) == 0 and gate.closed and gate.closures == 1
        assert gate.quiet(0.0) is quiet, rate
        assert not RateGate(rate).quiet(0.0)  # an open gate has nothing to wait for


def test_prefetch_is_a_couple_of_seconds_of_the_cap() -> None:
    assert RateGate(None).consumer_properties() == {}
    assert RateGate(50.0).consumer_properties() == {"queued.min.messages": 100}
    assert RateGate(0.5).consumer_properties() == {"queued.min.messages": 10}


def test_throttle_and_backoff_are_held_apart() -> None:
    book = PauseBook()
    assert book.throttle([0, 1]) == [0, 1]
    assert book.failed([0, 1]) == []  # already paused by the cap
    assert book.unthrottle([0, 1]) == []  # still backing off: stays paused
    assert book.backing_off and not book.throttled
    assert book.recovered([0, 1]) == [0, 1]
    assert book.paused == set()


def test_the_end_of_a_backoff_does_not_lift_the_cap() -> None:
    book = PauseBook()
    assert book.failed([0]) == [0]
    assert book.throttle([0, 1]) == [1]
    assert book.recovered([0, 1]) == []
    assert book.unthrottle([0, 1]) == [0, 1]


def test_partitions_assigned_while_throttled_are_paused_and_resumed_with_the_rest() -> None:
    book = PauseBook()
    book.throttle([0])
    assert book.assigned([1]) == ([1], [])
    assert book.unthrottle([0, 1]) == [0, 1]
    assert book.assigned([2]) == ([], [])  # healthy again: never touched


def test_static_choice_sets_the_instance_and_a_session_for_a_restart() -> None:
    classic = GroupChoice.parse("classic", "range")
    assert "group.instance.id" not in classic.consumer_properties()
    assert classic.consumer_properties()["session.timeout.ms"] == SESSION_TIMEOUT_MS
    static = classic.consumer_properties("ada")
    assert static["group.instance.id"] == "ada"
    assert static["session.timeout.ms"] == STATIC_SESSION_TIMEOUT_MS > SESSION_TIMEOUT_MS
    # KIP-848: librdkafka 2.12+ takes group.instance.id; the session is the broker's
    kip848 = GroupChoice.parse("consumer", None).consumer_properties("ada")
    assert kip848["group.instance.id"] == "ada" and "session.timeout.ms" not in kip848

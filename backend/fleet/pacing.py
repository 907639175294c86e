"""Token-bucket pacing: the simulator's total rate stays exact over time, whatever the loop costs.

Sleeping a fixed 1/rate per message drifts by the cost of each iteration; a bucket refilled
from the monotonic clock does not: tokens accrue at `rate` per second no matter how long
producing took, and a short stall (a full producer queue, a GC pause) is caught up to at most
`burst` messages instead of being lost or released as an unbounded spike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BURST_SECONDS = 0.25  # catch-up allowance after a stall, as a fraction of one second's rate


def burst_for(rate: float) -> float:
    return max(1.0, rate * BURST_SECONDS)


@dataclass
class TokenBucket:
    """`rate` tokens per second; `math.inf` = unlimited; 0 = paused (no tokens accrue)."""

    rate: float
    tokens: float = 0.0
    last: float | None = None

    def __post_init__(self) -> None:
        self.rate = check_rate(self.rate)

    @property
    def unlimited(self) -> bool:
        return math.isinf(self.rate)

    def _refill(self, now: float) -> None:
        if self.last is not None and not self.unlimited and now > self.last:
            self.tokens = min(burst_for(self.rate), self.tokens + (now - self.last) * self.rate)
        self.last = now if self.last is None else max(self.last, now)

    def set_rate(self, rate: float, now: float) -> None:
        """Tokens earned so far are settled at the old rate; no burst carries into the new one."""
        rate = check_rate(rate)
        self._refill(now)
        self.rate = rate
        self.tokens = min(self.tokens, burst_for(rate)) if not self.unlimited else 0.0

    def take(self, now: float, at_most: int) -> int:
        """How many messages may be sent now (whole tokens, at most `at_most`); consumes them."""
        if at_most <= 0:
            return 0
        if self.unlimited:
            return at_most
        self._refill(now)
        n = min(at_most, int(self.tokens))
        self.tokens -= n
        return n

    def wait(self, now: float) -> float:
        """Seconds until the next whole token (inf while paused)."""
        if self.unlimited:
            return 0.0
        self._refill(now)
        if self.tokens >= 1.0:
            return 0.0
        if self.rate <= 0.0:
            return math.inf
        return (1.0 - self.tokens) / self.rate


def check_rate(rate: float) -> float:
    rate = float(rate)
    if math.isnan(rate) or rate < 0:
        raise ValueError(f"rate must be a number >= 0 (or inf for unlimited), got {rate}")
    return rate

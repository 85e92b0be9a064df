"""Backoff for transient failures: exponential, capped, with full jitter.

Full jitter (a uniform draw between zero and the exponential ceiling) spreads retries of many
commands that failed together, so a recovering provider is not hit by a synchronized wave.
A ``Retry-After`` hint from the provider is a floor.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    base_delay: float
    max_delay: float

    def ceiling(self, retries_done: int) -> float:
        # The exponent is capped: 2**1100 is no float (a day of webhook retries can count
        # that high with a small maximum delay), and 2**64 already passes any maximum.
        return float(min(self.max_delay, self.base_delay * (2 ** min(retries_done, 64))))

    def delay(
        self, retries_done: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait before attempt ``retries_done + 2``."""
        drawn = (rng or random).uniform(0.0, self.ceiling(retries_done))
        if retry_after is not None:
            drawn = max(drawn, min(retry_after, self.max_delay))
        return drawn

    def exhausted(self, attempts_done: int) -> bool:
        return attempts_done >= self.max_attempts

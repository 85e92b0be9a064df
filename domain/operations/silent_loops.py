"""When a long-running loop counts as silent (its heartbeats: ``adapters/messaging/heartbeats.py``).

Each loop of the system (a worker node's consumer, beat, a sweep, the failover watch, an API
process's result listener) beats at an interval of its own; it is silent once it said nothing
for longer than the configured silence (``BILLING_LOOP_SILENCE_SECONDS``), or than two of its
intervals when it beats less often than that allows (a sweep run every hour).
"""

from __future__ import annotations

from dataclasses import dataclass


def limit_of(every: float, silence_seconds: float) -> float:
    """How long a loop that beats every ``every`` seconds may be silent."""
    return max(silence_seconds, 2 * every)


@dataclass(frozen=True)
class Silence:
    """How long one loop has said nothing, and how long it may."""

    loop: str
    seconds: float
    limit: float

    @property
    def silent(self) -> bool:
        return self.seconds > self.limit

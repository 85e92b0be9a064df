"""The provider's rate budget: how many calls per second every process together may make.

Stripe limits each account to a number of read and of write operations per second (25 each
in test mode, 100 each in live mode). Every process that calls Stripe with the same account
shares one budget, so that the period-end burst drains at Stripe's pace instead of drowning
in 429s. Calls are of two priorities: *interactive* (a person or a service is waiting for
the answer) and *bulk* (beat's due plan changes); bulk calls are paced strictly and never
take the burst allowance, so an interactive call finds room at once.

Pure: the Redis implementation lives in ``worker/``; this module holds the vocabulary, the
port and the sweep's arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class CallKind(StrEnum):
    """How Stripe counts a request: a ``GET`` reads, everything else writes."""

    READ = "read"
    WRITE = "write"


class Priority(StrEnum):
    INTERACTIVE = "interactive"
    BULK = "bulk"


_priority: ContextVar[Priority] = ContextVar("provider_call_priority", default=Priority.INTERACTIVE)


def current_priority() -> Priority:
    """The priority of provider calls made now (interactive unless a bulk command runs)."""
    return _priority.get()


@contextmanager
def calls_at(priority: Priority) -> Iterator[None]:
    """Make the provider calls inside the block at ``priority``."""
    token = _priority.set(priority)
    try:
        yield
    finally:
        _priority.reset(token)


class RateLimited(Exception):
    """The budget has no token for this call within the caller's longest wait.

    Not a failure: the caller gives its process back and comes again in ``wait_seconds``
    (a task is re-queued with that countdown, without using its retry budget).
    """

    def __init__(self, kind: CallKind, wait_seconds: float) -> None:
        super().__init__(f"stripe {kind.value} budget: next token in {wait_seconds:.2f}s")
        self.kind = kind
        self.wait_seconds = wait_seconds


@dataclass(frozen=True)
class KindUsage:
    """One bucket (reads or writes) as operators see it."""

    configured_rate: float
    effective_rate: float
    calls_last_minute: int
    rate_limited_last_minute: int
    rate_limited_total: int
    waiting: int
    deferred_last_minute: int
    wait_seconds_total: float
    backlog_seconds: float


@dataclass(frozen=True)
class BudgetUsage:
    account: str
    mode: str
    burst: int
    max_wait_seconds: float
    kinds: dict[CallKind, KindUsage]


class RateBudget(Protocol):
    """A rate budget shared by every process that calls the provider with one account."""

    @property
    def enabled(self) -> bool: ...

    def acquire(self, kind: CallKind, priority: Priority) -> float:
        """Take a token for one call, waiting for it when the wait is short; returns the
        seconds waited. Raises :class:`RateLimited` when the token is further away than the
        budget's longest wait."""
        ...

    def rate_limited(self, kind: CallKind, retry_after: float | None) -> None:
        """The provider answered 429 all the same (another system shares the account): slow
        the shared rate down and hold every call until ``retry_after``."""
        ...

    def effective_rate(self, kind: CallKind) -> float:
        """Calls per second the budget allows now (below the configured rate after 429s)."""
        ...

    def usage(self) -> BudgetUsage: ...


def sweep_quota(
    *,
    rate_per_second: float,
    horizon_seconds: float,
    in_flight: int,
    batch_size: int,
    calls_per_change: float = 1.0,
) -> int:
    """How many due changes a sweep may claim: no more than the budget can apply within the
    horizon, less the claimed changes still waiting to be applied. Claiming more would only
    queue work whose lease runs while it waits for tokens."""
    capacity = math.floor(rate_per_second * horizon_seconds / calls_per_change)
    return max(0, min(batch_size, capacity - in_flight))

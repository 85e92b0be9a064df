"""Emulator time and billing-period arithmetic.

Emulator time runs with the wall clock plus an offset that the admin API moves forward, like a
Stripe test clock that is never frozen. It never moves backwards (except on reset), which keeps
``created`` ordering, subscription periods and idempotency expiry consistent.
"""

from __future__ import annotations

import calendar
import time
from datetime import UTC, datetime


class Clock:
    """Wall-clock time shifted by an adjustable, never-negative offset (in seconds)."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def now(self) -> int:
        """Emulator time as a Unix timestamp (what ``created`` fields carry)."""
        return int(time.time() + self.offset)

    def now_float(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> int:
        """Move emulator time forward by ``seconds`` (>= 0) and return the new time."""
        if seconds < 0:
            raise ValueError("the emulator clock only moves forward")
        self.offset += seconds
        return self.now()

    def set(self, timestamp: float) -> int:
        """Jump to ``timestamp`` (must not be in the emulator's past)."""
        current = self.now_float()
        if timestamp < int(current):
            raise ValueError(
                f"cannot move the emulator clock backwards (now {int(current)}, asked "
                f"{int(timestamp)})"
            )
        self.offset += timestamp - current
        return self.now()

    def reset(self) -> None:
        self.offset = 0.0


def add_interval(anchor: int, interval: str, count: int) -> int:
    """``anchor`` plus ``count`` intervals, with Stripe's month-end rule.

    Months and years are counted from the anchor, and a day that does not exist in the target
    month is clamped to the month's last day: an anchor of Jan 31 gives Feb 28 (or 29), Mar 31,
    Apr 30... Computing every boundary from the anchor (not from the previous boundary) is what
    keeps Mar 31 from drifting to Mar 28.
    """
    start = datetime.fromtimestamp(anchor, UTC)
    if interval == "day":
        return anchor + count * 86_400
    if interval == "week":
        return anchor + count * 7 * 86_400
    months = count * (12 if interval == "year" else 1)
    if interval not in ("month", "year"):
        raise ValueError(f"unknown interval {interval!r}")
    month_index = start.month - 1 + months
    year = start.year + month_index // 12
    month = month_index % 12 + 1
    day = min(start.day, calendar.monthrange(year, month)[1])
    moved = start.replace(year=year, month=month, day=day)
    return int(moved.timestamp())

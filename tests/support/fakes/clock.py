"""The clock of the fakes: it moves only when a test moves it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
"""Where every fake clock starts."""


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime = T0) -> None:
        self._now = start

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> None:
        self._now += delta

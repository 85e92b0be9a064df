"""Lags read as durations in the CLI (``subscriptions show``'s LAG) and the console, not as raw
seconds."""

from __future__ import annotations

import pytest

from domain.operations.console import duration


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, ""),
        (0.0, "0.0s"),
        (2.54, "2.5s"),
        (59.9, "59.9s"),
        (60.0, "1m 0s"),
        (303.4, "5m 3s"),
        (3600.0, "1h 0m 0s"),
        (86_437.0, "1d 0h 0m 37s"),
        (31 * 86_400 + 61.0, "31d 0h 1m 1s"),
        (-3600.0, "-1h 0m 0s"),
        (-1.5, "-1.5s"),
    ],
)
def test_a_lag_is_shown_in_days_hours_minutes_and_seconds(
    seconds: float | None, shown: str
) -> None:
    assert duration(seconds) == shown

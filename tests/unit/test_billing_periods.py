"""Billing periods counted as Stripe counts them: every boundary from the subscription's
anchor, a day the month lacks clamped to its last day."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta

import pytest

from domain.subscriptions.billing_periods import add_intervals, period_end_after

JAN_31 = datetime(2027, 1, 31, 9, 30, 15, tzinfo=UTC)


@pytest.mark.parametrize(
    ("interval", "count", "expected"),
    [
        ("day", 3, datetime(2027, 2, 3, 9, 30, 15, tzinfo=UTC)),
        ("week", 2, datetime(2027, 2, 14, 9, 30, 15, tzinfo=UTC)),
        ("month", 1, datetime(2027, 2, 28, 9, 30, 15, tzinfo=UTC)),  # clamped
        ("month", 2, datetime(2027, 3, 31, 9, 30, 15, tzinfo=UTC)),  # from the anchor again
        ("month", 3, datetime(2027, 4, 30, 9, 30, 15, tzinfo=UTC)),
        ("month", 11, datetime(2027, 12, 31, 9, 30, 15, tzinfo=UTC)),  # the year's last month
        ("month", 12, datetime(2028, 1, 31, 9, 30, 15, tzinfo=UTC)),  # into the next year
        ("month", 13, datetime(2028, 2, 29, 9, 30, 15, tzinfo=UTC)),  # a leap year's February
        ("year", 1, datetime(2028, 1, 31, 9, 30, 15, tzinfo=UTC)),
        ("month", 0, JAN_31),
    ],
)
def test_intervals_are_added_to_the_anchor_clamping_a_day_the_month_lacks(
    interval: str, count: int, expected: datetime
) -> None:
    assert add_intervals(JAN_31, interval, count) == expected


def test_a_year_from_a_leap_day_ends_on_the_last_day_of_february() -> None:
    leap_day = datetime(2028, 2, 29, tzinfo=UTC)

    assert add_intervals(leap_day, "year", 1) == datetime(2029, 2, 28, tzinfo=UTC)
    assert add_intervals(leap_day, "year", 4) == datetime(2032, 2, 29, tzinfo=UTC)


def test_an_interval_stripe_does_not_bill_in_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown billing interval 'fortnight'"):
        add_intervals(JAN_31, "fortnight", 1)


def test_a_period_ends_at_the_first_boundary_from_the_anchor_after_its_start() -> None:
    march_start = datetime(2027, 3, 31, 9, 30, 15, tzinfo=UTC)

    assert period_end_after(JAN_31, "month", 1, march_start) == datetime(
        2027, 4, 30, 9, 30, 15, tzinfo=UTC
    )
    assert period_end_after(JAN_31, "month", 1, march_start - timedelta(seconds=1)) == (march_start)
    assert period_end_after(JAN_31, "month", 1, JAN_31) == datetime(
        2027, 2, 28, 9, 30, 15, tzinfo=UTC
    )


@pytest.mark.parametrize(
    ("interval", "count", "start", "expected"),
    [
        (
            "month",
            3,
            datetime(2027, 4, 30, 9, 30, 15, tzinfo=UTC),
            datetime(2027, 7, 31, 9, 30, 15, tzinfo=UTC),
        ),
        (
            "year",
            1,
            datetime(2031, 1, 31, 9, 30, 15, tzinfo=UTC),
            datetime(2032, 1, 31, 9, 30, 15, tzinfo=UTC),
        ),
        (
            "week",
            2,
            datetime(2027, 3, 14, 9, 30, 15, tzinfo=UTC),
            datetime(2027, 3, 28, 9, 30, 15, tzinfo=UTC),
        ),
        (
            "day",
            1,
            datetime(2027, 6, 1, 9, 30, 15, tzinfo=UTC),
            datetime(2027, 6, 2, 9, 30, 15, tzinfo=UTC),
        ),
        (
            "day",
            1,
            datetime(2027, 6, 1, 9, 30, 16, tzinfo=UTC),
            datetime(2027, 6, 2, 9, 30, 15, tzinfo=UTC),
        ),
    ],
)
def test_a_period_many_periods_from_the_anchor_ends_where_counting_from_the_anchor_says(
    interval: str, count: int, start: datetime, expected: datetime
) -> None:
    assert period_end_after(JAN_31, interval, count, start) == expected


def test_every_month_for_ten_years_ends_on_the_anchors_day_or_the_months_last() -> None:
    start = JAN_31
    for _ in range(120):
        end = period_end_after(JAN_31, "month", 1, start)
        assert end.day == calendar.monthrange(end.year, end.month)[1]
        assert (end.year * 12 + end.month) - (start.year * 12 + start.month) == 1
        start = end
    assert start == datetime(2037, 1, 31, 9, 30, 15, tzinfo=UTC)


def test_a_period_starting_before_the_anchor_a_trial_ends_at_the_anchor() -> None:
    assert period_end_after(JAN_31, "month", 1, JAN_31 - timedelta(days=14)) == JAN_31

"""Billing-period arithmetic as Stripe does it, so that we can tell where a period will end
without asking the provider again.

Stripe counts every boundary from the subscription's ``billing_cycle_anchor``: months and years
are added to the anchor, and a day the target month lacks is clamped to its last day. An anchor
of Jan 31 gives Feb 28 (or 29), Mar 31, Apr 30…; counting from the previous boundary instead
would drift to Mar 28.
"""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta

FIXED_INTERVALS = {"day": timedelta(days=1), "week": timedelta(weeks=1)}
MONTHS_IN = {"month": 1, "year": 12}


def add_intervals(anchor: datetime, interval: str, count: int) -> datetime:
    """``anchor`` plus ``count`` intervals (``day``, ``week``, ``month``, ``year``)."""
    if interval in FIXED_INTERVALS:
        return anchor + FIXED_INTERVALS[interval] * count
    if interval not in MONTHS_IN:
        raise ValueError(f"unknown billing interval {interval!r}")
    month_index = anchor.month - 1 + count * MONTHS_IN[interval]
    year, month = anchor.year + month_index // 12, month_index % 12 + 1
    day = min(anchor.day, calendar.monthrange(year, month)[1])
    return anchor.replace(year=year, month=month, day=day)


def period_end_after(
    anchor: datetime, interval: str, interval_count: int, boundary: datetime
) -> datetime:
    """The end of the period that starts at ``boundary``: the first boundary counted from
    ``anchor`` that lies after it."""
    if boundary < anchor:
        return anchor  # a trial: the first paid period starts at the anchor
    # A first guess from the average length, then walk to the exact boundary.
    average = {"day": 1.0, "week": 7.0, "month": 30.436875, "year": 365.2425}[interval]
    periods = max(int((boundary - anchor).total_seconds() / 86_400 / average / interval_count), 0)
    while periods > 0 and add_intervals(anchor, interval, periods * interval_count) > boundary:
        periods -= 1
    end = add_intervals(anchor, interval, periods * interval_count)
    while end <= boundary:
        periods += 1
        end = add_intervals(anchor, interval, periods * interval_count)
    return end

"""The one rounding rule of prorations (Stripe's per-second arithmetic, integer only)."""

from __future__ import annotations


def prorate(amount: int, remaining: int, length: int) -> int:
    """``amount * remaining / length`` rounded to the nearest integer, halves away from 0."""
    if length <= 0 or remaining <= 0:
        return 0
    magnitude = (2 * abs(amount) * remaining + length) // (2 * length)
    return magnitude if amount >= 0 else -magnitude

"""Discounts applied at the provider: a coupon redeemed on a subscription (in Stripe's
dashboard, or by anyone with the key), which changes what the customer pays while the price,
and so our plan, stays the same.

We never apply discounts ourselves, so every discount at the provider is someone else's
decision: the drift report names it with the money it takes (``domain/drift/money_off.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

from domain.billing.currencies import format_amount


@dataclass(frozen=True)
class ProviderDiscount:
    """A discount on a subscription at the provider, with its coupon's terms (``None`` where
    the provider's answer did not carry them)."""

    id: str
    coupon_id: str | None = None
    coupon_name: str | None = None
    percent_off: Decimal | None = None
    amount_off: int | None = None
    """In ``currency``'s minor units."""
    currency: str | None = None
    duration: str | None = None
    """``once`` (the next invoice), ``repeating`` (until ``ends_at``) or ``forever``."""
    ends_at: datetime | None = None

    def taken_from(self, amount: int, currency: str) -> int | None:
        """What it takes off a line of ``amount`` (minor units of ``currency``), as Stripe
        computes it (a percentage rounded half away from zero; an amount off, at most the
        amount, nothing in another currency); ``None`` when its terms are unknown."""
        if self.percent_off is not None:
            share = Decimal(amount) * self.percent_off / 100
            return int(share.to_integral_value(ROUND_HALF_UP))
        if self.amount_off is not None:
            # Stripe refuses a coupon in another currency than the subscription's.
            return min(self.amount_off, max(amount, 0)) if self.currency == currency else 0
        return None

    def shown(self) -> str:
        """``20 % off, forever (coupon SPRING "Spring sale")``."""
        if self.percent_off is not None:
            off = f"{self.percent_off.normalize():f} % off"
        elif self.amount_off is not None and self.currency:
            off = f"{format_amount(self.amount_off, self.currency)} off"
        else:
            off = "an unknown discount"
        lasting = {
            "once": ", on one invoice",
            "forever": ", forever",
            "repeating": f", until {self.ends_at.isoformat()}" if self.ends_at else ", repeating",
        }.get(self.duration or "", "")
        coupon = self.coupon_id or self.id
        named = f' "{self.coupon_name}"' if self.coupon_name else ""
        return f"{off}{lasting} (coupon {coupon}{named})"

"""How the provider bills a plan change: its proration and, for an immediate change, what it
does with an invoice it cannot collect (Stripe's ``proration_behavior`` and
``payment_behavior``, as values of our own)."""

from __future__ import annotations

from typing import Literal

ProrationBehavior = Literal["create_prorations", "always_invoice", "none"]
AT_PERIOD_BOUNDARY: ProrationBehavior = "none"
"""A change at the period's end bills nothing for the period that ended."""
PaymentBehavior = Literal["allow_incomplete", "error_if_incomplete", "pending_if_incomplete"]

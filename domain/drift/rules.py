"""Every drift rule: the customers' (``domain.drift.customers``), then the subscriptions'
(``domain.drift.subscriptions``), then the money of their renewals (``domain.drift.renewals``),
over the values of ``domain.drift.report``.

Pure rules: the handler (``application/handlers/drift/report.py``) reads both sides, every
customer and every subscription at the provider (lists, which see every write at once: Stripe's
search index lags writes by up to a minute) and our accounts, subscriptions, plans and pending
plan changes, and hands them to :func:`find_drift`.

What is *not* drift:

* a customer or subscription without our metadata that no account of ours is linked to is
  still reported (an orphan), but a customer without metadata linked to one of our accounts is
  ours;
* a subscription whose price at the provider is the target of its pending plan change (made at
  the provider ahead of its boundary, or being applied now) is in flight, not mismatched;
* a subscription the provider renewed since we last wrote its row (our period is an earlier
  period of the provider's billing cycle, and a trial that ended since is ``active`` there) is
  behind, as every row is between two plan changes: the handlers read the period from the
  provider before they rely on it.
"""

from __future__ import annotations

from domain.drift.customers import customer_drift
from domain.drift.money_off import money_off_drift
from domain.drift.renewals import renewal_drift
from domain.drift.report import Finding, OurSide, ProviderSide
from domain.drift.subscriptions import subscription_drift


def find_drift(ours: OurSide, theirs: ProviderSide) -> list[Finding]:
    """Every difference, customers first, then subscriptions, then the money of their latest
    renewals (``domain.drift.renewals``), then the discounts Stripe takes and its credit notes
    (``domain.drift.money_off``), each in a stable order."""
    return [
        *customer_drift(ours, theirs),
        *subscription_drift(ours, theirs),
        *renewal_drift(ours, theirs),
        *money_off_drift(ours, theirs),
    ]

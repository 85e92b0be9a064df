"""How an immediate plan change is billed: an upgrade is paid when it is granted.

``BILLING_PRORATION_BEHAVIOR`` (default ``create_prorations``) leaves a change's proration
lines for the next invoice. For a downgrade that is a credit the renewal nets, which is fine.
For an upgrade it would grant the dearer plan at once and bill it only at the renewal: a
customer whose card is declined would use it unpaid for the rest of the period, then go
``past_due``. So a change that costs more now is invoiced at once (``always_invoice``) and sent
with ``payment_behavior=error_if_incomplete``: Stripe makes the change only if that invoice is
paid, else nothing, and the request ends with ``PAYMENT_FAILED``
(``application/handlers/subscriptions/scheduled_changes.py``).
"""

from __future__ import annotations

from domain.subscriptions.plans import Plan
from domain.subscriptions.proration import ProrationBehavior


def charges_at_once(current: Plan | None, target: Plan) -> bool:
    """Whether changing from ``current`` to ``target`` now costs the customer more than it
    credits: a dearer plan on the same interval, or another interval (Stripe restarts the
    cycle and invoices the new period at once, whatever the proration). An unknown current
    plan counts as an upgrade (the safe side: paid, or refused)."""
    if current is None or current.interval != target.interval:
        return True
    return target.amount > current.amount


def immediate_proration(
    configured: ProrationBehavior, current: Plan | None, target: Plan
) -> ProrationBehavior:
    """The proration of an immediate change: ``configured``, except that an upgrade prorated
    for the next invoice (``create_prorations``) is invoiced now (``always_invoice``). ``none``
    stays ``none``: the operator chose to bill nothing for the rest of the period."""
    if configured == "create_prorations" and charges_at_once(current, target):
        return "always_invoice"
    return configured

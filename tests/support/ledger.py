"""Stripe's ledger as the independent checker reads it (``tests/support/checker.py``): the
writes the emulator executed and what it billed for each period, through its admin API's
request log and the real ``stripe`` SDK, never through our tables."""

from __future__ import annotations

import stripe  # noqa: TID251 - the checker reads the emulator's invoices through the SDK

from stripe_emulator import EmulatorAdmin
from stripe_emulator.client import LoggedRequest
from tests.support.checker import BilledPeriod, Effect
from tests.support.invoices import invoices_of, pending_items


def executed(request: LoggedRequest) -> bool:
    """Stripe acted on it: answered 200, or hit by a fault only after it acted (the answer
    lost); an idempotent replay is the first execution's answer, not a second one."""
    return not request.replayed and (request.status == 200 or "(after)" in (request.fault or ""))


def executed_effects(emulator: EmulatorAdmin) -> list[Effect]:
    """One effect per write executed: ``("customer", org_id)`` for each customer made (by
    the organization in its metadata), ``("subscription_write", key)`` for each update of a
    subscription (by its idempotency key: a change's ``{change_id}:apply`` and the like)."""
    effects: list[Effect] = []
    for request in emulator.requests(method="POST"):
        if not executed(request):
            continue
        if request.path == "/v1/customers":
            org_id = request.form.get("metadata", {}).get("org_id")
            effects.append(("customer", str(org_id)))
        elif request.path.startswith("/v1/subscriptions/") and request.path.count("/") == 3:
            effects.append(("subscription_write", request.idempotency_key or request.request_id))
    return effects


def billed_periods(sdk: stripe.StripeClient, subscription_id: str) -> list[BilledPeriod]:
    """Each period the subscription was billed for (a line that is not a proration opens
    one) with its net: every line of its invoices (void ones aside) starting within it, and
    the prorations Stripe holds for the next invoice (a change made with
    ``create_prorations``, a downgrade: billed, not invoiced yet). The customer's pending
    items are the subscription's: one subscription per customer."""
    invoices = [
        invoice for invoice in invoices_of(sdk, subscription_id) if invoice.status != "void"
    ]
    lines = [line for invoice in invoices for line in invoice.lines]
    customer = sdk.v1.subscriptions.retrieve(subscription_id).customer
    customer_id = customer if isinstance(customer, str) else str(customer.id)
    lines += [line for line in pending_items(sdk, customer_id) if line.proration]
    spans = sorted({(line.start, line.end) for line in lines if not line.proration})
    return [
        BilledPeriod(
            subscription_id,
            start,
            end,
            sum(line.amount for line in lines if start <= line.start < end),
        )
        for start, end in spans
    ]

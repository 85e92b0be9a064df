"""Immediate plan changes mid-period, judged on what the customer is invoiced (the emulator's
invoices and pending invoice items, read through the real ``stripe`` SDK) and on what we record
and announce, on SQLite and PostgreSQL, with default settings (``create_prorations``).

* a change takes effect when it is made, not at the period's start;
* an upgrade is paid when it is granted, or refused (``PAYMENT_FAILED``); a downgrade is
  credited on the next invoice;
* a change prorates as of an earlier time only as a recent preview of that very change
  answered it: back-dating earns no credit.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import stripe  # noqa: TID251 - the tests read the emulator's invoices through the SDK

from adapters.db.timelines import phases_of
from domain.subscriptions.change_previews import PREVIEW_VALIDITY
from domain.subscriptions.change_states import ChangeState
from domain.subscriptions.plans import Plan
from domain.subscriptions.subscription import SubscriptionTerms
from stripe_emulator import EmulatorAdmin
from tests.e2e.test_period_end_billing import move_to, subscribe
from tests.support.errors import field_violations
from tests.support.events import outbox_rows
from tests.support.invoices import invoices_of, pending_items
from tests.support.stack import Stack
from tests.support.stack import cli_output as cli
from tests.support.subscriptions import (
    DAY,
    Catalog,
    Subscribed,
    changes_of,
    new_plan,
    stored_subscription,
    three_plans,
)
from worker.bootstrap import Services

pytestmark = pytest.mark.e2e

AUTOMATIC = SubscriptionTerms(collection_method="charge_automatically")


@pytest.fixture(scope="module")
def catalog(ctx: Services) -> Catalog:
    return three_plans(ctx)


def change_now(
    api: httpx.Client, sub: Subscribed, plan: Plan, proration_date: str | None = None
) -> httpx.Response:
    body: dict[str, Any] = {"plan": plan.name, "immediate": True}
    if proration_date is not None:
        body["proration_date"] = proration_date
    return api.post(sub.change_url, json={"plan_change": body})


def preview(api: httpx.Client, sub: Subscribed, plan: Plan) -> dict[str, Any]:
    response = api.post(f"{sub.change_url}/preview", json={"plan": plan.name})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def stack_now(stack: Stack) -> datetime:
    with stack.stripe as admin:
        return datetime.fromtimestamp(admin.now(), UTC)


def customer_of(sdk: stripe.StripeClient, sub: Subscribed) -> str:
    return str(sdk.v1.subscriptions.retrieve(sub.provider_id).customer)


def item_price(sdk: stripe.StripeClient, sub: Subscribed) -> str:
    return str(sdk.v1.subscriptions.retrieve(sub.provider_id)["items"].data[0].price.id)


def whole_second(moment: datetime) -> datetime:
    """``moment`` as Stripe's integer timestamps hold it."""
    return datetime.fromtimestamp(int(moment.timestamp()), UTC)


def reasons(body: dict[str, Any]) -> set[str]:
    return {detail["reason"] for detail in body["details"] if "reason" in detail}


# --- when it takes effect, and paid when granted ---------------------------------------------


def test_an_upgrade_on_day_ten_takes_effect_when_made_and_is_invoiced_and_paid_from_then(
    stack: Stack, api: httpx.Client, ctx: Services, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    sub = subscribe(ctx, catalog.starter, AUTOMATIC)
    period_start = stored_subscription(stack, sub.id).current_period_start
    stack.advance_time(10 * DAY)
    invoiced_before = len(invoices_of(sdk, sub.provider_id))
    asked_at = stack_now(stack)

    response = change_now(api, sub, catalog.team)

    answered_at = stack_now(stack) + timedelta(seconds=1)  # the emulator's clock has seconds
    assert response.status_code == 200, response.text
    effective_at = datetime.fromisoformat(response.json()["phase"]["effective_at"])
    assert asked_at <= effective_at <= answered_at  # when it was made, not the period's start
    assert effective_at - period_start >= timedelta(days=10)
    [made] = changes_of(stack, sub.id)
    assert (made.state, made.effective_at) == (ChangeState.APPLIED, effective_at)
    assert made.apply_lag_seconds is not None
    assert made.apply_lag_seconds <= (answered_at - asked_at).total_seconds()
    [announced] = [
        row.document
        for row in outbox_rows(stack.sessions, f"subscription:{sub.id}")
        if row.type == "subscription.plan_changed"
    ]
    assert datetime.fromisoformat(announced["data"]["effective_at"]) == effective_at
    now_on = stored_subscription(stack, sub.id)
    assert now_on.current_period_start == period_start  # the period goes on
    phases = [(p.source, p.plan_id, p.effective_at) for p in phases_of(now_on, [made])]
    assert ("applied", catalog.team.id, effective_at) in phases
    assert ("current", catalog.team.id, effective_at) in phases  # on team since it was made

    # Paid when granted: the upgrade's prorations are invoiced at once and charged, from the
    # very time the change is recorded as effective.
    [invoice] = invoices_of(sdk, sub.provider_id)[invoiced_before:]
    assert (invoice.billing_reason, invoice.status) == ("subscription_update", "paid")
    assert invoice.total > 0
    assert all(line.proration for line in invoice.lines)
    assert {line.start for line in invoice.lines} == {whole_second(effective_at)}
    assert pending_items(sdk, customer_of(sdk, sub)) == []


def test_an_upgrade_on_a_declined_card_is_refused_and_grants_and_invoices_nothing(
    stack: Stack,
    api: httpx.Client,
    ctx: Services,
    catalog: Catalog,
    sdk: stripe.StripeClient,
    emulator: EmulatorAdmin,
) -> None:
    sub = subscribe(ctx, catalog.team, AUTOMATIC)
    customer = customer_of(sdk, sub)
    stack.advance_time(5 * DAY)
    emulator.fail_payments(customer)
    invoiced_before = invoices_of(sdk, sub.provider_id)

    refused = change_now(api, sub, catalog.scale)

    assert refused.status_code == 400, refused.text
    assert "PAYMENT_FAILED" in reasons(refused.json())
    assert item_price(sdk, sub) == catalog.team.provider_price_id
    assert stored_subscription(stack, sub.id).plan_id == catalog.team.id
    assert invoices_of(sdk, sub.provider_id) == invoiced_before  # no invoice left open
    assert pending_items(sdk, customer) == []
    [skipped] = changes_of(stack, sub.id)
    assert skipped.state is ChangeState.SKIPPED

    # A downgrade costs nothing now: it is granted on the same card, credited next invoice.
    downgraded = change_now(api, sub, catalog.starter)

    assert downgraded.status_code == 200, downgraded.text
    assert item_price(sdk, sub) == catalog.starter.provider_price_id
    assert stored_subscription(stack, sub.id).state.value == "active"
    credit = pending_items(sdk, customer)
    assert [line.proration for line in credit] == [True, True]  # unused team, remaining starter
    assert sum(line.amount for line in credit) < 0
    assert invoices_of(sdk, sub.provider_id) == invoiced_before


def test_an_upgrade_below_the_minimum_charge_is_granted_on_a_declined_card_and_billed_next_invoice(
    stack: Stack,
    api: httpx.Client,
    ctx: Services,
    catalog: Catalog,
    sdk: stripe.StripeClient,
    emulator: EmulatorAdmin,
) -> None:
    """Stripe charges no amount below its minimum (0.50 USD): the invoice is paid with nothing
    due, the amount carried to the customer's balance. The preview says so, the change is made
    although the card would decline, and the renewal bills the carried amount."""
    a_little_dearer = new_plan(ctx, "starter-plus", catalog.starter.amount + 40)
    sub = subscribe(ctx, catalog.starter, AUTOMATIC)
    customer = customer_of(sdk, sub)
    period_end = stored_subscription(stack, sub.id).current_period_end
    move_to(stack, period_end - timedelta(days=10))  # a third of 0.40 USD left: about 0.13
    emulator.fail_payments(customer)
    invoiced_before = len(invoices_of(sdk, sub.provider_id))

    previewed = preview(api, sub, a_little_dearer)
    changed = change_now(api, sub, a_little_dearer, previewed["proration_date"])

    assert changed.status_code == 200, changed.text
    carried = previewed["amount_due"]
    assert 0 < carried < 50
    assert (previewed["billed"], previewed["charged_now"]) == ("now", 0)
    assert previewed["carried_to_balance"] == carried
    assert item_price(sdk, sub) == a_little_dearer.provider_price_id
    [made] = changes_of(stack, sub.id)
    assert made.state is ChangeState.APPLIED
    [small] = invoices_of(sdk, sub.provider_id)[invoiced_before:]
    assert (small.status, small.total, small.amount_paid) == ("paid", carried, 0)
    assert sdk.v1.customers.retrieve(customer).balance == carried

    emulator.succeed_payments(customer)
    move_to(stack, period_end + timedelta(hours=2))  # past the renewal's hour as a draft

    renewal = invoices_of(sdk, sub.provider_id)[-1]
    assert renewal.billing_reason == "subscription_cycle"
    assert (renewal.starting_balance, renewal.status) == (carried, "paid")
    assert renewal.amount_paid == a_little_dearer.amount + carried

    # What an operator reads (`accounts show`, the console): why the invoice due was 0.
    story = json.loads(cli(stack, "accounts", "show", sub.org_id, "--json"))
    [shown] = story["subscriptions"]
    by_id = {invoice["id"]: invoice for invoice in shown["invoices"]}
    assert by_id[small.id]["total"] == carried
    assert (by_id[small.id]["amount_due"], by_id[small.id]["ending_balance"]) == (0, carried)
    assert by_id[renewal.id]["starting_balance"] == carried


# --- the proration date ------------------------------------------------------------------------


def test_a_downgrade_back_dated_to_the_period_start_is_refused_and_earns_no_credit(
    stack: Stack, api: httpx.Client, ctx: Services, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    sub = subscribe(ctx, catalog.team)
    customer = customer_of(sdk, sub)
    stored = stored_subscription(stack, sub.id)
    stack.advance_time(20 * DAY)

    back_dated = change_now(api, sub, catalog.starter, stored.current_period_start.isoformat())

    assert back_dated.status_code == 400, back_dated.text
    assert "plan_change.proration_date" in field_violations(back_dated.json())
    assert item_price(sdk, sub) == catalog.team.provider_price_id
    assert pending_items(sdk, customer) == []

    # The same downgrade as a preview just answered it is credited what the preview showed:
    # the time left in the period at the price difference, not the whole period's.
    previewed = preview(api, sub, catalog.starter)
    made = change_now(api, sub, catalog.starter, previewed["proration_date"])

    assert made.status_code == 200, made.text
    credit = pending_items(sdk, customer)
    assert sorted(line.amount for line in credit) == sorted(
        line["amount"] for line in previewed["lines"] if line["proration"]
    )
    proration_date = datetime.fromisoformat(previewed["proration_date"])
    left = (stored.current_period_end - proration_date) / (
        stored.current_period_end - stored.current_period_start
    )
    assert left < 0.4
    assert abs(sum(line.amount for line in credit) - round(-2000 * left)) <= 2
    [applied] = changes_of(stack, sub.id)
    assert applied.effective_at == proration_date


def test_a_proration_date_from_another_change_or_an_expired_preview_is_refused(
    stack: Stack, api: httpx.Client, ctx: Services, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    sub = subscribe(ctx, catalog.team)
    customer = customer_of(sdk, sub)
    stack.advance_time(3 * DAY)

    of_another_plan = preview(api, sub, catalog.scale)
    other = change_now(api, sub, catalog.starter, of_another_plan["proration_date"])
    of_this_plan = preview(api, sub, catalog.starter)
    stack.advance_time((PREVIEW_VALIDITY + timedelta(minutes=1)).total_seconds())
    expired = change_now(api, sub, catalog.starter, of_this_plan["proration_date"])

    for refused in (other, expired):
        assert refused.status_code == 400, refused.text
        assert "plan_change.proration_date" in field_violations(refused.json())
    assert "expired" in expired.json()["message"]
    assert item_price(sdk, sub) == catalog.team.provider_price_id
    assert pending_items(sdk, customer) == []
    assert changes_of(stack, sub.id) == []

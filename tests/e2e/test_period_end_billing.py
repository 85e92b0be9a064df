"""The invoice is the product: plan changes end to end, judged on the invoices the Stripe
emulator makes (HTTP → Redis → worker and beat processes → the database → the emulator, read
back through the real ``stripe`` SDK), on SQLite and PostgreSQL.

Stripe bills a licensed price in advance, at the instant it renews; these tests move the
application's clock and the emulator's together around that instant and read what was invoiced
for the new period.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import stripe  # noqa: TID251 - the tests read the emulator's invoices through the SDK

from adapters.clock import REFRESH_SECONDS, ShiftableClock
from adapters.db.models import RenewalCheckRow
from adapters.db.uow import SqlUnitOfWork
from adapters.provider.stripe_adapter import StripeBillingProvider
from application.handlers.provider.reconcile import reconcile_with_stripe
from application.handlers.subscriptions.subscribe import create_subscription
from application.requests.operator_requests import CreateSubscription
from application.requests.sweeps import ReconcileWithStripe
from domain.subscriptions.change_states import ChangeState
from domain.subscriptions.plans import Plan
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import SubscriptionState, SubscriptionTerms
from stripe_emulator import EmulatorAdmin
from tests.support.emulator import EMULATOR_KEY
from tests.support.events import outbox_rows
from tests.support.invoices import Invoice, invoices_of, pay_open_invoices
from tests.support.records import services_on
from tests.support.stack import Stack, eventually, stack_of_its_own
from tests.support.subscriptions import (
    Subscribed,
    changes_of,
    new_account,
    new_plan,
    provider_updates,
    stored_change,
    stored_subscription,
)
from worker.bootstrap import Services

pytestmark = pytest.mark.e2e

BILLING_REDIS_DB = 13
"""Redis databases 13 (SQLite) and 14 (PostgreSQL); see ``tests/e2e/test_webhooks.py``."""
LEAD = timedelta(hours=1)
"""``BILLING_PERIOD_END_LEAD_SECONDS``'s default, which these stacks keep."""
BEFORE_THE_LEAD = LEAD + timedelta(minutes=30)
WITHIN_THE_LEAD = LEAD - timedelta(minutes=30)


@pytest.fixture(scope="module")
def stack(
    backend: str, workdir: Path, redis_server: str, make_database: Callable[[str], str]
) -> Iterator[Stack]:
    """A stack of its own (its clock is moved by whole periods): an emulator, a worker,
    beat and the API, with immediate changes invoiced at once (``always_invoice``)."""
    name = f"billing_{backend}"
    redis_url = f"{redis_server}/{BILLING_REDIS_DB + (backend == 'postgresql')}"
    with stack_of_its_own(
        name,
        workdir,
        make_database(name),
        redis_url,
        BILLING_PRORATION_BEHAVIOR="always_invoice",
    ) as system:
        WORKERS[name] = system.start_worker()
        system.start_beat()
        system.start_api()
        system.client = system.new_client()
        yield system


WORKERS: dict[str, subprocess.Popen[bytes]] = {}
"""Each stack's worker process, which a test stops and starts again."""


@dataclass(frozen=True)
class Catalog:
    starter: Plan
    team: Plan
    team_annual: Plan


@pytest.fixture(scope="module")
def catalog(ctx: Services) -> Catalog:
    return Catalog(
        starter=new_plan(ctx, "starter", 900),
        team=new_plan(ctx, "team", 2900),
        team_annual=new_plan(ctx, "team-annual", 29000, "year"),
    )


def subscribe(ctx: Services, plan: Plan, terms: SubscriptionTerms | None = None) -> Subscribed:
    account = new_account(ctx)
    subscription = create_subscription(
        CreateSubscription(
            org_id=account.org_id,
            billing_account_id=account.id,
            plan_ref=plan.name,
            terms=terms or SubscriptionTerms(),
        ),
        ctx,
    )
    return Subscribed(account.org_id, account.id, subscription.id, subscription.provider_id)


@pytest.fixture
def sub(ctx: Services, catalog: Catalog, sdk: stripe.StripeClient) -> Subscribed:
    """A starter subscription whose customer has paid what it was sent."""
    subscribed = subscribe(ctx, catalog.starter)
    pay_open_invoices(sdk, subscribed.provider_id)
    return subscribed


def at_period_end(stack: Stack, api: httpx.Client, sub: Subscribed, plan: Plan) -> ScheduledChange:
    response = api.post(sub.change_url, json={"plan_change": {"plan": plan.name}})
    assert response.status_code == 200, response.text
    [change] = [c for c in changes_of(stack, sub.id) if c.state.is_pending]
    return change


def staged(stack: Stack, api: httpx.Client, sub: Subscribed, plan: Plan) -> ScheduledChange:
    """A change to ``plan`` at the period's end, staged at Stripe half an hour before it."""
    change = at_period_end(stack, api, sub, plan)
    move_to(stack, change.effective_at - WITHIN_THE_LEAD)
    return wait_for(stack, change, ChangeState.STAGED)


def move_to(stack: Stack, moment: datetime) -> None:
    """Move both clocks forward to ``moment`` (in one step)."""
    seconds = (moment - stack_now(stack)).total_seconds()
    assert seconds > 0, "the clocks only move forward"
    stack.advance_time(seconds)


def jump_over(stack: Stack, moment: datetime) -> None:
    """Move both clocks forward to ``moment``, Stripe's first: Stripe renews at the boundary
    it passes before any sweep of ours can see the change due. (Ours first, a sweep in between
    would make the change at a Stripe that has not renewed yet: staged, then renewed at the
    new price, the on-time path rather than the jump.)"""
    seconds = (moment - stack_now(stack)).total_seconds()
    assert seconds > 0, "the clocks only move forward"
    with stack.stripe as emulator:
        emulator.advance_clock(seconds)
    ShiftableClock(stack.redis_url).advance(seconds)


def stack_now(stack: Stack) -> datetime:
    with stack.stripe as admin:
        return datetime.fromtimestamp(admin.now(), UTC)


def wait_for(stack: Stack, change: ScheduledChange, state: ChangeState) -> ScheduledChange:
    def reached() -> ScheduledChange | None:
        found = stored_change(stack, change.id)
        return found if found.state is state else None

    return eventually(reached, timeout=20, what=f"change {change.id} to be {state.value}")


def invoices(sdk: stripe.StripeClient, sub: Subscribed) -> list[Invoice]:
    """The subscription's invoices, oldest first."""
    return invoices_of(sdk, sub.provider_id)


def billed_from(sdk: stripe.StripeClient, sub: Subscribed, start: datetime) -> list[Invoice]:
    """The invoices with a line for time from ``start`` on (the new period's)."""
    return [
        invoice for invoice in invoices(sdk, sub) if any(line.end > start for line in invoice.lines)
    ]


# --- at the boundary --------------------------------------------------------------------------


def test_a_change_made_ahead_of_the_boundary_is_on_the_renewal_invoice_at_the_new_price(
    stack: Stack, api: httpx.Client, sub: Subscribed, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    asked = api.post(sub.change_url, json={"plan_change": {"plan": catalog.team.name}})
    assert asked.status_code == 200, asked.text
    [change] = [c for c in changes_of(stack, sub.id) if c.state.is_pending]
    boundary = change.effective_at

    move_to(stack, boundary - BEFORE_THE_LEAD)
    assert stored_change(stack, change.id).state is ChangeState.SCHEDULED
    move_to(stack, boundary - WITHIN_THE_LEAD)
    staged = wait_for(stack, change, ChangeState.STAGED)
    assert stored_subscription(stack, sub.id).plan_id == catalog.starter.id  # until the end

    move_to(stack, boundary + timedelta(seconds=1))
    applied = wait_for(stack, change, ChangeState.APPLIED)

    [renewal] = billed_from(sdk, sub, boundary)
    assert renewal.billing_reason == "subscription_cycle"
    assert [(line.amount, line.proration, line.price) for line in renewal.lines] == [
        (2900, False, catalog.team.provider_price_id)
    ]
    assert renewal.lines[0].start == boundary
    now = stored_subscription(stack, sub.id)
    assert now.plan_id == catalog.team.id
    item = sdk.v1.subscriptions.retrieve(sub.provider_id)["items"].data[0]
    assert (now.current_period_start, now.current_period_end) == (
        datetime.fromtimestamp(item.current_period_start, UTC),
        datetime.fromtimestamp(item.current_period_end, UTC),
    )
    assert staged.staged_period_end == now.current_period_end
    assert applied.apply_lag_seconds is not None
    assert applied.apply_lag_seconds < 30  # a sweep or two after the boundary
    # The caller's command keeps its result for a publisher waiting on it; the sweep's own
    # (staged long before the boundary) keeps none: nobody waits on it.
    results = redis.Redis.from_url(stack.redis_url)
    assert results.exists(f"celery-task-meta-{asked.headers['Command-Id']}")
    assert not results.exists(f"celery-task-meta-apply:{change.id}:1")


def test_a_clock_jumping_over_the_boundary_bills_the_new_price_net_with_the_correction_at_once(
    stack: Stack, api: httpx.Client, sub: Subscribed, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    change = at_period_end(stack, api, sub, catalog.team)
    boundary = change.effective_at

    jump_over(stack, boundary + timedelta(hours=2))  # beat never saw the lead time
    applied = wait_for(stack, change, ChangeState.APPLIED)

    renewal, correction = billed_from(sdk, sub, boundary)
    assert renewal.billing_reason == "subscription_cycle"
    assert renewal.total == 900  # Stripe renewed at the old price…
    assert correction.billing_reason == "subscription_update"
    assert correction.status != "draft"  # …and the correction is invoiced now, not deferred
    assert all(line.proration for line in correction.lines)
    assert sorted(line.amount for line in correction.lines) == [-900, 2900]
    assert all(line.start == boundary for line in correction.lines)
    assert renewal.total + correction.total == 2900  # the new period costs team's price net
    assert applied.apply_lag_seconds is not None
    assert applied.apply_lag_seconds >= 7200


def test_workers_stopped_across_the_boundary_correct_it_once_started_and_show_the_lag(
    stack: Stack, api: httpx.Client, sub: Subscribed, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    change = at_period_end(stack, api, sub, catalog.team)
    boundary = change.effective_at
    worker = WORKERS[stack.name]
    os.killpg(worker.pid, signal.SIGTERM)
    worker.wait(30)
    try:
        move_to(stack, boundary - WITHIN_THE_LEAD)
        move_to(stack, boundary + timedelta(minutes=10))
        assert stored_change(stack, change.id).state is not ChangeState.APPLIED
    finally:
        WORKERS[stack.name] = stack.start_worker(f"w{len(WORKERS)}-again")

    applied = wait_for(stack, change, ChangeState.APPLIED)

    invoiced = billed_from(sdk, sub, boundary)
    assert sum(invoice.total for invoice in invoiced) == 2900
    assert stored_subscription(stack, sub.id).plan_id == catalog.team.id
    assert applied.apply_lag_seconds is not None
    assert applied.apply_lag_seconds >= 600


def test_a_month_to_year_change_bills_one_year_and_no_month(
    stack: Stack, api: httpx.Client, sub: Subscribed, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    change = at_period_end(stack, api, sub, catalog.team_annual)
    boundary = change.effective_at
    before = len(invoices(sdk, sub))

    move_to(stack, boundary - WITHIN_THE_LEAD)
    applied = wait_for(stack, change, ChangeState.APPLIED)
    move_to(stack, boundary + timedelta(days=2))

    new = invoices(sdk, sub)[before:]
    [year] = new
    [full] = [line for line in year.lines if not line.proration]
    assert (full.amount, full.price) == (29000, catalog.team_annual.provider_price_id)
    assert full.end - full.start >= timedelta(days=365)
    credits = [line.amount for line in year.lines if line.proration]
    assert all(amount <= 0 for amount in credits)  # the unused rest of the month
    assert stored_subscription(stack, sub.id).plan_id == catalog.team_annual.id
    assert applied.effective_at <= boundary


def test_a_trial_extended_at_stripe_moves_the_change_and_stripe_gets_no_update_before_it(
    stack: Stack,
    api: httpx.Client,
    ctx: Services,
    catalog: Catalog,
    sdk: stripe.StripeClient,
    emulator: EmulatorAdmin,
) -> None:
    sub = subscribe(ctx, catalog.starter, SubscriptionTerms(trial_days=14))
    change = at_period_end(stack, api, sub, catalog.team)
    old_end = change.effective_at
    new_end = old_end + timedelta(days=7)
    sdk.v1.subscriptions.update(
        sub.provider_id,
        params={"trial_end": int(new_end.timestamp()), "proration_behavior": "none"},
    )

    move_to(stack, old_end - WITHIN_THE_LEAD)
    eventually(
        lambda: stored_change(stack, change.id).effective_at == new_end or None,
        timeout=20,
        what="the change to follow the new trial end",
    )
    move_to(stack, old_end + timedelta(minutes=1))

    moved = stored_change(stack, change.id)
    assert (moved.state, moved.effective_at) == (ChangeState.SCHEDULED, new_end)
    assert provider_updates(emulator, sub.provider_id) == [] or all(
        "items" not in update.form for update in provider_updates(emulator, sub.provider_id)
    )
    assert scheduled_events(stack, sub.id)[-1]["data"][
        "effective_at"
    ] == new_end.isoformat().replace("+00:00", "Z")

    move_to(stack, new_end - WITHIN_THE_LEAD)
    wait_for(stack, change, ChangeState.STAGED)
    move_to(stack, new_end + timedelta(minutes=1))
    wait_for(stack, change, ChangeState.APPLIED)
    [first_paid] = billed_from(sdk, sub, new_end)
    assert [line.amount for line in first_paid.lines] == [2900]


def scheduled_events(stack: Stack, subscription_id: str) -> list[dict[str, Any]]:
    rows = outbox_rows(stack.sessions, f"subscription:{subscription_id}")
    return [row.document for row in rows if row.type == "subscription.plan_change.scheduled"]


# --- what Stripe holds decides ----------------------------------------------------------------


def test_a_declined_immediate_upgrade_makes_nothing_and_the_answer_says_so(
    stack: Stack,
    api: httpx.Client,
    ctx: Services,
    catalog: Catalog,
    sdk: stripe.StripeClient,
    emulator: EmulatorAdmin,
) -> None:
    sub = subscribe(
        ctx, catalog.starter, SubscriptionTerms(collection_method="charge_automatically")
    )
    customer = str(sdk.v1.subscriptions.retrieve(sub.provider_id).customer)
    emulator.fail_payments(customer)

    response = api.post(
        sub.change_url, json={"plan_change": {"plan": catalog.team.name, "immediate": True}}
    )

    assert response.status_code == 400, response.text
    body = response.json()
    assert "declined" in body["message"]
    assert any(detail.get("reason") == "PAYMENT_FAILED" for detail in body["details"])
    item = sdk.v1.subscriptions.retrieve(sub.provider_id)["items"].data[0]
    stored = stored_subscription(stack, sub.id)
    assert item.price.id == catalog.starter.provider_price_id  # Stripe and we agree
    assert stored.plan_id == catalog.starter.id


def test_a_subscription_stored_past_due_and_active_at_stripe_accepts_a_change(
    stack: Stack, api: httpx.Client, sub: Subscribed, catalog: Catalog
) -> None:
    with SqlUnitOfWork(stack.sessions) as uow:
        stale = uow.subscriptions.get(sub.id, for_update=True)
        assert stale is not None
        stale.state = SubscriptionState.PAST_DUE
        uow.subscriptions.save(stale)
        uow.commit()

    response = api.post(sub.change_url, json={"plan_change": {"plan": catalog.team.name}})

    assert response.status_code == 200, response.text
    assert stored_subscription(stack, sub.id).state is SubscriptionState.ACTIVE


def test_a_preview_racing_the_period_s_roll_is_a_409_to_ask_again_not_a_400_blaming_the_plan(
    stack: Stack, api: httpx.Client, sub: Subscribed, catalog: Catalog
) -> None:
    period_end = stored_subscription(stack, sub.id).current_period_end
    move_to(stack, period_end - timedelta(seconds=30))
    # Our clock passes the period's end while Stripe's has not renewed the subscription yet.
    ShiftableClock(stack.redis_url).advance(60)
    time.sleep(REFRESH_SECONDS + 0.1)  # every process has read the new offset
    try:
        racing = api.post(f"{sub.change_url}/preview", json={"plan": catalog.team.name})
    finally:
        with stack.stripe as emulator:  # Stripe renews it: the clocks agree again
            emulator.advance_clock(60)
    again = api.post(f"{sub.change_url}/preview", json={"plan": catalog.team.name})

    assert racing.status_code == 409, racing.text
    error = racing.json()
    assert error["code"] == 10  # ABORTED
    assert error["details"][0]["reason"] == "BILLING_PERIOD_ROLLING_OVER"
    assert "plan" not in json.dumps(error["details"])
    assert again.status_code == 200, again.text
    assert datetime.fromisoformat(again.json()["proration_date"]) > period_end


def preview_then_change_now(
    api: httpx.Client, sub: Subscribed, plan: Plan, sdk: stripe.StripeClient
) -> tuple[dict[str, Any], Invoice]:
    """A preview of a change to ``plan`` now, then that change at the preview's time: what
    the preview answered, and the one invoice the change made."""
    before = len(invoices(sdk, sub))
    preview = api.post(f"{sub.change_url}/preview", json={"plan": plan.name})
    assert preview.status_code == 200, preview.text
    previewed: dict[str, Any] = preview.json()
    response = api.post(
        sub.change_url,
        json={
            "plan_change": {
                "plan": plan.name,
                "immediate": True,
                "proration_date": previewed["proration_date"],
            }
        },
    )
    assert response.status_code == 200, response.text
    [invoice] = invoices(sdk, sub)[before:]
    return previewed, invoice


def test_a_preview_and_the_change_made_right_after_invoice_the_same_amounts_to_the_cent(
    stack: Stack, api: httpx.Client, sub: Subscribed, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    stack.advance_time(timedelta(days=9, hours=7, seconds=13).total_seconds())

    previewed, invoice = preview_then_change_now(api, sub, catalog.team, sdk)

    assert invoice.billing_reason == "subscription_update"
    assert sorted(line.amount for line in invoice.lines) == sorted(
        line["amount"] for line in previewed["lines"]
    )
    assert invoice.total == previewed["total"]
    assert previewed["billed"] == "now"
    assert previewed["currency"] == "usd"
    assert {line["amount"] for line in previewed["lines"]} & {-900, 2900} == set()  # prorated


def test_a_preview_of_a_subscription_discounted_at_stripe_invoices_what_the_change_makes(
    stack: Stack, api: httpx.Client, sub: Subscribed, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    coupon = sdk.v1.coupons.create(params={"percent_off": 25, "duration": "forever"})
    sdk.v1.subscriptions.update(  # someone, in Stripe's dashboard
        sub.provider_id, params={"discounts": [{"coupon": str(coupon.id)}]}
    )
    stack.advance_time(timedelta(days=4, hours=3, seconds=7).total_seconds())

    previewed, invoice = preview_then_change_now(api, sub, catalog.team, sdk)

    billed = sorted((line.amount, line.discount) for line in invoice.lines)
    assert billed == sorted((line["amount"], line["discount"]) for line in previewed["lines"])
    # The new plan's time takes a quarter off (itemized: the amount gross, its discount
    # beside it); the credit gives back what was charged for the old plan's, before the coupon.
    [(credit, credit_discount), (debit, debit_discount)] = billed
    assert (credit < 0, credit_discount) == (True, 0)
    assert abs(4 * debit_discount - debit) <= 2, billed
    assert previewed["total_discount"] == sum(discount for _, discount in billed) > 0
    assert (
        invoice.total == previewed["total"] == previewed["subtotal"] - previewed["total_discount"]
    )
    assert previewed["amount_due"] == invoice.total + invoice.starting_balance


def test_a_schedule_made_at_stripe_refuses_changes_and_its_pending_change_is_skipped_unsent(
    stack: Stack, api: httpx.Client, sub: Subscribed, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    change = at_period_end(stack, api, sub, catalog.team)
    schedule = sdk.v1.subscription_schedules.create(  # someone, in Stripe's dashboard
        params={"from_subscription": sub.provider_id}
    )

    # A request at the period's end reads Stripe first, and so sees the schedule at once.
    refused = api.post(sub.change_url, json={"plan_change": {"plan": catalog.team.name}})
    move_to(stack, change.effective_at - WITHIN_THE_LEAD)
    skipped = wait_for(stack, change, ChangeState.SKIPPED)

    assert refused.status_code == 400, refused.text
    [detail] = refused.json()["details"]
    assert (detail["reason"], detail["metadata"]["schedule_id"]) == (
        "SUBSCRIPTION_SCHEDULED_AT_PROVIDER",
        schedule.id,
    )
    assert skipped.reason == "provider_schedule"
    assert stored_subscription(stack, sub.id).provider_schedule_id == schedule.id
    at_stripe = sdk.v1.subscriptions.retrieve(sub.provider_id)
    assert at_stripe["items"]["data"][0]["price"]["id"] == catalog.starter.provider_price_id


# --- the renewal, checked -----------------------------------------------------------------


def renewals_billed_wrong(ctx: Services) -> float:
    """The ``billing_renewals_billed_wrong`` gauge, as beat's collector exports it."""
    [value] = [
        sample.value
        for family in ctx.system_collector().collect()
        if family.name == "billing_renewals_billed_wrong"
        for sample in family.samples
    ]
    return value


def reconcile(stack: Stack) -> dict[str, int]:
    """One run of beat's reconciliation sweep, on the stack's clock (these stacks keep the
    sweep an hour apart, out of the way of the tests that count Stripe's reads)."""
    beat = services_on(
        stack.sessions,
        ShiftableClock(stack.redis_url),
        provider=StripeBillingProvider(EMULATOR_KEY, api_base=stack.stripe_url),
    )
    return reconcile_with_stripe(ReconcileWithStripe(reads=100), beat)


def renewal_check_of(stack: Stack, change: ScheduledChange) -> RenewalCheckRow:
    with stack.sessions() as session:
        found = session.get(RenewalCheckRow, change.id)
        assert found is not None, f"no renewal check for change {change.id}"
        return found


def test_a_renewal_billed_at_another_price_is_counted_wrong_until_it_is_corrected_at_stripe(
    stack: Stack,
    api: httpx.Client,
    ctx: Services,
    sub: Subscribed,
    catalog: Catalog,
    sdk: stripe.StripeClient,
) -> None:
    change = staged(stack, api, sub, catalog.team)
    boundary = change.effective_at
    item = sdk.v1.subscriptions.retrieve(sub.provider_id)["items"].data[0]
    sdk.v1.subscriptions.update(  # someone in Stripe's dashboard puts the old price back
        sub.provider_id,
        params={  # type: ignore[arg-type]
            "items": [{"id": item.id, "price": catalog.starter.provider_price_id}],
            "proration_behavior": "none",
        },
    )
    move_to(stack, boundary + timedelta(minutes=1))
    wait_for(stack, change, ChangeState.APPLIED)
    [renewal] = billed_from(sdk, sub, boundary)
    assert renewal.total == 900  # Stripe renewed at starter's price for a team period
    move_to(stack, boundary + timedelta(minutes=2))  # the check falls due shortly after

    found = reconcile(stack)

    check = renewal_check_of(stack, change)
    assert check.state == "billed_wrong", check.finding
    assert "billed 9.00 USD" in (check.finding or "")
    assert found.get("renewal_mismatch") == 1
    assert renewals_billed_wrong(ctx) == 1

    sdk.v1.subscriptions.update(  # the runbook's correction, prorated from the period's start
        sub.provider_id,
        params={  # type: ignore[arg-type]
            "items": [{"id": item.id, "price": catalog.team.provider_price_id}],
            "proration_behavior": "always_invoice",
            "proration_date": int(boundary.timestamp()),
        },
    )
    move_to(stack, boundary + timedelta(minutes=8))  # a wrong period is read every 5 minutes
    reconcile(stack)

    assert renewal_check_of(stack, change).state == "billed_right"
    assert renewals_billed_wrong(ctx) == 0
    assert sum(invoice.total for invoice in billed_from(sdk, sub, boundary)) == 2900


def test_a_renewal_billed_at_the_plan_s_price_is_checked_right_once(
    stack: Stack,
    api: httpx.Client,
    ctx: Services,
    sub: Subscribed,
    catalog: Catalog,
    sdk: stripe.StripeClient,
) -> None:
    change = staged(stack, api, sub, catalog.team)
    move_to(stack, change.effective_at + timedelta(minutes=1))
    wait_for(stack, change, ChangeState.APPLIED)
    move_to(stack, change.effective_at + timedelta(minutes=2))

    reconcile(stack)
    reconcile(stack)

    check = renewal_check_of(stack, change)
    assert (check.state, check.checks) == ("billed_right", 1)

"""The operator's plan and subscription commands, on SQLite and PostgreSQL, against the
Stripe emulator."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from functools import cache

import pytest

from domain.billing import BillingAccount, BillingDetails
from domain.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    TransientError,
)
from domain.plans import PlanSpec
from domain.subscriptions import SubscriptionState
from stripe_emulator import EmulatorAdmin
from tests.support.emulator import EMULATOR_KEY, EmulatorProcess
from worker.admin import (
    OperatorContext,
    create_organization,
    create_plan,
    create_subscription,
    subscription_report,
)
from worker.bootstrap import BillingSettings
from worker.clock import SystemClock
from worker.db.engine import session_factory
from worker.stripe_provider import StripeBillingProvider


@pytest.fixture
def ctx(
    make_database: Callable[[str], str], emulator: EmulatorProcess, admin: EmulatorAdmin
) -> OperatorContext:
    url = make_database(f"admin_{uuid.uuid4().hex[:8]}")
    return OperatorContext(
        sessions=session_factory(url),
        clock=SystemClock(),
        provider_factory=cache(lambda: StripeBillingProvider(EMULATOR_KEY, api_base=emulator.url)),
        billing=BillingSettings(
            default_currency="usd", provider_idempotency_window=timedelta(hours=23)
        ),
    )


def account(ctx: OperatorContext, *, currency: str = "usd", online: bool = True) -> BillingAccount:
    org = create_organization(ctx.sessions, ctx.clock, name=f"org-{uuid.uuid4().hex[:8]}")
    opened = BillingAccount.open(
        f"ba_{uuid.uuid4().hex[:8]}",
        org,
        BillingDetails(name="Acme", email="billing@acme.example", currency=currency),
        offline=True,
        default_currency="usd",
        now=ctx.clock.now(),
    )
    if online:
        customer = ctx.billing_provider().create_customer(
            opened.provider_customer(), idempotency_key=f"{opened.id}:create"
        )
        opened.registered("stripe", customer, ctx.clock.now())
    with ctx.unit_of_work() as uow:
        uow.billing_accounts.add(opened)
        uow.commit()
    return opened


SPEC = PlanSpec(name="team", amount=2900, currency="usd")


def test_a_plan_creation_that_failed_is_resumed_with_one_price(
    ctx: OperatorContext, admin: EmulatorAdmin
) -> None:
    admin.add_fault("drop", "POST /v1/prices", after_execution=True, count=1)
    with pytest.raises(TransientError):
        create_plan(ctx, SPEC)

    plan = create_plan(ctx, SPEC)

    assert plan.provider_price_id is not None
    assert len([r for r in admin.requests("/v1/prices", "POST") if not r.replayed]) == 1
    with pytest.raises(AlreadyExists):
        create_plan(ctx, SPEC)
    with pytest.raises(AlreadyExists):
        create_plan(ctx, PlanSpec(name="team", amount=3900, currency="usd"))


def test_a_subscription_is_recorded_with_stripes_state_and_period(ctx: OperatorContext) -> None:
    plan = create_plan(ctx, SPEC)
    payer = account(ctx)

    subscription = create_subscription(
        ctx, org_id=payer.org_id, billing_account_id=payer.id, plan_ref="team"
    )

    assert subscription.state is SubscriptionState.ACTIVE
    assert subscription.plan_id == plan.id
    report = subscription_report(ctx, subscription.id)
    assert report["plan"]["name"] == "team"
    assert report["current_phase"] == {
        "effective_at": subscription.current_period_start.isoformat(),
        "plan_id": plan.id,
    }
    assert report["changes"] == []


def test_a_subscription_creation_is_retried_with_its_id(
    ctx: OperatorContext, admin: EmulatorAdmin
) -> None:
    create_plan(ctx, SPEC)
    payer = account(ctx)
    admin.add_fault("drop", "POST /v1/subscriptions", after_execution=True, count=1)
    with pytest.raises(TransientError):
        create_subscription(
            ctx,
            org_id=payer.org_id,
            billing_account_id=payer.id,
            plan_ref="team",
            subscription_id="sub_x",
        )

    create_subscription(
        ctx,
        org_id=payer.org_id,
        billing_account_id=payer.id,
        plan_ref="team",
        subscription_id="sub_x",
    )

    created = [
        r for r in admin.requests("/v1/subscriptions", "POST") if r.path == "/v1/subscriptions"
    ]
    assert [r.replayed for r in created] == [False, True]


@pytest.mark.parametrize(
    ("case", "error"),
    [
        ("offline-account", FailedPrecondition),
        ("other-currency", InvalidArgument),
        ("unknown-plan", NotFound),
        ("other-org", NotFound),
    ],
)
def test_a_subscription_is_refused_before_reaching_stripe(
    ctx: OperatorContext, admin: EmulatorAdmin, case: str, error: type[Exception]
) -> None:
    create_plan(ctx, SPEC)
    payer = account(
        ctx, online=case != "offline-account", currency="eur" if case == "other-currency" else "usd"
    )
    org_id = "org_other" if case == "other-org" else payer.org_id
    plan_ref = "nope" if case == "unknown-plan" else "team"

    with pytest.raises(error):
        create_subscription(ctx, org_id=org_id, billing_account_id=payer.id, plan_ref=plan_ref)

    assert admin.requests("/v1/subscriptions", "POST") == []

"""The operator's plan and subscription commands, on SQLite and PostgreSQL, against the
Stripe emulator."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from adapters.clock import SystemClock
from adapters.db.engine import session_factory
from adapters.provider.stripe_adapter import StripeBillingProvider
from application.handlers.subscriptions.plans import create_plan
from application.handlers.subscriptions.subscribe import create_subscription, subscription_report
from application.requests.operator_requests import (
    CreatePlan,
    CreateSubscription,
    ReportSubscription,
)
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount
from domain.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    TransientError,
)
from domain.subscriptions.plans import PlanSpec
from domain.subscriptions.subscription import SubscriptionState
from stripe_emulator import EmulatorAdmin
from tests.support.emulator import EMULATOR_KEY, EmulatorProcess
from tests.support.records import create_organization, services_on
from worker.bootstrap import Services


@pytest.fixture
def ctx(
    make_database: Callable[[str], str], emulator: EmulatorProcess, admin: EmulatorAdmin
) -> Services:
    url = make_database(f"admin_{uuid.uuid4().hex[:8]}")
    return services_on(
        session_factory(url),
        SystemClock(),
        StripeBillingProvider(EMULATOR_KEY, api_base=emulator.url),
    )


def account(ctx: Services, *, currency: str = "usd", online: bool = True) -> BillingAccount:
    org = create_organization(ctx.database(), ctx.clock, name=f"org-{uuid.uuid4().hex[:8]}")
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
    ctx: Services, admin: EmulatorAdmin
) -> None:
    admin.add_fault("drop", "POST /v1/prices", after_execution=True, count=1)
    with pytest.raises(TransientError):
        create_plan(CreatePlan(SPEC), ctx)

    plan = create_plan(CreatePlan(SPEC), ctx)

    assert plan.provider_price_id is not None
    assert len([r for r in admin.requests("/v1/prices", "POST") if not r.replayed]) == 1
    with pytest.raises(AlreadyExists):
        create_plan(CreatePlan(SPEC), ctx)
    with pytest.raises(AlreadyExists):
        create_plan(CreatePlan(PlanSpec(name="team", amount=3900, currency="usd")), ctx)


def test_a_subscription_is_recorded_with_stripes_state_and_period(ctx: Services) -> None:
    plan = create_plan(CreatePlan(SPEC), ctx)
    payer = account(ctx)

    subscription = create_subscription(
        CreateSubscription(org_id=payer.org_id, billing_account_id=payer.id, plan_ref="team"), ctx
    )

    assert subscription.state is SubscriptionState.ACTIVE
    assert subscription.plan_id == plan.id
    report = subscription_report(ReportSubscription(subscription.id), ctx).to_view()
    assert report["plan"]["name"] == "team"
    assert report["current_phase"] == {
        "effective_at": subscription.current_period_start.isoformat(),
        "plan_id": plan.id,
    }
    assert report["changes"] == []


def test_a_subscription_creation_is_retried_with_its_id(
    ctx: Services, admin: EmulatorAdmin
) -> None:
    create_plan(CreatePlan(SPEC), ctx)
    payer = account(ctx)
    admin.add_fault("drop", "POST /v1/subscriptions", after_execution=True, count=1)
    with pytest.raises(TransientError):
        create_subscription(
            CreateSubscription(
                org_id=payer.org_id,
                billing_account_id=payer.id,
                plan_ref="team",
                subscription_id="sub_x",
            ),
            ctx,
        )

    create_subscription(
        CreateSubscription(
            org_id=payer.org_id,
            billing_account_id=payer.id,
            plan_ref="team",
            subscription_id="sub_x",
        ),
        ctx,
    )

    created = [
        r for r in admin.requests("/v1/subscriptions", "POST") if r.path == "/v1/subscriptions"
    ]
    # The retry looks first (a list of the customer's subscriptions) and takes the one the
    # first attempt made: no second creation, not even a replay.
    looked = [
        r for r in admin.requests("/v1/subscriptions", "GET") if r.path == "/v1/subscriptions"
    ]
    assert [r.replayed for r in created] == [False]
    assert [(r.query["customer"], r.query["status"]) for r in looked] == [
        (payer.provider_id, "all")
    ] * 2


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
    ctx: Services, admin: EmulatorAdmin, case: str, error: type[Exception]
) -> None:
    create_plan(CreatePlan(SPEC), ctx)
    payer = account(
        ctx, online=case != "offline-account", currency="eur" if case == "other-currency" else "usd"
    )
    org_id = "org_other" if case == "other-org" else payer.org_id
    plan_ref = "nope" if case == "unknown-plan" else "team"

    with pytest.raises(error):
        create_subscription(
            CreateSubscription(org_id=org_id, billing_account_id=payer.id, plan_ref=plan_ref), ctx
        )

    assert admin.requests("/v1/subscriptions", "POST") == []

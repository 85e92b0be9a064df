"""Plans, billing accounts and subscriptions for the tests, made the way the admin commands
make them (the same code, run in the test process against a stack's database and emulator)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from adapters.db.uow import SqlUnitOfWork
from adapters.provider.stripe_adapter import StripeBillingProvider
from application.handlers.billing.accounts import create_billing_account
from application.handlers.subscriptions.plans import create_plan
from application.handlers.subscriptions.subscribe import create_subscription
from application.requests.operator_requests import CreatePlan, CreateSubscription
from domain.billing.account_commands import CreateBillingAccount
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount
from domain.subscriptions.change_states import ChangeState
from domain.subscriptions.plans import Plan, PlanSpec
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import Subscription
from stripe_emulator import EmulatorAdmin, LoggedRequest
from tests.support.emulator import EMULATOR_KEY
from tests.support.records import create_organization, services_on
from tests.support.stack import Stack
from worker.bootstrap import Services

DAY = 86_400.0


def operator(stack: Stack) -> Services:
    """The services the admin commands run with, on the stack's database and emulator."""
    return services_on(
        stack.sessions, provider=StripeBillingProvider(EMULATOR_KEY, api_base=stack.stripe_url)
    )


def new_plan(ctx: Services, name: str, amount: int, interval: str = "month") -> Plan:
    """A plan with a unique name starting with ``name``."""
    spec = PlanSpec(
        name=f"{name}-{uuid.uuid4().hex[:8]}", amount=amount, currency="usd", interval=interval
    )
    return create_plan(CreatePlan(spec), ctx)


@dataclass(frozen=True)
class Catalog:
    """Three monthly plans, dearer each: what the plan-change tests move between."""

    starter: Plan
    team: Plan
    scale: Plan


def three_plans(ctx: Services, scale_amount: int = 9900) -> Catalog:
    """Starter (900), team (2900) and scale (``scale_amount``), monthly."""
    return Catalog(
        starter=new_plan(ctx, "starter", 900),
        team=new_plan(ctx, "team", 2900),
        scale=new_plan(ctx, "scale", scale_amount),
    )


def new_account(ctx: Services) -> BillingAccount:
    """An enabled organization with a billing account registered at the emulator."""
    org = create_organization(ctx.database(), ctx.clock, name=f"org-{uuid.uuid4().hex[:12]}")
    ready = create_billing_account(
        CreateBillingAccount(
            command_id=f"test-{uuid.uuid4()}",
            org_id=org.id,
            billing_account_id=f"ba_{uuid.uuid4().hex}",
            account=BillingDetails(name="Acme", email="billing@acme.example"),
        ),
        ctx,
    )
    with ctx.unit_of_work() as uow:
        account = uow.billing_accounts.get(ready.billing_account["id"])
    assert account is not None
    return account


@dataclass(frozen=True)
class Subscribed:
    """A subscription and where its change endpoint is."""

    org_id: str
    account_id: str
    id: str
    provider_id: str

    @property
    def change_url(self) -> str:
        return (
            f"/v1beta1/organizations/{self.org_id}/billing/{self.account_id}"
            f"/subscriptions/{self.id}/change"
        )


def subscribe(ctx: Services, account: BillingAccount, plan: Plan) -> Subscribed:
    subscription = create_subscription(
        CreateSubscription(
            org_id=account.org_id, billing_account_id=account.id, plan_ref=plan.name
        ),
        ctx,
    )
    return Subscribed(account.org_id, account.id, subscription.id, subscription.provider_id)


def stored_subscription(stack: Stack, subscription_id: str) -> Subscription:
    with SqlUnitOfWork(stack.sessions) as uow:
        subscription = uow.subscriptions.get(subscription_id)
    assert subscription is not None
    return subscription


def changes_of(stack: Stack, subscription_id: str) -> list[ScheduledChange]:
    """The subscription's changes, newest first."""
    with SqlUnitOfWork(stack.sessions) as uow:
        return uow.scheduled_changes.for_subscription(subscription_id)


def stored_change(stack: Stack, change_id: str) -> ScheduledChange:
    with SqlUnitOfWork(stack.sessions) as uow:
        change = uow.scheduled_changes.get(change_id)
    assert change is not None
    return change


def change_in(stack: Stack, change_id: str, state: ChangeState) -> ScheduledChange | None:
    """The change, once it is in ``state`` (for ``eventually``)."""
    found = stored_change(stack, change_id)
    return found if found.state is state else None


def provider_updates(emulator: EmulatorAdmin, provider_id: str) -> list[LoggedRequest]:
    """Every update request of the subscription the emulator received (replays included)."""
    path = f"/v1/subscriptions/{provider_id}"
    return [r for r in emulator.requests(path_prefix=path, method="POST") if r.path == path]


def executed_updates(emulator: EmulatorAdmin, provider_id: str) -> list[LoggedRequest]:
    """The updates the emulator executed: not idempotent replays, and answered 200 or hit by
    a fault only after executing (a dropped or hung answer)."""
    return [
        r
        for r in provider_updates(emulator, provider_id)
        if not r.replayed and (r.status == 200 or "(after)" in (r.fault or ""))
    ]

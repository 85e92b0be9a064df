"""Test data: entities to seed, and a subscription seeded on both sides."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount
from domain.billing.organizations import Organization, OrganizationState
from domain.subscriptions.plans import Plan, PlanInterval
from domain.subscriptions.subscription import ProviderSubscription, Subscription
from domain.users import User, UserState
from tests.support.fakes.application import FakeApplication
from tests.support.fakes.clock import T0


def an_organization(
    org_id: str = "org_1", *, enabled: bool = True, now: datetime = T0
) -> Organization:
    return Organization(
        id=org_id,
        name=f"name-{org_id}",
        title="Acme",
        state=OrganizationState.ENABLED if enabled else OrganizationState.DISABLED,
        created_at=now,
        updated_at=now,
    )


def a_user(user_id: str = "usr_1", *, enabled: bool = False, now: datetime = T0) -> User:
    return User(
        id=user_id,
        email=f"{user_id}@example.com",
        name="Ada",
        state=UserState.ENABLED if enabled else UserState.DISABLED,
        created_at=now,
        updated_at=now,
    )


@dataclass(frozen=True)
class Subscribed:
    """A subscription seeded on both sides (the fake database and the fake provider), on
    plan ``starter``, with ``team`` and ``scale`` to change to (same currency)."""

    org_id: str
    account_id: str
    subscription_id: str
    provider_id: str
    starter: Plan
    team: Plan
    scale: Plan


def a_plan(name: str, price_id: str, *, currency: str = "usd", now: datetime = T0) -> Plan:
    return Plan(
        id=f"plan_{name}",
        name=name,
        title=name.title(),
        interval=PlanInterval.MONTH,
        amount=1000,
        currency=currency,
        active=True,
        created_at=now,
        updated_at=now,
        provider="fake",
        provider_product_id=f"prod_{name}",
        provider_price_id=price_id,
    )


def subscribed(app: FakeApplication, *, period_days: int = 30) -> Subscribed:
    """An enabled organization, its registered account and an active subscription."""
    now = app.clock.now()
    org = an_organization(now=now)
    account = BillingAccount.open(
        "ba_1",
        org,
        BillingDetails(name="Acme", email="billing@acme.example"),
        offline=True,
        default_currency="usd",
        now=now,
    )
    account.registered("fake", "cus_seeded", now)
    starter, team, scale = (
        a_plan(name, f"price_{name}", now=now) for name in ("starter", "team", "scale")
    )
    for plan in (starter, team, scale):
        assert plan.provider_price_id is not None
        app.provider.add_price(plan.provider_price_id)
    remote = ProviderSubscription(
        id="sub_remote_1",
        status="active",
        item_id="si_1",
        price_id="price_starter",
        current_period_start=now,
        current_period_end=now + timedelta(days=period_days),
        interval="day",
        interval_count=period_days,
    )
    app.provider.customers["cus_seeded"] = account.provider_customer()
    app.provider.add_subscription(remote, customer_id="cus_seeded")
    subscription = Subscription.started("sub_1", account.id, starter, "fake", remote, now)
    app.db.seed(org, account, starter, team, scale, subscription)
    return Subscribed(org.id, account.id, subscription.id, remote.id, starter, team, scale)


def stored_account(app: FakeApplication, account_id: str = "ba_1") -> BillingAccount:
    """The billing account as the fake database has it committed."""
    account: BillingAccount | None = app.db.row("billing_accounts", account_id)
    assert account is not None
    return account

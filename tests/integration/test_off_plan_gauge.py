"""Beat's gauge of subscriptions Stripe bills off their plan, read from SQLite and PostgreSQL
as beat reads it at a scrape: a price that is none of our plans', another plan's, and what is
not counted (a change in flight holding its target's price, a subscription that is over, one
never read); and its gauge of live subscriptions Stripe discounts."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

from adapters.clock import SystemClock
from adapters.db.engine import session_factory
from adapters.db.uow import SqlUnitOfWork
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount
from domain.subscriptions.plans import Plan, PlanSpec
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import ProviderSubscription, Subscription, SubscriptionState
from tests.support.records import create_organization
from worker.bootstrap import build_services
from worker.settings import Settings


def test_the_gauges_count_live_subscriptions_billed_off_their_plan_by_kind_and_those_discounted(
    make_database: Callable[[str], str], redis_server: str
) -> None:
    url = make_database(f"off_plan_{uuid.uuid4().hex[:8]}")
    sessions = session_factory(url)
    collector = build_services(
        Settings(database_url=url, redis_url=f"{redis_server}/12")
    ).system_collector()
    now = SystemClock().now()
    org = create_organization(sessions, SystemClock(), name=f"o-{uuid.uuid4().hex[:8]}")
    account = BillingAccount.open(
        f"ba_{uuid.uuid4().hex[:8]}",
        org,
        BillingDetails(name="Acme", email="billing@acme.example"),
        offline=True,
        default_currency="usd",
        now=now,
    )
    plans = {}
    for name, amount in (("starter", 900), ("team", 2900)):
        suffix = uuid.uuid4().hex[:6]
        spec = PlanSpec(name=f"{name}-{suffix}", amount=amount, currency="usd")
        plan = Plan.new(f"plan_{name}_{suffix}", spec, now)
        plan.provider_price_id = f"price_{name}_{uuid.uuid4().hex[:6]}"
        plans[name] = plan

    def subscription(
        billed: str | None, state: str = "active", discount: str | None = None
    ) -> Subscription:
        remote = ProviderSubscription(
            id=f"sub_{uuid.uuid4().hex[:10]}",
            status=state,
            item_id="si_1",
            price_id=billed or "price_unread",
            current_period_start=now,
            current_period_end=now + timedelta(days=30),
        )
        made = Subscription.started(
            f"sub_{uuid.uuid4().hex[:10]}", account.id, plans["starter"], "stripe", remote, now
        )
        made.billed_price_id = billed
        made.billed_discount = discount
        return made

    team_price = plans["team"].provider_price_id
    on_plan = subscription(plans["starter"].provider_price_id)
    dashboard = subscription("price_dashboard")
    other_plan = subscription(team_price)
    staged = subscription(team_price)
    canceled = subscription("price_dashboard", "canceled")
    unread = subscription(None)
    discounted = subscription(plans["starter"].provider_price_id, discount="20 % off, forever")
    discounted_over = subscription("price_dashboard", "canceled", discount="20 % off, forever")
    change = ScheduledChange.at_period_end("chg_staged", staged, plans["team"], now=now)
    change.stage(staged.current_period_end + timedelta(days=30), now)
    with SqlUnitOfWork(sessions) as uow:
        uow.billing_accounts.add(account)
        for plan in plans.values():
            uow.plans.add(plan)
        for row in (
            on_plan,
            dashboard,
            other_plan,
            staged,
            canceled,
            unread,
            discounted,
            discounted_over,
        ):
            uow.subscriptions.add(row)
        uow.commit()
    with SqlUnitOfWork(sessions) as uow:
        uow.scheduled_changes.add(change)
        uow.commit()
    assert canceled.state is SubscriptionState.CANCELED

    families = list(collector.collect())
    counted = {
        sample.labels["kind"]: sample.value
        for family in families
        if family.name == "billing_subscriptions_off_plan"
        for sample in family.samples
    }

    assert counted == {"unknown_price": 1, "other_plan": 1}
    [discounted_now] = [
        sample.value
        for family in families
        if family.name == "billing_subscriptions_discounted"
        for sample in family.samples
    ]
    assert discounted_now == 1

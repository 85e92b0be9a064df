"""A world for the drift tests on real parts: a migrated database, the Stripe emulator (a
process, through the real SDK) and an operator's settings, with ``billing-worker stripe drift``
run as an operator runs it (a process of its own)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import stripe  # noqa: TID251 - the tests make what a crash or a person leaves at the emulator
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from adapters.clock import SystemClock
from adapters.db.engine import session_factory
from adapters.db.models import EventRow
from adapters.provider.stripe_adapter import StripeBillingProvider
from application.handlers.billing.accounts import create_billing_account
from application.handlers.provider.sync import resync_stripe_object
from application.handlers.subscriptions.plans import create_plan
from application.handlers.subscriptions.subscribe import create_subscription
from application.requests.operator_requests import (
    CreatePlan,
    CreateSubscription,
    ResyncStripeObject,
)
from domain.billing.account_commands import CreateBillingAccount
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount
from domain.billing.organizations import Organization
from domain.subscriptions.plans import Plan, PlanSpec
from domain.subscriptions.subscription import Subscription
from stripe_emulator import EmulatorAdmin
from tests.emulator.support import sdk_client
from tests.support.emulator import EMULATOR_KEY, EmulatorProcess
from tests.support.environment import settings_environment
from tests.support.records import create_organization, services_on
from worker.bootstrap import Services

DRIFT_FOUND = 1


@dataclass(frozen=True)
class Done:
    status: int
    stdout: str
    stderr: str

    def findings(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = json.loads(self.stdout)
        return found


@dataclass
class World:
    """A migrated database of one backend, the emulator reset, and an operator's settings."""

    sessions: sessionmaker[Session]
    services: Services
    sdk: stripe.StripeClient
    admin: EmulatorAdmin
    env: dict[str, str]
    org: Organization

    def drift(self, *args: str) -> Done:
        """``billing-worker stripe drift ARGS`` in a process of its own."""
        done = subprocess.run(
            [sys.executable, "-m", "worker.cli", "stripe", "drift", *args],
            env=settings_environment(self.env),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert "Traceback" not in done.stderr, done.stderr
        return Done(done.returncode, done.stdout, done.stderr)

    def pending_account(self) -> BillingAccount:
        """An account whose registration died after Stripe answered, before our commit: it
        is ``pending`` with no provider id."""
        account = BillingAccount.open(
            f"ba_{uuid.uuid4().hex[:12]}",
            self.org,
            BillingDetails(name="Acme", email="billing@acme.example"),
            offline=False,
            default_currency="usd",
            now=SystemClock().now(),
        )
        with self.services.unit_of_work() as uow:
            uow.billing_accounts.add(account)
            uow.commit()
        return account

    def registered_account(self) -> BillingAccount:
        ready = create_billing_account(
            CreateBillingAccount(
                command_id=f"test-{uuid.uuid4().hex}",
                org_id=self.org.id,
                billing_account_id=f"ba_{uuid.uuid4().hex[:12]}",
                account=BillingDetails(name="Acme", email="billing@acme.example"),
            ),
            self.services,
        )
        return self.account(ready.billing_account["id"])

    def account(self, account_id: str) -> BillingAccount:
        with self.services.unit_of_work() as uow:
            account = uow.billing_accounts.get(account_id)
        assert account is not None
        return account

    def customer_at_stripe(self, account: BillingAccount) -> str:
        """A customer made at Stripe for ``account`` (as its registration makes it)."""
        made = self.sdk.v1.customers.create(
            params={
                "name": account.name,
                "email": account.email,
                "metadata": {"org_id": account.org_id, "billing_account_id": account.id},
            }
        )
        return str(made.id)

    def plan(self, name: str, amount: int = 900) -> Plan:
        spec = PlanSpec(name=f"{name}-{uuid.uuid4().hex[:6]}", amount=amount, currency="usd")
        return create_plan(CreatePlan(spec), self.services)

    def subscribe(self, account: BillingAccount, plan: Plan, **kwargs: Any) -> Subscription:
        return create_subscription(
            CreateSubscription(
                org_id=account.org_id, billing_account_id=account.id, plan_ref=plan.name, **kwargs
            ),
            self.services,
        )

    def subscription(self, subscription_id: str) -> Subscription | None:
        with self.services.unit_of_work() as uow:
            return uow.subscriptions.get(subscription_id)

    def stripe_subscriptions(self, customer_id: str) -> list[stripe.Subscription]:
        listed = self.sdk.v1.subscriptions.list(params={"customer": customer_id, "status": "all"})
        return list(listed.data)

    def event_types(self) -> list[str]:
        with self.sessions() as session:
            return list(session.scalars(select(EventRow.type).order_by(EventRow.sequence)))


def drift_world(
    url: str, emulator: EmulatorProcess, admin: EmulatorAdmin, redis_url: str, data_dir: Path
) -> World:
    """A world on the migrated database at ``url``, the emulator (reset) and Redis."""
    sessions = session_factory(url)
    provider = StripeBillingProvider(EMULATOR_KEY, api_base=emulator.url, timeout=5)
    services = services_on(sessions, provider=provider)
    org = create_organization(sessions, SystemClock(), name=f"org-{uuid.uuid4().hex[:8]}")
    env = {
        "BILLING_DATABASE_URL": url,
        "BILLING_DATA_DIR": str(data_dir),
        "BILLING_REDIS_URL": f"{redis_url}/11",
        "BILLING_STRIPE_API_KEY": EMULATOR_KEY,
        "BILLING_STRIPE_API_BASE": emulator.url,
    }
    return World(sessions, services, sdk_client(emulator.url), admin, env, org)


def off_plan(world: World) -> dict[str, float]:
    """Beat's gauge of subscriptions billed off their plan, as a scrape reads it."""
    families = list(world.services.system_collector().collect())
    return {
        sample.labels["kind"]: sample.value
        for family in families
        if family.name == "billing_subscriptions_off_plan"
        for sample in family.samples
    }


def resync(world: World, provider_id: str) -> None:
    resync_stripe_object(
        ResyncStripeObject(object_type="subscription", object_id=provider_id, source="operator"),
        world.services,
    )


def discounted(world: World) -> float:
    """Beat's gauge of live subscriptions Stripe discounts, as a scrape reads it."""
    families = list(world.services.system_collector().collect())
    [value] = [
        sample.value
        for family in families
        if family.name == "billing_subscriptions_discounted"
        for sample in family.samples
    ]
    return value

"""A customer deleted at Stripe (issue 29, row 8): the billing account reads ``deleted``, says
so in ``accounts show`` and in its event, refuses the commands that need the customer with a
clear error, and no longer counts as the organization's account. Real parts: the Stripe
emulator through the SDK, SQLite and PostgreSQL, the CLI as an operator runs it."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from adapters.clock import SystemClock
from adapters.db.engine import session_factory
from adapters.db.models import EventRow
from adapters.provider.stripe_adapter import StripeBillingProvider
from application.handlers.billing.accounts import create_billing_account
from application.handlers.provider.reconcile import reconcile_with_stripe
from application.handlers.provider.sync import sync_stripe_object
from application.handlers.subscriptions.plans import create_plan
from application.handlers.subscriptions.subscribe import create_subscription
from application.requests.operator_requests import CreatePlan, CreateSubscription
from application.requests.sweeps import ReconcileWithStripe
from domain.billing.account_commands import CreateBillingAccount
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccountState
from domain.errors import FailedPrecondition
from domain.provider.sync import SyncStripeObject
from domain.subscriptions.plans import PlanSpec
from domain.subscriptions.subscription import SubscriptionState
from stripe_emulator import EmulatorAdmin
from tests.emulator.support import sdk_client
from tests.support.emulator import EMULATOR_KEY, EmulatorProcess
from tests.support.environment import settings_environment
from tests.support.records import create_organization, services_on
from worker.bootstrap import Services

DETAILS = BillingDetails(name="Acme", email="billing@acme.example")


def open_account(services: Services, org_id: str) -> str:
    ready = create_billing_account(
        CreateBillingAccount(
            command_id=f"test-{uuid.uuid4().hex}",
            org_id=org_id,
            billing_account_id=f"ba_{uuid.uuid4().hex[:12]}",
            account=DETAILS,
        ),
        services,
    )
    return str(ready.billing_account["id"])


def accounts_show(env: dict[str, str], org_id: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli", "accounts", "show", org_id, "--json"],
        env=settings_environment(env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    story: dict[str, Any] = json.loads(done.stdout)
    return story


@pytest.mark.parametrize("found_by", ["sweep", "webhook"])
def test_a_customer_deleted_at_stripe_leaves_its_account_deleted_and_refusing_commands(
    found_by: str,
    make_database: Callable[[str], str],
    emulator: EmulatorProcess,
    admin: EmulatorAdmin,
    redis_server: str,
    tmp_path: Path,
) -> None:
    url = make_database(f"deleted_{found_by}_{uuid.uuid4().hex[:8]}")
    sessions = session_factory(url)
    provider = StripeBillingProvider(EMULATOR_KEY, api_base=emulator.url, timeout=5)
    services = services_on(sessions, provider=provider)
    sdk = sdk_client(emulator.url)
    org = create_organization(sessions, SystemClock(), name=f"org-{uuid.uuid4().hex[:8]}")
    account_id = open_account(services, org.id)
    plan = create_plan(
        CreatePlan(PlanSpec(name=f"starter-{uuid.uuid4().hex[:6]}", amount=900, currency="usd")),
        services,
    )
    subscription = create_subscription(
        CreateSubscription(org_id=org.id, billing_account_id=account_id, plan_ref=plan.name),
        services,
    )
    with services.unit_of_work() as uow:
        registered = uow.billing_accounts.get(account_id)
    assert registered is not None
    assert registered.provider_id is not None
    customer_id = registered.provider_id

    sdk.v1.customers.delete(customer_id)  # in Stripe's dashboard
    if found_by == "sweep":
        found = reconcile_with_stripe(ReconcileWithStripe(reads=10), services)
        assert found.get("customer_deleted") == 1
    else:
        sync_stripe_object(
            SyncStripeObject(
                command_id=f"stripe:evt_{uuid.uuid4().hex[:12]}",
                object_type="customer",
                object_id=customer_id,
                event_type="customer.deleted",
            ),
            services,
        )

    with services.unit_of_work() as uow:
        account = uow.billing_accounts.get(account_id)
        ended = uow.subscriptions.get(subscription.id)
        current = uow.billing_accounts.current_for_organization(org.id)
    assert account is not None
    assert ended is not None
    assert account.state is BillingAccountState.DELETED
    assert account.customer_deleted_at is not None
    assert ended.state is SubscriptionState.CANCELED
    assert current is None  # no longer the organization's account
    with sessions() as session:
        events = session.execute(
            select(EventRow.type, EventRow.document)
            .where(EventRow.type == "billing_account.customer_deleted")
            .order_by(EventRow.sequence)
        ).all()
    assert [(kind, document["data"]["state"]) for kind, document in events] == [
        ("billing_account.customer_deleted", "deleted")
    ]
    # What the customer is billed: Stripe ended the subscription with the customer, and
    # nothing was invoiced after the subscription's first invoice.
    at_stripe = sdk.v1.subscriptions.retrieve(subscription.provider_id)
    assert at_stripe.status == "canceled"
    invoices = sdk.v1.invoices.list(params={"subscription": subscription.provider_id}).data
    assert [invoice.billing_reason for invoice in invoices] == ["subscription_create"]

    story = accounts_show(
        {
            "BILLING_DATABASE_URL": url,
            "BILLING_DATA_DIR": str(tmp_path),
            "BILLING_REDIS_URL": f"{redis_server}/11",
        },
        org.id,
    )
    assert story["billing_account"]["state"] == "deleted"
    assert story["billing_account"]["customer_deleted_at"]

    with pytest.raises(FailedPrecondition) as refused:
        create_subscription(
            CreateSubscription(org_id=org.id, billing_account_id=account_id, plan_ref=plan.name),
            services,
        )
    [reason] = [d for d in refused.value.details if d.get("reason")]
    assert reason["reason"] == "BILLING_ACCOUNT_CUSTOMER_DELETED"
    assert "deleted at Stripe" in refused.value.message

    reopened_id = open_account(services, org.id)  # the organization opens a new one
    with services.unit_of_work() as uow:
        reopened = uow.billing_accounts.current_for_organization(org.id)
    assert reopened is not None
    assert (reopened.id, reopened.state) == (reopened_id, BillingAccountState.ACTIVE)
    assert reopened.provider_id not in (None, customer_id)

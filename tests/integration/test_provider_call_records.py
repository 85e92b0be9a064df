"""The provider-call record (``application/provider_calls.py``) around the real Stripe adapter,
against the Stripe emulator, kept in the database (SQLite and PostgreSQL): what each port
method's calls leave on the operator's timeline."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from adapters.clock import SystemClock
from adapters.db.engine import session_factory
from adapters.db.models import ProviderCallRow
from adapters.db.provider_calls import SqlProviderCallLog
from adapters.provider.stripe_adapter import StripeBillingProvider
from application import log_context
from application.provider_calls import recorded
from domain.billing.account_details import Address
from domain.billing.accounts import ProviderCustomer
from domain.errors import InvalidArgument, TransientError
from domain.ports.provider import BillingProvider
from domain.subscriptions.plans import ProviderPlan
from domain.subscriptions.subscription import SubscriptionTerms
from stripe_emulator import EmulatorAdmin

COMMAND = "cmd_recorded_1"
Row = tuple[str, str | None, str | None, str | None, int, str]
"""operation, subject, command id, idempotency key, attempt, outcome."""


@pytest.fixture
def sessions(make_database: Callable[[str], str]) -> sessionmaker[Session]:
    return session_factory(make_database(f"calls_{uuid.uuid4().hex[:8]}"))


@pytest.fixture
def recorder(provider: StripeBillingProvider, sessions: sessionmaker[Session]) -> BillingProvider:
    return recorded(provider, SqlProviderCallLog(sessions), SystemClock())


@pytest.fixture
def in_a_command() -> Iterator[None]:
    token = log_context.begin_run()
    log_context.bind({"command_id": COMMAND, "task": "billing.test", "attempt": 1})
    yield
    log_context.end_run(token)


def rows(sessions: sessionmaker[Session]) -> list[Row]:
    with sessions() as session:
        return [
            (c.operation, c.subject, c.command_id, c.idempotency_key, c.attempt, c.outcome)
            for c in session.scalars(select(ProviderCallRow).order_by(ProviderCallRow.id))
        ]


def errors(sessions: sessionmaker[Session]) -> list[str | None]:
    with sessions() as session:
        return list(session.scalars(select(ProviderCallRow.error).order_by(ProviderCallRow.id)))


def customer(billing_account_id: str = "ba_1") -> ProviderCustomer:
    return ProviderCustomer(
        billing_account_id=billing_account_id,
        org_id="org_1",
        name="Acme",
        email="billing@acme.example",
        phone="",
        address=Address(),
        tax_ids=(),
        metadata={"billing_account_id": billing_account_id},
    )


PLAN = ProviderPlan(
    plan_id="plan_team", name="team", title="Team", amount=2900, currency="usd", interval="month"
)


@pytest.mark.usefixtures("in_a_command")
def test_each_port_call_a_command_makes_is_recorded_with_its_subject_and_idempotency_key(
    recorder: BillingProvider, sessions: sessionmaker[Session]
) -> None:
    customer_id = recorder.create_customer(customer(), idempotency_key="ba_1:create")
    recorder.find_customer("ba_1")
    recorder.get_customer(customer_id)
    price = recorder.create_plan_price(PLAN, idempotency_key="plan_team:k")
    subscription = recorder.create_subscription(
        customer_id,
        price.price_id,
        SubscriptionTerms(),
        metadata={"subscription_id": "sub_local_1"},
        idempotency_key="sub_local_1:create",
    )
    recorder.get_subscription(subscription.id)
    item_id = subscription.item_id
    recorder.preview_change(
        subscription.id,
        item_id,
        price.price_id,
        proration_behavior="none",
        proration_date=datetime.now(UTC),
    )
    recorder.change_subscription_price(
        subscription.id,
        item_id,
        price.price_id,
        proration_behavior="none",
        idempotency_key="chg_1:apply",
    )
    recorder.list_customers()
    recorder.list_subscriptions(customer_id)
    recorder.list_subscriptions()
    recorder.find_subscription(customer_id, "sub_local_1")
    recorder.list_invoices(subscription.id, 5)
    recorder.list_billed_invoices(subscription.id, 5)

    on_sub = f"provider_subscription:{subscription.id}"
    ok = "succeeded"
    assert rows(sessions) == [
        ("create_customer", "billing_account:ba_1", COMMAND, "ba_1:create", 1, ok),
        ("find_customer", "billing_account:ba_1", COMMAND, None, 1, ok),
        ("get_customer", f"provider_customer:{customer_id}", COMMAND, None, 1, ok),
        ("create_plan_price", "plan:plan_team", COMMAND, "plan_team:k", 1, ok),
        ("create_subscription", "subscription:sub_local_1", COMMAND, "sub_local_1:create", 1, ok),
        ("get_subscription", on_sub, COMMAND, None, 1, ok),
        ("preview_change", on_sub, COMMAND, None, 1, ok),
        ("change_subscription_price", on_sub, COMMAND, "chg_1:apply", 1, ok),
        ("list_customers", None, COMMAND, None, 1, ok),
        ("list_subscriptions", f"provider_customer:{customer_id}", COMMAND, None, 1, ok),
        ("list_subscriptions", None, COMMAND, None, 1, ok),
        ("find_subscription", "subscription:sub_local_1", COMMAND, None, 1, ok),
        ("list_invoices", on_sub, COMMAND, None, 1, ok),
        ("list_billed_invoices", on_sub, COMMAND, None, 1, ok),
    ]


@pytest.mark.usefixtures("in_a_command")
def test_a_write_retried_under_its_key_is_numbered_and_each_attempt_says_how_it_ended(
    recorder: BillingProvider, sessions: sessionmaker[Session], admin: EmulatorAdmin
) -> None:
    admin.add_fault("service_unavailable", "POST /v1/customers", count=1)
    with pytest.raises(TransientError):
        recorder.create_customer(customer(), idempotency_key="ba_1:create")
    recorder.create_customer(customer(), idempotency_key="ba_1:create")
    with pytest.raises(InvalidArgument):
        recorder.get_subscription("sub_nowhere")

    assert rows(sessions) == [
        ("create_customer", "billing_account:ba_1", COMMAND, "ba_1:create", 1, "retryable"),
        ("create_customer", "billing_account:ba_1", COMMAND, "ba_1:create", 2, "succeeded"),
        ("get_subscription", "provider_subscription:sub_nowhere", COMMAND, None, 1, "refused"),
    ]
    retryable, succeeded, refused = errors(sessions)
    assert retryable is not None
    assert "503" in retryable
    assert succeeded is None
    assert refused is not None
    assert refused.startswith("INVALID_ARGUMENT: ")


def test_reads_outside_a_command_are_not_recorded_and_writes_are_without_a_command(
    recorder: BillingProvider, sessions: sessionmaker[Session]
) -> None:
    customer_id = recorder.create_customer(customer("ba_2"), idempotency_key="ba_2:create")
    recorder.get_customer(customer_id)
    recorder.list_customers()

    assert rows(sessions) == [
        ("create_customer", "billing_account:ba_2", None, "ba_2:create", 1, "succeeded")
    ]


@pytest.mark.usefixtures("in_a_command")
def test_registering_the_webhook_endpoint_is_passed_on_unrecorded(
    recorder: BillingProvider, sessions: sessionmaker[Session], admin: EmulatorAdmin
) -> None:
    endpoint = recorder.register_webhook_endpoint(
        "https://billing.example/webhooks/stripe", ["invoice.paid"], set()
    )

    assert endpoint.secret is not None
    assert rows(sessions) == []

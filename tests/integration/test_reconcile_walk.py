"""Beat's reconciliation sweep walks Stripe's subscription list a page per call over several
runs, and brings in line a subscription changed at Stripe behind our back (issue 46). Real
parts: the Stripe emulator through the SDK, SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from adapters.clock import SystemClock
from adapters.db.engine import session_factory
from adapters.provider.stripe_adapter import StripeBillingProvider
from application.handlers.billing.accounts import create_billing_account
from application.handlers.provider.reconcile import reconcile_with_stripe
from application.handlers.subscriptions.plans import create_plan
from application.requests.operator_requests import CreatePlan
from application.requests.sweeps import ReconcileWithStripe
from domain.billing.account_commands import CreateBillingAccount
from domain.billing.account_details import BillingDetails
from domain.provider.pages import WalkedList
from domain.subscriptions.plans import PlanSpec
from domain.subscriptions.subscription import Subscription, SubscriptionState
from stripe_emulator import EmulatorAdmin
from tests.emulator.support import sdk_client
from tests.support.emulator import EMULATOR_KEY, EmulatorProcess
from tests.support.records import create_organization, services_on

SUBSCRIPTIONS = 150
PAGE = 40  # four pages of subscriptions


def test_the_sweep_walks_stripe_s_subscriptions_in_pages_over_runs_and_follows_one_drifted(
    make_database: Callable[[str], str],
    emulator: EmulatorProcess,
    admin: EmulatorAdmin,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sessions = session_factory(make_database(f"walk_{uuid.uuid4().hex[:8]}"))
    provider = StripeBillingProvider(EMULATOR_KEY, api_base=emulator.url, timeout=5)
    services = services_on(sessions, provider=provider)
    sdk = sdk_client(emulator.url)
    org = create_organization(sessions, SystemClock(), name=f"org-{uuid.uuid4().hex[:8]}")
    account_id = str(
        create_billing_account(
            CreateBillingAccount(
                command_id=f"test-{uuid.uuid4().hex}",
                org_id=org.id,
                billing_account_id=f"ba_{uuid.uuid4().hex[:12]}",
                account=BillingDetails(name="Acme", email="billing@acme.example"),
            ),
            services,
        ).billing_account["id"]
    )
    plan = create_plan(
        CreatePlan(PlanSpec(name=f"starter-{uuid.uuid4().hex[:6]}", amount=900, currency="usd")),
        services,
    )
    with services.unit_of_work() as uow:
        account = uow.billing_accounts.get(account_id)
    assert account is not None
    assert account.provider_id is not None
    assert plan.provider_price_id is not None
    made = []
    for number in range(SUBSCRIPTIONS):  # made at Stripe, recorded here as ours
        created = sdk.v1.subscriptions.create(
            params={"customer": account.provider_id, "items": [{"price": plan.provider_price_id}]}
        )
        remote = provider.get_subscription(created.id)
        with services.unit_of_work() as uow:
            uow.subscriptions.add(
                Subscription.started(
                    f"sub_walk_{number}", account_id, plan, "stripe", remote, SystemClock().now()
                )
            )
            uow.commit()
        made.append(created.id)
    drifted = made[SUBSCRIPTIONS // 3]
    sdk.v1.subscriptions.cancel(drifted)  # in Stripe's dashboard
    monkeypatch.setattr(provider, "page_size", PAGE)

    found: dict[str, int] = {}
    walks = []
    for _ in range(2):  # two pages of subscriptions a run (and one of customers)
        for kind, count in reconcile_with_stripe(ReconcileWithStripe(reads=3), services).items():
            found[kind] = found.get(kind, 0) + count
        with services.unit_of_work() as uow:
            walks.append(uow.provider_walks.get(WalkedList.SUBSCRIPTIONS))
    first, second = walks

    assert first is not None
    assert first.after == made[SUBSCRIPTIONS - 2 * PAGE]  # Stripe lists the newest first
    assert second is not None
    assert second.after is None  # the pass is complete
    assert second.completed_pass_started_at is not None
    assert found == {"status": 1}
    with services.unit_of_work() as uow:
        followed = uow.subscriptions.by_provider_id(drifted)
        unread = uow.subscriptions.not_read_since(second.completed_pass_started_at, SUBSCRIPTIONS)
    assert followed is not None
    assert followed.state is SubscriptionState.CANCELED
    assert unread == []  # every row was read by the pass

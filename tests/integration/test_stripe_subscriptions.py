"""The Stripe adapter's plan and subscription calls, over real HTTP through the real SDK,
against the Stripe emulator."""

from __future__ import annotations

from datetime import timedelta

import pytest
import stripe  # noqa: TID251 - the tests look at the emulator's objects through the SDK

from adapters.provider.stripe_adapter import StripeBillingProvider
from domain.billing.account_details import Address
from domain.billing.accounts import ProviderCustomer
from domain.errors import InvalidArgument, TransientError
from domain.subscriptions.plans import ProviderPlan, ProviderPrice
from domain.subscriptions.subscription import SubscriptionState, SubscriptionTerms
from stripe_emulator import EmulatorAdmin
from tests.emulator.support import sdk_client
from tests.support.emulator import EmulatorProcess

METADATA = {"subscription_id": "sub_local_1"}


@pytest.fixture
def sdk(emulator: EmulatorProcess) -> stripe.StripeClient:
    return sdk_client(emulator.url)


def plan(plan_id: str, amount: int = 900, interval: str = "month") -> ProviderPlan:
    return ProviderPlan(
        plan_id=plan_id,
        name=plan_id.removeprefix("plan_"),
        title=plan_id.title(),
        amount=amount,
        currency="usd",
        interval=interval,
    )


def customer_id(provider: StripeBillingProvider) -> str:
    return provider.create_customer(
        ProviderCustomer(
            billing_account_id="ba_1",
            org_id="org_1",
            name="Acme",
            email="billing@acme.example",
            phone="",
            address=Address(),
            tax_ids=(),
            metadata={},
        ),
        idempotency_key="ba_1:create",
    )


def prices(provider: StripeBillingProvider) -> tuple[ProviderPrice, ProviderPrice]:
    return (
        provider.create_plan_price(plan("plan_starter"), idempotency_key="plan_starter:k"),
        provider.create_plan_price(plan("plan_team", 2900), idempotency_key="plan_team:k"),
    )


def test_a_plan_is_one_product_with_one_recurring_price_per_key(
    provider: StripeBillingProvider, admin: EmulatorAdmin, sdk: stripe.StripeClient
) -> None:
    first = provider.create_plan_price(plan("plan_a", 1500, "year"), idempotency_key="plan_a:k")
    again = provider.create_plan_price(plan("plan_a", 1500, "year"), idempotency_key="plan_a:k")

    assert first == again
    price = sdk.v1.prices.retrieve(first.price_id, params={"expand": ["product"]})
    assert (price.unit_amount, price.currency) == (1500, "usd")
    assert price.recurring is not None
    assert price.recurring.interval == "year"
    assert isinstance(price.product, stripe.Product)
    assert price.product.id == first.product_id
    assert price.product.metadata is not None
    assert price.product.metadata.to_dict() == {"plan_id": "plan_a", "plan_name": "a"}
    assert len([r for r in admin.requests("/v1/prices", "POST") if not r.replayed]) == 1


def test_a_subscription_is_created_flexible_with_itemized_proration_discounts_whatever_the_default(
    provider: StripeBillingProvider, admin: EmulatorAdmin, sdk: stripe.StripeClient
) -> None:
    starter, _ = prices(provider)
    created = provider.create_subscription(
        customer_id(provider),
        starter.price_id,
        SubscriptionTerms(days_until_due=14),
        metadata=METADATA,
        idempotency_key="sub_local_1:create",
    )

    (request,) = admin.requests("/v1/subscriptions", "POST")
    assert request.form["billing_mode"] == {
        "type": "flexible",
        "flexible": {"proration_discounts": "itemized"},
    }
    mode = sdk.v1.subscriptions.retrieve(created.id).billing_mode
    assert mode is not None
    assert mode.type == "flexible"
    assert mode.flexible is not None
    assert mode.flexible.proration_discounts == "itemized"


def test_a_subscription_sent_invoices_is_active_with_its_period_from_the_item(
    provider: StripeBillingProvider, sdk: stripe.StripeClient
) -> None:
    starter, _ = prices(provider)
    created = provider.create_subscription(
        customer_id(provider),
        starter.price_id,
        SubscriptionTerms(days_until_due=14),
        metadata=METADATA,
        idempotency_key="sub_local_1:create",
    )

    assert created.state is SubscriptionState.ACTIVE
    assert created.price_id == starter.price_id
    assert created.current_period_end - created.current_period_start >= timedelta(days=28)
    at_stripe = sdk.v1.subscriptions.retrieve(created.id)
    assert (at_stripe.collection_method, at_stripe.days_until_due) == ("send_invoice", 14)
    assert at_stripe.metadata is not None
    assert at_stripe.metadata.to_dict() == METADATA
    assert provider.get_subscription(created.id) == created


def test_a_trial_subscription_is_trialing_until_the_trial_ends(
    provider: StripeBillingProvider,
) -> None:
    starter, _ = prices(provider)
    created = provider.create_subscription(
        customer_id(provider),
        starter.price_id,
        SubscriptionTerms(collection_method="charge_automatically", trial_days=7),
        metadata=METADATA,
        idempotency_key="sub_trial:create",
    )

    assert created.state is SubscriptionState.TRIALING
    assert created.current_period_end - created.current_period_start == timedelta(days=7)


def test_changing_the_price_keeps_the_item_and_runs_once_per_key(
    provider: StripeBillingProvider, admin: EmulatorAdmin
) -> None:
    starter, team = prices(provider)
    created = provider.create_subscription(
        customer_id(provider),
        starter.price_id,
        SubscriptionTerms(),
        metadata=METADATA,
        idempotency_key="sub_local_2:create",
    )

    changes = [
        provider.change_subscription_price(
            created.id,
            created.item_id,
            team.price_id,
            proration_behavior="none",
            idempotency_key="chg_1:apply",
        )
        for _ in range(2)
    ]

    assert changes[0] == changes[1]
    assert (changes[0].item_id, changes[0].price_id) == (created.item_id, team.price_id)
    updates = admin.requests(f"/v1/subscriptions/{created.id}", "POST")
    assert [(u.replayed, u.idempotency_key) for u in updates] == [
        (False, "chg_1:apply"),
        (True, "chg_1:apply"),
    ]
    assert updates[0].form["proration_behavior"] == "none"
    assert updates[0].form["items"] == {"0": {"id": created.item_id, "price": team.price_id}}


def test_a_canceled_subscription_reads_as_canceled(
    provider: StripeBillingProvider, sdk: stripe.StripeClient
) -> None:
    starter, _ = prices(provider)
    created = provider.create_subscription(
        customer_id(provider),
        starter.price_id,
        SubscriptionTerms(),
        metadata=METADATA,
        idempotency_key="sub_local_3:create",
    )
    sdk.v1.subscriptions.cancel(created.id)

    assert provider.get_subscription(created.id).state is SubscriptionState.CANCELED


def test_a_price_stripe_refuses_is_an_invalid_argument_about_the_plan(
    provider: StripeBillingProvider, sdk: stripe.StripeClient
) -> None:
    starter, team = prices(provider)
    created = provider.create_subscription(
        customer_id(provider),
        starter.price_id,
        SubscriptionTerms(),
        metadata=METADATA,
        idempotency_key="sub_local_4:create",
    )
    sdk.v1.prices.update(team.price_id, params={"active": False})

    with pytest.raises(InvalidArgument) as raised:
        provider.change_subscription_price(
            created.id,
            created.item_id,
            team.price_id,
            proration_behavior="create_prorations",
            idempotency_key="chg_2:apply",
        )

    violation = raised.value.details[0]["fieldViolations"][0]
    assert violation["field"] == "plan"
    assert "inactive" in violation["description"]


def test_a_subscription_for_a_customer_stripe_does_not_have_names_the_billing_account(
    provider: StripeBillingProvider,
) -> None:
    starter, _ = prices(provider)

    with pytest.raises(InvalidArgument) as raised:
        provider.create_subscription(
            "cus_gone",
            starter.price_id,
            SubscriptionTerms(),
            metadata=METADATA,
            idempotency_key="sub_local_5:create",
        )

    violation = raised.value.details[0]["fieldViolations"][0]
    assert violation["field"] == "billing_account"
    assert "cus_gone" in violation["description"]
    assert raised.value.details[1]["metadata"]["stripe_code"] == "resource_missing"


def test_a_price_in_a_currency_stripe_refuses_names_the_plans_currency(
    provider: StripeBillingProvider,
) -> None:
    refused = ProviderPlan(
        plan_id="plan_odd",
        name="odd",
        title="Odd",
        amount=900,
        currency="not-a-currency",
        interval="month",
    )

    with pytest.raises(InvalidArgument) as raised:
        provider.create_plan_price(refused, idempotency_key="plan_odd:k")

    assert raised.value.details[0]["fieldViolations"][0]["field"] == "currency"


def test_an_unavailable_stripe_is_a_transient_error(
    provider: StripeBillingProvider, admin: EmulatorAdmin
) -> None:
    admin.add_fault("service_unavailable", "GET /v1/subscriptions/*", count=1)

    with pytest.raises(TransientError):
        provider.get_subscription("sub_whatever")


# --- Stripe's truth flowing in ------------------------------------------------------------------


def test_a_customer_reads_live_with_its_account_then_deleted(
    provider: StripeBillingProvider, sdk: stripe.StripeClient
) -> None:
    customer = provider.create_customer(
        ProviderCustomer(
            billing_account_id="ba_7",
            org_id="org_7",
            name="Acme",
            email="billing@acme.example",
            phone="",
            address=Address(),
            tax_ids=(),
            metadata={"billing_account_id": "ba_7"},
        ),
        idempotency_key="ba_7:create",
    )

    live = provider.get_customer(customer)
    sdk.v1.customers.delete(customer)
    gone = provider.get_customer(customer)

    assert (live.deleted, live.billing_account_id) == (False, "ba_7")
    assert gone.deleted is True


def test_a_subscription_reads_its_cancel_at_anchor_and_interval(
    provider: StripeBillingProvider, sdk: stripe.StripeClient
) -> None:
    starter, _ = prices(provider)
    created = provider.create_subscription(
        customer_id(provider),
        starter.price_id,
        SubscriptionTerms(),
        metadata=METADATA,
        idempotency_key="sub_local_1:create",
    )
    sdk.v1.subscriptions.update(created.id, params={"cancel_at_period_end": True})

    read = provider.get_subscription(created.id)

    assert read.cancel_at == read.current_period_end
    assert read.billing_cycle_anchor == created.current_period_start
    assert (read.interval, read.interval_count) == ("month", 1)
    assert read.next_period_end(read.current_period_end) > read.current_period_end

"""The billing provider's contract (``domain.ports.provider.BillingProvider``) as the handlers
rely on it, checked on the Stripe adapter (against the Stripe emulator) and on the fake the
unit tests use: one object per idempotency key, customers found by their billing account (the
oldest of several), every customer and subscription listed, a subscription found by our id,
and refusals as ``InvalidArgument`` about the plan."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest

from domain.billing.account_details import Address
from domain.billing.accounts import ProviderCustomer
from domain.errors import Internal, InvalidArgument
from domain.ports.provider import BillingProvider
from domain.subscriptions.plans import ProviderPlan
from domain.subscriptions.subscription import (
    ProviderSubscription,
    SubscriptionState,
    SubscriptionTerms,
)
from stripe_emulator import EmulatorAdmin
from tests.emulator.support import sdk_client
from tests.support.emulator import EmulatorProcess
from tests.support.fakes.clock import FakeClock
from tests.support.fakes.provider import FakeBillingProvider


@dataclass
class Provider:
    port: BillingProvider
    deactivate_price: Callable[[str], None]
    cancel_subscription: Callable[[str], None]
    advance: Callable[[int], None]
    """Let ``seconds`` pass at the provider (objects made after are younger)."""


@pytest.fixture(params=["stripe", "fake"])
def provider(request: pytest.FixtureRequest) -> Provider:
    if request.param == "fake":
        clock = FakeClock()
        fake = FakeBillingProvider(clock)

        def later(seconds: int) -> None:
            clock.advance(timedelta(seconds=seconds))

        return Provider(fake, fake.deactivate_price, fake.cancel_subscription, later)
    real: BillingProvider = request.getfixturevalue("provider")  # reset for this test
    emulator: EmulatorProcess = request.getfixturevalue("emulator")
    sdk = sdk_client(emulator.url)

    def deactivate(price_id: str) -> None:
        sdk.v1.prices.update(price_id, params={"active": False})

    def cancel(provider_id: str) -> None:
        sdk.v1.subscriptions.cancel(provider_id)

    admin: EmulatorAdmin = request.getfixturevalue("admin")

    def advance(seconds: int) -> None:
        admin.advance_clock(seconds)

    return Provider(real, deactivate, cancel, advance)


def customer(name: str = "Acme", account_id: str = "ba_1") -> ProviderCustomer:
    return ProviderCustomer(
        billing_account_id=account_id,
        org_id="org_1",
        name=name,
        email="billing@acme.example",
        phone="",
        address=Address(),
        tax_ids=(),
        metadata={"org_id": "org_1", "billing_account_id": account_id},
    )


def plan(plan_id: str, amount: int = 900) -> ProviderPlan:
    return ProviderPlan(
        plan_id, plan_id.removeprefix("plan_"), plan_id.title(), amount, "usd", "month"
    )


def subscribed(provider: BillingProvider) -> tuple[ProviderSubscription, str]:
    """A subscription on a starter price, and a team price to change to."""
    starter = provider.create_plan_price(plan("plan_starter"), idempotency_key="starter:k")
    team = provider.create_plan_price(plan("plan_team", 2900), idempotency_key="team:k")
    customer_id = provider.create_customer(customer(), idempotency_key="ba_1:k")
    created = provider.create_subscription(
        customer_id,
        starter.price_id,
        SubscriptionTerms(),
        metadata={"subscription_id": "sub_1"},
        idempotency_key="sub_1:k",
    )
    return created, team.price_id


def test_one_key_makes_one_customer_found_by_its_billing_account(provider: Provider) -> None:
    port = provider.port
    first = port.create_customer(customer(), idempotency_key="ba_1:k")
    again = port.create_customer(customer(), idempotency_key="ba_1:k")

    assert again == first
    assert port.find_customer("ba_1") == first
    assert port.find_customer("ba_unknown") is None


def test_one_key_with_another_request_is_an_internal_error(provider: Provider) -> None:
    provider.port.create_customer(customer("First"), idempotency_key="ba_1:k")

    with pytest.raises(Internal):
        provider.port.create_customer(customer("Second"), idempotency_key="ba_1:k")


def test_one_key_for_another_operation_is_an_internal_error(provider: Provider) -> None:
    provider.port.create_customer(customer(), idempotency_key="k")

    with pytest.raises(Internal):
        provider.port.create_plan_price(plan("plan_starter"), idempotency_key="k")


def test_one_key_makes_one_price(provider: Provider) -> None:
    port = provider.port
    first = port.create_plan_price(plan("plan_starter"), idempotency_key="starter:k")

    assert port.create_plan_price(plan("plan_starter"), idempotency_key="starter:k") == first


def test_a_new_subscription_is_active_and_a_price_change_keeps_its_item_once_per_key(
    provider: Provider,
) -> None:
    port = provider.port
    created, team = subscribed(port)

    changes = [
        port.change_subscription_price(
            created.id, created.item_id, team, proration_behavior="none", idempotency_key="c:k"
        )
        for _ in range(2)
    ]

    assert created.state is SubscriptionState.ACTIVE
    assert changes[0] == changes[1]
    assert (changes[0].item_id, changes[0].price_id) == (created.item_id, team)
    assert port.get_subscription(created.id).price_id == team


def test_an_inactive_price_is_refused_as_an_invalid_argument_about_the_plan(
    provider: Provider,
) -> None:
    created, team = subscribed(provider.port)
    provider.deactivate_price(team)

    with pytest.raises(InvalidArgument) as raised:
        provider.port.change_subscription_price(
            created.id,
            created.item_id,
            team,
            proration_behavior="create_prorations",
            idempotency_key="c:k",
        )

    violation = raised.value.details[0]["fieldViolations"][0]
    assert violation["field"] == "plan"
    assert "inactive" in violation["description"]


def test_a_canceled_subscription_reads_as_canceled_and_refuses_a_change(
    provider: Provider,
) -> None:
    created, team = subscribed(provider.port)
    provider.cancel_subscription(created.id)

    assert provider.port.get_subscription(created.id).state is SubscriptionState.CANCELED
    with pytest.raises(InvalidArgument):
        provider.port.change_subscription_price(
            created.id, created.item_id, team, proration_behavior="none", idempotency_key="c:k"
        )


def test_an_unknown_subscription_is_an_invalid_argument(provider: Provider) -> None:
    with pytest.raises(InvalidArgument):
        provider.port.get_subscription("sub_unknown")


def test_of_several_customers_naming_an_account_the_oldest_is_found(provider: Provider) -> None:
    port = provider.port
    oldest = port.create_customer(customer(), idempotency_key="ba_1:first")
    provider.advance(60)
    port.create_customer(customer(), idempotency_key="ba_1:second")

    assert port.find_customer("ba_1") == oldest


def test_every_customer_is_listed_with_its_metadata(provider: Provider) -> None:
    port = provider.port
    first = port.create_customer(customer(account_id="ba_1"), idempotency_key="ba_1:k")
    second = port.create_customer(customer(account_id="ba_2"), idempotency_key="ba_2:k")

    listed = {found.id: found for found in port.list_customers()}

    assert set(listed) == {first, second}
    assert (listed[first].billing_account_id, listed[second].billing_account_id) == (
        "ba_1",
        "ba_2",
    )


def test_every_subscription_is_listed_canceled_too_and_found_by_our_id(
    provider: Provider,
) -> None:
    port = provider.port
    created, _ = subscribed(port)
    provider.cancel_subscription(created.id)
    customer_id = port.find_customer("ba_1")
    assert customer_id is not None

    [listed] = port.list_subscriptions()

    assert (listed.id, listed.customer_id, listed.subscription_id) == (
        created.id,
        customer_id,
        "sub_1",
    )
    assert listed.subscription.state is SubscriptionState.CANCELED
    assert port.list_subscriptions(customer_id) == [listed]
    assert port.list_subscriptions("cus_other") == []
    found = port.find_subscription(customer_id, "sub_1")
    assert found is not None
    assert found.id == created.id
    assert port.find_subscription(customer_id, "sub_2") is None


def test_pages_list_what_the_lists_list_and_resume_after_a_page_s_cursor(
    provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = provider.port
    monkeypatch.setattr(port, "page_size", 2)
    for number in range(5):
        port.create_customer(customer(account_id=f"ba_{number}"), idempotency_key=f"ba_{number}:k")

    pages = list(port.customer_pages())
    resumed = next(port.customer_pages(pages[0].after))

    assert [len(page.objects) for page in pages] == [2, 2, 1]
    assert [page.has_more for page in pages] == [True, True, False]
    assert [listed for page in pages for listed in page.objects] == port.list_customers()
    assert pages[0].after == pages[0].objects[-1].id
    assert resumed == pages[1]


def test_a_listed_subscription_reads_as_the_same_subscription_read_alone(
    provider: Provider,
) -> None:
    port = provider.port
    created, _ = subscribed(port)

    [page] = list(port.subscription_pages())

    [listed] = page.objects
    assert not page.has_more
    assert listed.subscription == port.get_subscription(created.id)
    assert listed == port.list_subscriptions()[0]
    assert (listed.subscription_id, listed.customer_id) == ("sub_1", port.find_customer("ba_1"))

"""The bulk seed (``POST /_emulator/bulk/subscriptions``): a benchmark's customers and their
subscriptions made directly in the store, then served like any others, with no history."""

from __future__ import annotations

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin, EmulatorAdminError

pytestmark = pytest.mark.emulator_only

COUNT = 3_000
DAY = 86_400


def _monthly_prices(client: stripe.StripeClient) -> list[str]:
    return [
        client.v1.prices.create(
            params={"currency": "usd", "unit_amount": amount, "product_data": {"name": name},
                    "recurring": {"interval": "month"}}
        ).id
        for name, amount in (("Starter", 900), ("Team", 2900), ("Business", 9900))
    ]  # fmt: skip


def _seed(admin: EmulatorAdmin, prices: list[str], count: int = COUNT, start: int = 0) -> int:
    """Seeds ``count`` (rows.py's ids, its one-in-a-thousand other price); returns period end."""
    now = admin.now()
    admin.bulk_subscriptions(
        count,
        customer_id="cus_scale{i:09d}",
        subscription_id="sub_stripe{i:09d}",
        item_id="si_scale{i:09d}",
        prices=prices,
        start=start,
        price_overrides={i: prices[(i + 1) % 3] for i in range(start + 7, start + count, 1000)},
        current_period_start=now - 3 * DAY,
        current_period_end=now + 27 * DAY,
    )
    return now + 27 * DAY


def test_seeded_subscriptions_are_retrieved_with_their_item_price_and_period(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    prices = _monthly_prices(emulator_client)
    period_end = _seed(admin, prices)
    customer = emulator_client.v1.customers.create(params={"name": "Made by hand"})
    by_hand = emulator_client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": prices[0]}]}
    )

    seeded = emulator_client.v1.subscriptions.retrieve("sub_stripe000000004")
    overridden = emulator_client.v1.subscriptions.retrieve("sub_stripe000001007")
    seeded_customer = emulator_client.v1.customers.retrieve("cus_scale000000004")

    assert set(seeded.to_dict()) == set(by_hand.to_dict())
    assert (seeded.status, seeded.customer, seeded.currency) == (
        "active",
        seeded_customer.id,
        "usd",
    )
    (item,) = seeded["items"].data
    assert set(item.to_dict()) == set(by_hand["items"].data[0].to_dict())
    assert (item.id, item.price.id, item.quantity) == ("si_scale000000004", prices[1], 1)
    assert item.current_period_end == period_end
    assert overridden["items"].data[0].price.id == prices[(1007 + 1) % 3]  # not prices[1007 % 3]
    assert seeded_customer.currency == "usd"
    assert set(seeded_customer.to_dict()) == set(customer.to_dict())


def test_paging_every_seeded_subscription_and_customer_lists_each_once_newest_first(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    _seed(admin, _monthly_prices(emulator_client))

    subscriptions = [
        subscription.id
        for subscription in emulator_client.v1.subscriptions.list(
            params={"status": "all", "limit": 100}
        ).auto_paging_iter()
    ]
    customers = [
        customer.id
        for customer in emulator_client.v1.customers.list(params={"limit": 100}).auto_paging_iter()
    ]

    assert subscriptions == [f"sub_stripe{i:09d}" for i in reversed(range(COUNT))]
    assert customers == [f"cus_scale{i:09d}" for i in reversed(range(COUNT))]


def test_a_bulk_seed_records_no_events_invoices_or_requests(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    prices = _monthly_prices(emulator_client)
    events_before = emulator_client.v1.events.list(params={"limit": 100}).data
    admin.clear_requests()

    _seed(admin, prices, 50)

    assert admin.requests() == []
    assert emulator_client.v1.events.list(params={"limit": 100}).data == events_before
    assert emulator_client.v1.invoices.list(params={"limit": 100}).data == []
    assert emulator_client.v1.subscriptions.retrieve("sub_stripe000000001").latest_invoice is None


def test_a_refused_bulk_seed_makes_nothing(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    prices = _monthly_prices(emulator_client)
    _seed(admin, prices, 10)

    with pytest.raises(EmulatorAdminError, match="cus_scale000000009, which exists"):
        _seed(admin, prices, 20, start=9)
    with pytest.raises(EmulatorAdminError, match="no price price_missing"):
        _seed(admin, ["price_missing"], 5, start=100)
    with pytest.raises(EmulatorAdminError, match="its own id"):
        admin.bulk_subscriptions(
            5, customer_id="cus_fixed", subscription_id="sub_x{i}", item_id="si_x{i}",
            prices=prices, current_period_start=admin.now(), current_period_end=admin.now() + DAY,
        )  # fmt: skip

    listed = emulator_client.v1.customers.list(params={"limit": 100}).data
    assert [customer.id for customer in listed] == [f"cus_scale{i:09d}" for i in range(9, -1, -1)]


def test_a_period_already_over_is_refused(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    prices = _monthly_prices(emulator_client)
    now = admin.now()

    with pytest.raises(EmulatorAdminError, match="after the emulator's now"):
        admin.bulk_subscriptions(
            5, customer_id="cus_old{i}", subscription_id="sub_old{i}", item_id="si_old{i}",
            prices=prices, current_period_start=now - 31 * DAY, current_period_end=now - DAY,
        )  # fmt: skip

"""The bulk seed (``POST /_emulator/bulk/subscriptions``): a benchmark's customers and their
subscriptions made directly in the store, then served like any others, with no history."""

from __future__ import annotations

from typing import Any

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin, EmulatorAdminError
from stripe_emulator.clock import add_interval

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


def _rows_seed(admin: EmulatorAdmin, prices: list[str], **fields: Any) -> dict[str, Any]:
    return admin.bulk_subscriptions(
        customer_id="cus_row{i:06d}", subscription_id="sub_row{i:06d}", item_id="si_row{i:06d}",
        prices=prices, **fields,
    )  # fmt: skip


def test_rows_make_each_subscription_with_its_status_period_and_price(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    prices = _monthly_prices(emulator_client)
    now = admin.now()
    rows = [
        {"i": 0},
        {"i": 1, "price": prices[2], "status": "past_due", "created": now - 200 * DAY,
         "current_period_start": now - 2 * DAY, "current_period_end": now + 28 * DAY},
        {"i": 2, "status": "canceled", "created": now - 90 * DAY,
         "current_period_start": now - 40 * DAY, "current_period_end": now - 10 * DAY},
        {"i": 3, "status": "canceled", "price": prices[0]},
        {"i": 7, "status": "active", "current_period_end": now + 5 * DAY},
    ]  # fmt: skip

    made = _rows_seed(
        admin, prices, rows=rows, current_period_start=now - DAY, current_period_end=now + 29 * DAY
    )

    assert made["first"] == ["cus_row000000", "sub_row000000"]
    assert made["last"] == ["cus_row000007", "sub_row000007"]
    got = {i: emulator_client.v1.subscriptions.retrieve(f"sub_row{i:06d}") for i in (0, 1, 2, 3, 7)}
    seen = [
        (s.id, s.status, s["items"].data[0].price.id, s["items"].data[0].current_period_start,
         s["items"].data[0].current_period_end, s.created)
        for s in got.values()
    ]  # fmt: skip
    assert seen == [
        ("sub_row000000", "active", prices[0], now - DAY, now + 29 * DAY, now),
        ("sub_row000001", "past_due", prices[2], now - 2 * DAY, now + 28 * DAY, now - 200 * DAY),
        ("sub_row000002", "canceled", prices[2], now - 40 * DAY, now - 10 * DAY, now - 90 * DAY),
        ("sub_row000003", "canceled", prices[0], now - DAY, now + 29 * DAY, now),
        ("sub_row000007", "active", prices[1], now - DAY, now + 5 * DAY, now),
    ]
    # past_due: as after a failed renewal payment (customer delinquent), with no invoice.
    assert emulator_client.v1.customers.retrieve("cus_row000001").delinquent is True
    assert emulator_client.v1.customers.retrieve("cus_row000000").delinquent is False
    assert got[1].latest_invoice is None
    assert (got[1].start_date, got[1].billing_mode.updated_at) == (now - 200 * DAY, now - 200 * DAY)
    # canceled: as the cancel path leaves it, ended at the period's end or now if earlier.
    assert (got[2].canceled_at, got[2].ended_at) == (now - 10 * DAY, now - 10 * DAY)
    assert (got[3].canceled_at, got[3].ended_at) == (now, now)
    assert got[3]["cancellation_details"]["reason"] == "cancellation_requested"
    assert (got[0].canceled_at, got[0].ended_at, got[0]["cancellation_details"]["reason"]) == (
        None,
        None,
        None,
    )
    by_hand = emulator_client.v1.subscriptions.create(
        params={
            "customer": emulator_client.v1.customers.create(params={}).id,
            "items": [{"price": prices[0]}],
        }
    )
    canceled_by_hand = emulator_client.v1.subscriptions.cancel(by_hand.id)
    assert set(got[3].to_dict()) == set(canceled_by_hand.to_dict())

    listed = emulator_client.v1.subscriptions.list(params={"status": "all", "limit": 100})
    assert [(s.id, s.status) for s in listed.data][1:] == [
        ("sub_row000007", "active"),
        ("sub_row000003", "canceled"),
        ("sub_row000002", "canceled"),
        ("sub_row000001", "past_due"),
        ("sub_row000000", "active"),
    ]
    default = emulator_client.v1.subscriptions.list(params={"limit": 100})
    assert [s.id for s in default.data] == ["sub_row000007", "sub_row000001", "sub_row000000"]


def test_rows_renew_but_the_canceled(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    prices = _monthly_prices(emulator_client)
    start = admin.now() - 27 * DAY
    end = add_interval(start, "month", 1)  # a monthly period, ending in 1 to 4 days
    rows = [{"i": 0}, {"i": 1, "status": "past_due"}, {"i": 2, "status": "canceled"}]
    _rows_seed(admin, prices, rows=rows, current_period_start=start, current_period_end=end)

    admin.advance_clock(5 * DAY)

    renewed = [emulator_client.v1.subscriptions.retrieve(f"sub_row{i:06d}") for i in range(3)]
    assert [s.status for s in renewed] == ["active", "active", "canceled"]  # past_due paid
    assert [s["items"].data[0].current_period_start for s in renewed] == [end, end, start]
    assert renewed[2].latest_invoice is None
    assert emulator_client.v1.customers.retrieve("cus_row000001").delinquent is False


@pytest.mark.parametrize(
    ("bad_row", "message"),
    [
        ({"i": 5, "price": "price_missing"}, "no price price_missing"),
        ({"i": 1}, "i=1 more than once"),
        ({"i": 5, "status": "unpaid"}, "`status` must be one of"),
        ({"i": 5, "current_period_start": 1, "current_period_end": 2}, "after the emulator's now"),
        ({"i": 5, "current_period_starts": 1}, "must be an object of"),
        ({"i": "5"}, "needs `i`"),
    ],
)
def test_a_bad_row_makes_nothing(
    emulator_client: stripe.StripeClient,
    admin: EmulatorAdmin,
    bad_row: dict[str, object],
    message: str,
) -> None:
    prices = _monthly_prices(emulator_client)
    now = admin.now()
    period = {"current_period_start": now - DAY, "current_period_end": now + 29 * DAY}

    with pytest.raises(EmulatorAdminError, match=message):
        _rows_seed(admin, prices, rows=[*({"i": i} for i in range(4)), bad_row], **period)

    assert emulator_client.v1.customers.list(params={"limit": 10}).data == []
    assert emulator_client.v1.subscriptions.list(params={"status": "all"}).data == []


def test_a_row_whose_ids_exist_makes_nothing(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    prices = _monthly_prices(emulator_client)
    now = admin.now()
    period = {"current_period_start": now - DAY, "current_period_end": now + 29 * DAY}
    _rows_seed(admin, prices, rows=[{"i": 3}], **period)

    with pytest.raises(EmulatorAdminError, match="cus_row000003, which exists"):
        _rows_seed(admin, prices, rows=[{"i": 2}, {"i": 3}, {"i": 4}], **period)

    listed = emulator_client.v1.customers.list(params={"limit": 10}).data
    assert [customer.id for customer in listed] == ["cus_row000003"]


def test_count_and_rows_together_or_neither_are_refused(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    prices = _monthly_prices(emulator_client)
    now = admin.now()
    period = {"current_period_start": now - DAY, "current_period_end": now + 29 * DAY}

    with pytest.raises(EmulatorAdminError, match="one of `count`"):
        _rows_seed(admin, prices, count=2, rows=[{"i": 0}], **period)
    with pytest.raises(EmulatorAdminError, match="one of `count`"):
        _rows_seed(admin, prices, **period)
    with pytest.raises(EmulatorAdminError, match="go with `count`"):
        _rows_seed(admin, prices, rows=[{"i": 0}], start=4, **period)

    assert emulator_client.v1.customers.list(params={"limit": 10}).data == []

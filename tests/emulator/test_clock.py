"""Emulator time and the subscription lifecycle it drives."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin, EmulatorAdminError
from stripe_emulator.clock import add_interval

pytestmark = pytest.mark.emulator_only

DAY = 86_400


def ts(year: int, month: int, day: int, hour: int = 0) -> int:
    return int(datetime(year, month, day, hour, tzinfo=UTC).timestamp())


def _subscribe(
    client: stripe.StripeClient,
    *,
    interval: str = "month",
    interval_count: int = 1,
    **params: object,
) -> stripe.Subscription:
    customer = client.v1.customers.create(params={"name": "Clocked"})
    price = client.v1.prices.create(
        params={
            "currency": "usd",
            "unit_amount": 1000,
            "product_data": {"name": "Plan"},
            "recurring": {"interval": interval, "interval_count": interval_count},
        }
    )
    return client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}], **params}  # type: ignore[arg-type]
    )


def _period(client: stripe.StripeClient, subscription_id: str) -> tuple[int, int]:
    item = client.v1.subscriptions.retrieve(subscription_id)["items"].data[0]
    return item.current_period_start, item.current_period_end


@pytest.mark.parametrize(
    ("anchor", "interval", "count", "expected"),
    [
        (ts(2027, 1, 31, 10), "month", 1, ts(2027, 2, 28, 10)),
        (ts(2028, 1, 31, 10), "month", 1, ts(2028, 2, 29, 10)),  # leap year
        (ts(2027, 1, 31, 10), "month", 2, ts(2027, 3, 31, 10)),  # from the anchor, no drift
        (ts(2027, 1, 31, 10), "month", 3, ts(2027, 4, 30, 10)),
        (ts(2027, 11, 15), "month", 3, ts(2028, 2, 15)),
        (ts(2028, 2, 29), "year", 1, ts(2029, 2, 28)),
        (ts(2027, 5, 1), "week", 2, ts(2027, 5, 15)),
        (ts(2027, 5, 1), "day", 45, ts(2027, 6, 15)),
    ],
)
def test_period_arithmetic_follows_stripes_month_end_rule(
    anchor: int, interval: str, count: int, expected: int
) -> None:
    assert add_interval(anchor, interval, count) == expected


def test_emulator_time_starts_at_real_time_and_moves_forward(admin: EmulatorAdmin) -> None:
    start = admin.now()

    advanced = admin.advance_clock("2d")
    jumped = admin.set_time(advanced + 3600)

    assert abs(start - datetime.now(UTC).timestamp()) < 5
    assert advanced - start in (2 * DAY, 2 * DAY + 1)
    assert jumped == advanced + 3600


def test_the_clock_never_moves_backwards(admin: EmulatorAdmin) -> None:
    with pytest.raises(EmulatorAdminError):
        admin.set_time(admin.now() - 3600)
    with pytest.raises(EmulatorAdminError):
        admin.advance_clock(-1)


def test_created_timestamps_come_from_the_emulator_clock(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    target = ts(2031, 6, 1, 12)
    admin.set_time(target)

    customer = emulator_client.v1.customers.create()

    assert target <= customer.created <= target + 2


def test_a_subscription_rolls_over_to_the_next_period_when_time_passes_its_end(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.set_time(ts(2031, 1, 31, 9))
    subscription = _subscribe(emulator_client)
    start, end = _period(emulator_client, subscription.id)

    admin.set_time(end + 60)
    rolled = _period(emulator_client, subscription.id)

    assert end == ts(2031, 2, 28, 9)
    assert rolled == (ts(2031, 2, 28, 9), ts(2031, 3, 31, 9))
    assert emulator_client.v1.subscriptions.retrieve(subscription.id).status == "active"
    assert start == subscription.billing_cycle_anchor


def test_a_long_jump_rolls_over_every_period_in_between(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.set_time(ts(2031, 1, 31, 9))
    subscription = _subscribe(emulator_client)

    admin.set_time(ts(2031, 7, 15))

    assert _period(emulator_client, subscription.id) == (ts(2031, 6, 30, 9), ts(2031, 7, 31, 9))


def test_a_multi_week_interval_rolls_by_its_interval_count(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscribe(emulator_client, interval="week", interval_count=2)
    start, end = _period(emulator_client, subscription.id)

    admin.advance_clock(end - admin.now() + 1)

    assert end - start == 14 * DAY
    assert _period(emulator_client, subscription.id) == (end, end + 14 * DAY)


def test_cancel_at_period_end_cancels_at_the_period_end_instead_of_renewing(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscribe(emulator_client)
    _, end = _period(emulator_client, subscription.id)
    emulator_client.v1.subscriptions.update(subscription.id, params={"cancel_at_period_end": True})

    admin.advance_clock(end - admin.now() - 60)
    before = emulator_client.v1.subscriptions.retrieve(subscription.id)
    admin.advance_clock("2m")
    after = emulator_client.v1.subscriptions.retrieve(subscription.id)

    assert before.status == "active"
    assert after.status == "canceled"
    assert after.ended_at == end
    assert after.cancellation_details is not None
    assert after.cancellation_details.reason == "cancellation_requested"
    assert _period(emulator_client, subscription.id)[1] == end  # no renewal
    assert emulator_client.v1.subscriptions.list().data == []


def test_a_trial_turns_active_when_it_ends_and_bills_from_the_trial_end(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscribe(emulator_client, trial_period_days=7)
    trial_end = subscription.trial_end
    assert subscription.status == "trialing"
    assert trial_end is not None

    admin.advance_clock("7d1m")
    current = emulator_client.v1.subscriptions.retrieve(subscription.id)

    assert current.status == "active"
    assert current.billing_cycle_anchor == trial_end
    assert _period(emulator_client, subscription.id) == (
        trial_end,
        add_interval(trial_end, "month", 1),
    )


def test_changing_to_a_price_with_another_interval_restarts_the_cycle_now(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscribe(emulator_client)
    item = subscription["items"].data[0]
    admin.advance_clock("10d")
    yearly = emulator_client.v1.prices.create(
        params={"currency": "usd", "unit_amount": 9000, "product_data": {"name": "Yearly"},
                "recurring": {"interval": "year"}}
    )  # fmt: skip
    now = admin.now()

    updated = emulator_client.v1.subscriptions.update(
        subscription.id,
        params={"items": [{"id": item.id, "price": yearly.id}], "proration_behavior": "none"},
    )

    start, end = _period(emulator_client, subscription.id)
    assert now <= updated.billing_cycle_anchor <= now + 2
    assert start == updated.billing_cycle_anchor
    assert end == add_interval(start, "year", 1)


def test_a_subscription_without_a_trial_is_active_at_once(
    emulator_client: stripe.StripeClient,
) -> None:
    # Real Stripe would leave it incomplete without a payment method; the emulator has none and
    # its charges succeed unless told otherwise.
    subscription = _subscribe(emulator_client)

    assert subscription.status == "active"
    assert subscription.trial_end is None


def test_the_first_subscription_fixes_the_customers_currency(
    emulator_client: stripe.StripeClient,
) -> None:
    subscription = _subscribe(emulator_client)

    customer = emulator_client.v1.customers.retrieve(str(subscription.customer))

    assert customer.currency == "usd"

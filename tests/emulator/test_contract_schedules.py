"""Subscription schedules: phases that take over a subscription's items as time passes.

A schedule manages a subscription through ``phases``, each with its items, one after the other;
when a phase ends the next one's items replace the subscription's, and after the last one
``end_behavior`` releases the subscription (it goes on as it is) or cancels it
(https://docs.stripe.com/billing/subscriptions/subscription-schedules). The Dashboard attaches
one to an existing subscription with ``from_subscription``: one phase over the current period
with the subscription's items (https://docs.stripe.com/api/subscription_schedules/create).
Releasing detaches it and leaves the subscription in place
(https://docs.stripe.com/api/subscription_schedules/release); canceling cancels the
subscription too (https://docs.stripe.com/api/subscription_schedules/cancel). While a schedule
manages a subscription, its cancellation is the schedule's to change, but its items can still
be updated directly: the next phase overrides them at its start.
"""

from __future__ import annotations

from typing import Any

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.billing_support import (
    AFTER_RENEWAL,
    is_proration,
    item_of,
    latest_invoice,
    monthly,
    move_to,
    period,
    price_of,
    schedule_from,
    subscribe,
    then_phase,
)
from tests.emulator.support import StripeTarget


def _renewal_prices(target: StripeTarget, customer_id: str, subscription_id: str) -> list[str]:
    """The prices the renewal at the current period's end bills (its period lines)."""
    _, end = period(target, subscription_id)
    move_to(target, customer_id, end + AFTER_RENEWAL)
    renewal = latest_invoice(target, subscription_id)
    assert renewal.billing_reason == "subscription_cycle"
    return [price_of(line) for line in renewal.lines.data if not is_proration(line)]


def test_a_schedule_made_from_a_subscription_shows_on_it_and_holds_one_phase_of_its_current_period(
    stripe_target: StripeTarget,
) -> None:
    price = monthly(stripe_target, 1000)
    customer, subscription = subscribe(stripe_target, price, quantity=2)

    schedule = schedule_from(stripe_target, subscription)
    shown = stripe_target.client.v1.subscriptions.retrieve(
        subscription.id, params={"expand": ["schedule"]}
    )

    start, end = period(stripe_target, subscription.id)
    assert schedule.id.startswith("sub_sched_")
    assert (schedule.status, schedule.end_behavior) == ("active", "release")
    assert (schedule.subscription, schedule.customer) == (subscription.id, customer.id)
    assert len(schedule.phases) == 1
    only = schedule.phases[0]
    assert (only.start_date, only.end_date) == (start, end)
    assert [(entry.price, entry.quantity) for entry in only["items"]] == [(price.id, 2)]
    assert schedule.current_phase is not None
    assert (schedule.current_phase.start_date, schedule.current_phase.end_date) == (start, end)
    assert isinstance(shown.schedule, stripe.SubscriptionSchedule)
    assert shown.schedule.id == schedule.id
    assert stripe_target.client.v1.subscriptions.retrieve(subscription.id).schedule == schedule.id


def test_a_price_set_on_the_subscription_directly_is_overridden_by_the_schedules_next_phase_at_the_periods_end(  # noqa: E501
    stripe_target: StripeTarget,
) -> None:
    customer, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    scheduled = monthly(stripe_target, 2000)
    direct = monthly(stripe_target, 3000)
    schedule = then_phase(stripe_target, schedule_from(stripe_target, subscription), scheduled)
    _, end = period(stripe_target, subscription.id)

    stripe_target.client.v1.subscriptions.update(
        subscription.id,
        params={
            "items": [{"id": item_of(subscription).id, "price": direct.id}],
            "proration_behavior": "none",
        },
    )
    billed = _renewal_prices(stripe_target, customer.id, subscription.id)

    after = stripe_target.client.v1.subscriptions.retrieve(subscription.id)
    moved = stripe_target.client.v1.subscription_schedules.retrieve(schedule.id)
    assert billed == [scheduled.id]
    assert [entry.price.id for entry in after["items"].data] == [scheduled.id]
    assert after.schedule == schedule.id
    assert moved.current_phase is not None
    assert moved.current_phase.start_date == end


def test_releasing_a_schedule_leaves_the_subscription_on_its_items_with_no_schedule(
    stripe_target: StripeTarget,
) -> None:
    price = monthly(stripe_target, 1000)
    customer, subscription = subscribe(stripe_target, price)
    schedule = then_phase(
        stripe_target, schedule_from(stripe_target, subscription), monthly(stripe_target, 2000)
    )

    released = stripe_target.client.v1.subscription_schedules.release(schedule.id)
    after = stripe_target.client.v1.subscriptions.retrieve(subscription.id)
    billed = _renewal_prices(stripe_target, customer.id, subscription.id)

    assert released.status == "released"
    assert released.released_at is not None
    assert (released.released_subscription, released.subscription) == (subscription.id, None)
    assert after.schedule is None
    assert (after.status, after.cancel_at) == ("active", None)
    assert [entry.price.id for entry in after["items"].data] == [price.id]
    assert billed == [price.id]


def test_a_schedule_that_ends_with_cancel_cancels_the_subscription_at_its_end(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    schedule = schedule_from(stripe_target, subscription)
    _, end = period(stripe_target, subscription.id)

    stripe_target.client.v1.subscription_schedules.update(
        schedule.id, params={"end_behavior": "cancel"}
    )
    ending = stripe_target.client.v1.subscriptions.retrieve(subscription.id)
    move_to(stripe_target, customer.id, end + AFTER_RENEWAL)
    ended = stripe_target.client.v1.subscriptions.retrieve(subscription.id)
    finished = stripe_target.client.v1.subscription_schedules.retrieve(schedule.id)

    assert (ending.status, ending.cancel_at) == ("active", end)
    assert (ended.status, ended.ended_at) == ("canceled", end)
    assert finished.status != "active"
    assert finished.current_phase is None


def test_a_subscription_on_a_schedule_refuses_a_second_schedule(
    stripe_target: StripeTarget,
) -> None:
    _, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    first = schedule_from(stripe_target, subscription)

    with pytest.raises(stripe.InvalidRequestError) as refused:
        schedule_from(stripe_target, subscription)

    assert refused.value.http_status == 400
    assert stripe_target.client.v1.subscriptions.retrieve(subscription.id).schedule == first.id


def test_a_subscription_on_a_schedule_refuses_a_direct_cancellation_naming_the_schedule(
    stripe_target: StripeTarget,
) -> None:
    _, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    schedule = schedule_from(stripe_target, subscription)

    with pytest.raises(stripe.InvalidRequestError) as refused:
        stripe_target.client.v1.subscriptions.update(
            subscription.id, params={"cancel_at_period_end": True}
        )

    assert schedule.id in str(refused.value.user_message)
    after = stripe_target.client.v1.subscriptions.retrieve(subscription.id)
    assert (after.cancel_at_period_end, after.cancel_at) == (False, None)


def test_a_canceled_schedule_cancels_its_subscription(stripe_target: StripeTarget) -> None:
    _, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    schedule = schedule_from(stripe_target, subscription)

    canceled = stripe_target.client.v1.subscription_schedules.cancel(schedule.id)
    after = stripe_target.client.v1.subscriptions.retrieve(subscription.id)

    assert canceled.status == "canceled"
    assert canceled.canceled_at is not None
    assert after.status == "canceled"


def test_a_schedule_with_phases_starts_a_subscription_on_its_first_phase_then_bills_the_next(
    stripe_target: StripeTarget,
) -> None:
    first, second = monthly(stripe_target, 1000), monthly(stripe_target, 2000)
    customer = stripe_target.billing_customer(name="Scheduled")
    month: dict[str, Any] = {"interval": "month", "interval_count": 1}

    schedule = stripe_target.client.v1.subscription_schedules.create(
        params={  # type: ignore[arg-type]
            "customer": customer.id,
            "start_date": "now",
            "phases": [
                {"items": [{"price": first.id, "quantity": 1}], "duration": month},
                {"items": [{"price": second.id, "quantity": 1}], "duration": month},
            ],
        }
    )
    subscription_id = schedule.subscription
    assert isinstance(subscription_id, str)
    created = latest_invoice(stripe_target, subscription_id)
    billed = _renewal_prices(stripe_target, customer.id, subscription_id)

    assert schedule.status == "active"
    assert len(schedule.phases) == 2
    assert schedule.phases[0].end_date == schedule.phases[1].start_date
    assert created.billing_reason == "subscription_create"
    assert [price_of(line) for line in created.lines.data] == [first.id]
    assert billed == [second.id]

"""Trials moved or ended by an update, and subscriptions that end at ``cancel_at``."""

from __future__ import annotations

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.billing_support import (
    AFTER_RENEWAL,
    DAY,
    HOUR,
    invoices,
    latest_invoice,
    monthly,
    move_to,
    period,
    subscribe,
)
from tests.emulator.support import StripeTarget


def test_extending_a_trial_moves_the_period_end_and_the_first_renewal(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription = subscribe(
        stripe_target, monthly(stripe_target, 1000), trial_period_days=7
    )
    trial_end = subscription.trial_end
    assert trial_end is not None
    extended = trial_end + 7 * DAY

    updated = stripe_target.client.v1.subscriptions.update(
        subscription.id, params={"trial_end": extended, "proration_behavior": "none"}
    )
    move_to(stripe_target, customer.id, trial_end + AFTER_RENEWAL)
    still_trialing = stripe_target.client.v1.subscriptions.retrieve(subscription.id)
    invoiced_during_trial = len(invoices(stripe_target, subscription.id))
    move_to(stripe_target, customer.id, extended + AFTER_RENEWAL)
    active = stripe_target.client.v1.subscriptions.retrieve(subscription.id)
    first = latest_invoice(stripe_target, subscription.id)

    assert updated.trial_end == extended
    assert period(stripe_target, subscription.id)[0] == extended
    assert updated["items"].data[0].current_period_end == extended
    assert still_trialing.status == "trialing"
    assert invoiced_during_trial == 1  # the trial's 0 invoice only
    assert active.status == "active"
    assert active.billing_cycle_anchor == extended
    assert first.billing_reason == "subscription_cycle"
    assert [(line.amount, line.period.start) for line in first.lines.data] == [(1000, extended)]


def test_ending_a_trial_now_starts_and_invoices_the_first_paid_period(
    stripe_target: StripeTarget,
) -> None:
    customer, subscription = subscribe(
        stripe_target, monthly(stripe_target, 1000), trial_period_days=14
    )
    move_to(stripe_target, customer.id, stripe_target.now(customer.id) + 3 * DAY)

    ended = stripe_target.client.v1.subscriptions.update(
        subscription.id, params={"trial_end": "now"}
    )

    invoice = latest_invoice(stripe_target, subscription.id)
    start, end = period(stripe_target, subscription.id)
    assert ended.status == "active"
    assert ended.billing_cycle_anchor == start
    assert end - start >= 28 * DAY
    assert invoice.status == "paid"
    assert [line.amount for line in invoice.lines.data] == [1000]


def test_a_subscription_ends_at_its_cancel_at(stripe_target: StripeTarget) -> None:
    customer, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    cancel_at = stripe_target.now(customer.id) + 10 * DAY

    scheduled = stripe_target.client.v1.subscriptions.update(
        subscription.id, params={"cancel_at": cancel_at, "proration_behavior": "none"}
    )
    move_to(stripe_target, customer.id, cancel_at - HOUR)
    before = stripe_target.client.v1.subscriptions.retrieve(subscription.id)
    move_to(stripe_target, customer.id, cancel_at + HOUR)
    after = stripe_target.client.v1.subscriptions.retrieve(subscription.id)

    assert scheduled.cancel_at == cancel_at
    assert scheduled.cancel_at_period_end is False
    assert before.status == "active"
    assert after.status == "canceled"
    assert after.ended_at == cancel_at
    assert after.cancellation_details is not None
    assert after.cancellation_details.reason == "cancellation_requested"


def test_an_empty_cancel_at_unsets_it(stripe_target: StripeTarget) -> None:
    customer, subscription = subscribe(stripe_target, monthly(stripe_target, 1000))
    cancel_at = stripe_target.now(customer.id) + 10 * DAY
    stripe_target.client.v1.subscriptions.update(
        subscription.id, params={"cancel_at": cancel_at, "proration_behavior": "none"}
    )

    unset = stripe_target.client.v1.subscriptions.update(subscription.id, params={"cancel_at": ""})

    assert unset.cancel_at is None
    assert unset["items"].data[0].current_period_end > cancel_at


def test_a_trial_end_in_the_past_is_refused_naming_it(stripe_target: StripeTarget) -> None:
    customer, subscription = subscribe(
        stripe_target, monthly(stripe_target, 1000), trial_period_days=7
    )

    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.client.v1.subscriptions.update(
            subscription.id, params={"trial_end": stripe_target.now(customer.id) - DAY}
        )

    assert raised.value.http_status == 400
    assert raised.value.param == "trial_end"

"""The independent checker's reading of Stripe's ledger (``tests/support/ledger.py``), on the
emulator through the real SDK: a replay is not a second customer, a write whose answer was lost
after Stripe acted is one, and a period's net counts its prorations."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin
from tests.emulator.billing_support import item_of, monthly, subscribe
from tests.emulator.support import StripeTarget, unique
from tests.support.checker import PriceSpan, expected_net
from tests.support.ledger import billed_periods, executed_effects

ON_THE_EMULATOR = pytest.mark.parametrize("stripe_target", ["emulator"], indirect=True)
"""The ledger is the emulator's request log: there is no such log of real Stripe's."""


@ON_THE_EMULATOR
def test_a_replayed_customer_is_one_effect_and_one_answered_after_a_drop_is_one_more(
    stripe_target: StripeTarget, admin: EmulatorAdmin
) -> None:
    client = stripe_target.client
    key = unique("key")
    for _ in range(2):  # the second is a replay of the first
        client.v1.customers.create(
            params={"metadata": {"org_id": "org_a"}}, options={"idempotency_key": key}
        )
    admin.add_fault("drop", "POST /v1/customers", after_execution=True, count=1)
    with pytest.raises(stripe.APIConnectionError):  # the answer lost; the customer made
        client.v1.customers.create(params={"metadata": {"org_id": "org_b"}})

    assert sorted(executed_effects(admin)) == [("customer", "org_a"), ("customer", "org_b")]


@ON_THE_EMULATOR
def test_a_period_with_a_change_made_in_it_nets_its_price_and_stripes_prorations(
    stripe_target: StripeTarget, admin: EmulatorAdmin
) -> None:
    starter, team = monthly(stripe_target, 900), monthly(stripe_target, 2900)
    _, subscription = subscribe(stripe_target, starter)
    start, end, changed_at = change_price(
        stripe_target, subscription, team.id, "always_invoice", 3, key="chg_1:apply"
    )

    [period] = billed_periods(stripe_target.client, subscription.id)
    when = [datetime.fromtimestamp(moment, UTC) for moment in (start, end, changed_at)]
    assert (period.start, period.end) == (when[0], when[1])
    assert period.net == expected_net(
        when[0], when[1], [PriceSpan(when[0], 900), PriceSpan(when[2], 2900)]
    )
    assert ("subscription_write", "chg_1:apply") in executed_effects(admin)


@ON_THE_EMULATOR
def test_a_downgrade_s_credit_held_for_the_next_invoice_counts_in_its_period(
    stripe_target: StripeTarget,
) -> None:
    """A change made with ``create_prorations`` (our downgrades) leaves its prorations
    pending until the next invoice: the period it was made in is billed them all the same."""
    team, starter = monthly(stripe_target, 2900), monthly(stripe_target, 900)
    _, subscription = subscribe(stripe_target, team)
    start, end, changed_at = change_price(
        stripe_target, subscription, starter.id, "create_prorations", 2
    )

    [period] = billed_periods(stripe_target.client, subscription.id)
    when = [datetime.fromtimestamp(moment, UTC) for moment in (start, end, changed_at)]
    assert period.net == expected_net(
        when[0], when[1], [PriceSpan(when[0], 2900), PriceSpan(when[2], 900)]
    )
    assert period.net < 2900


def change_price(
    stripe_target: StripeTarget,
    subscription: stripe.Subscription,
    price_id: str,
    proration_behavior: str,
    into_the_period: int,
    key: str | None = None,
) -> tuple[int, int, int]:
    """Change the subscription's price at ``1/into_the_period`` of its current period;
    returns the period's start and end and the moment of the change."""
    item = item_of(subscription)
    start, end = item.current_period_start, item.current_period_end
    changed_at = start + (end - start) // into_the_period
    stripe_target.client.v1.subscriptions.update(
        subscription.id,
        params={
            "items": [{"id": item.id, "price": price_id}],
            "proration_behavior": proration_behavior,
            "proration_date": changed_at,
        },
        options={"idempotency_key": key} if key else {},
    )
    return start, end, changed_at

"""Money off at Stripe, on real parts (the Stripe emulator through the real SDK; SQLite and
PostgreSQL): a coupon redeemed on one of our subscriptions is kept on the row by the sync,
counted by beat's gauge and named by ``billing-worker stripe drift`` with the money Stripe
billed; a credit note on a renewal is named with what the period cost (issue 44)."""

from __future__ import annotations

from domain.subscriptions.subscription import SubscriptionTerms
from tests.support.drift_world import DRIFT_FOUND, World, discounted, resync


def test_a_coupon_applied_at_stripe_is_kept_counted_and_reported_with_what_stripe_billed(
    world: World,
) -> None:
    account = world.registered_account()
    team = world.plan("team", 2000)
    subscription = world.subscribe(account, team, terms=SubscriptionTerms(days_until_due=365))
    coupon = world.sdk.v1.coupons.create(
        params={"percent_off": 25, "duration": "forever", "name": "Goodwill"}
    )
    world.sdk.v1.subscriptions.update(  # someone, in Stripe's dashboard
        subscription.provider_id, params={"discounts": [{"coupon": str(coupon.id)}]}
    )
    unread = discounted(world)

    resync(world, subscription.provider_id)  # a webhook, the sweep or `stripe sync`
    row = world.subscription(subscription.id)
    counted = discounted(world)
    world.admin.advance_clock(31 * 86_400)  # the renewal takes the coupon's share
    report = world.drift("--json")

    assert (unread, counted) == (0, 1)
    assert row is not None
    assert row.billed_discount == f'25 % off, forever (coupon {coupon.id} "Goodwill")'
    [renewal] = [
        invoice
        for invoice in world.sdk.v1.invoices.list(
            params={"subscription": subscription.provider_id, "limit": 10}
        ).data
        if invoice.billing_reason == "subscription_cycle"
    ]
    assert (renewal.subtotal, renewal.total) == (2000, 1500)  # what Stripe billed
    assert report.status == DRIFT_FOUND, report.stderr
    [finding] = report.findings()
    assert finding["kind"] == "discount_at_stripe"
    assert finding["subscription_id"] == subscription.id
    assert f"plan {team.name}'s 20.00 USD is billed 15.00 USD" in finding["description"]
    assert (
        f"(invoice {renewal.id}) billed 15.00 USD after 5.00 USD of discounts"
        in (finding["description"])
    )
    assert (finding["stripe_bills"]["amount"], finding["we_bill"]["amount"]) == (1500, 2000)


def test_a_coupon_removed_at_stripe_leaves_the_row_the_gauge_and_the_report(
    world: World,
) -> None:
    account = world.registered_account()
    subscription = world.subscribe(
        account, world.plan("team", 2000), terms=SubscriptionTerms(days_until_due=365)
    )
    coupon = world.sdk.v1.coupons.create(
        params={"amount_off": 500, "currency": "usd", "duration": "forever"}
    )
    world.sdk.v1.subscriptions.update(
        subscription.provider_id, params={"discounts": [{"coupon": str(coupon.id)}]}
    )
    resync(world, subscription.provider_id)
    counted = discounted(world)
    reported = world.drift("--json").findings()

    world.sdk.v1.subscriptions.update(subscription.provider_id, params={"discounts": ""})
    resync(world, subscription.provider_id)
    row = world.subscription(subscription.id)
    after = world.drift("--json")

    assert counted == 1
    assert [finding["kind"] for finding in reported] == ["discount_at_stripe"]
    assert "5.00 USD off, forever" in reported[0]["description"]
    assert "is billed 15.00 USD" in reported[0]["description"]
    assert row is not None
    assert row.billed_discount is None
    assert discounted(world) == 0
    assert (after.status, after.findings()) == (0, []), after.stderr


def test_a_credit_note_on_a_renewal_is_reported_with_what_the_period_cost(world: World) -> None:
    account = world.registered_account()
    subscription = world.subscribe(
        account, world.plan("team", 2000), terms=SubscriptionTerms(days_until_due=365)
    )
    world.admin.advance_clock(31 * 86_400)
    [renewal] = [
        invoice
        for invoice in world.sdk.v1.invoices.list(
            params={"subscription": subscription.provider_id, "limit": 10}
        ).data
        if invoice.billing_reason == "subscription_cycle"
    ]
    world.sdk.v1.credit_notes.create(  # someone, in Stripe's dashboard
        params={"invoice": str(renewal.id), "amount": 500, "reason": "product_unsatisfactory"}
    )

    report = world.drift("--json")
    [shown] = [
        invoice
        for invoice in world.services.billing_provider().list_invoices(subscription.provider_id, 10)
        if invoice.id == renewal.id
    ]

    assert report.status == DRIFT_FOUND, report.stderr
    [finding] = report.findings()
    assert finding["kind"] == "credited_at_stripe"
    assert finding["description"].endswith(
        f"(invoice {renewal.id}) gave back 5.00 USD: the period cost 15.00 USD"
    )
    assert (shown.total, shown.credited) == (2000, 500)

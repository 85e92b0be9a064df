"""Webhook delivery to a real receiver in the test process: every signature is checked with the
SDK's own ``stripe.Webhook.construct_event``."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin, EmulatorAdminError
from tests.emulator.support import EMULATOR_KEY, EmulatorProcess, free_port
from tests.emulator.webhook_support import Hook, Receiver, register

pytestmark = pytest.mark.emulator_only

DAY = 86_400
HOUR = 3600


def _subscription(client: stripe.StripeClient, **params: Any) -> stripe.Subscription:
    customer = client.v1.customers.create(params={"name": "Hooked"})
    price = client.v1.prices.create(
        params={"currency": "usd", "unit_amount": 1000, "product_data": {"name": "Plan"},
                "recurring": {"interval": "month"}}
    )  # fmt: skip
    return client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}], **params}  # type: ignore[arg-type]
    )


def test_every_delivery_is_signed_as_stripe_signs_and_the_sdk_accepts_it(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    _subscription(emulator_client)

    received = hook.settle()
    events = list(hook.events())

    assert [event.type for event in events] == [
        "customer.created",
        "product.created",
        "price.created",
        "customer.subscription.created",
        "customer.updated",
        "invoice.created",
        "invoice.finalized",
        "invoice.paid",
        "invoice.payment_succeeded",
    ]
    for delivery in received:
        assert delivery.headers["content-type"] == "application/json; charset=utf-8"
        assert delivery.headers["user-agent"] == "Stripe/1.0 (+https://stripe.com/docs/webhooks)"
        assert delivery.path == "/webhooks"
    with pytest.raises(stripe.SignatureVerificationError):
        received[0].verified("whsec_not_the_secret")


def test_the_body_is_the_event_exactly_as_the_api_renders_it(
    hook: Hook, emulator: EmulatorProcess, emulator_client: stripe.StripeClient
) -> None:
    hook.admin.pause_deliveries()
    emulator_client.v1.customers.create(params={"name": "Exact"})
    event_id = emulator_client.v1.events.list().data[0].id
    served = httpx.get(
        f"{emulator.url}/v1/events/{event_id}",
        headers={"Authorization": f"Bearer {EMULATOR_KEY}"},
    ).content

    hook.admin.resume_deliveries()
    (delivery,) = hook.settle()

    assert delivery.body == served
    assert delivery.payload["pending_webhooks"] == 1
    assert emulator_client.v1.events.retrieve(event_id).pending_webhooks == 0


def test_a_customer_update_delivers_customer_updated_with_previous_attributes(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    customer = emulator_client.v1.customers.create(params={"email": "old@example.com"})

    emulator_client.v1.customers.update(customer.id, params={"email": "new@example.com"})
    hook.settle()
    (updated,) = [event for event in hook.events() if event.type == "customer.updated"]

    assert updated.data.object.email == "new@example.com"
    assert updated.data.to_dict()["previous_attributes"] == {"email": "old@example.com"}


def test_a_clock_advance_over_a_renewal_delivers_the_new_period_and_its_invoice(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    subscription = _subscription(emulator_client)
    old = subscription["items"].data[0]
    hook.settle()
    hook.receiver.received.clear()

    hook.admin.set_time(old.current_period_end + 60)
    hook.settle()
    at_renewal = [event.type for event in hook.events()]
    # With webhook endpoints, Stripe keeps a renewal invoice a draft for about an hour.
    hook.admin.set_time(old.current_period_end + HOUR + 60)
    hook.settle()
    events = list(hook.events())

    assert at_renewal == ["customer.subscription.updated", "invoice.created"]
    assert [event.type for event in events] == [
        "customer.subscription.updated",
        "invoice.created",
        "invoice.finalized",
        "invoice.paid",
        "invoice.payment_succeeded",
    ]
    assert events[2].data.object.status_transitions.finalized_at == old.current_period_end + HOUR
    renewed = events[0].data.object["items"].data[0]
    previous = events[0].data.to_dict()["previous_attributes"]["items"]["data"][0]
    assert (renewed.current_period_start, renewed.current_period_end) == (
        old.current_period_end,
        emulator_client.v1.subscription_items.retrieve(old.id).current_period_end,
    )
    assert previous["current_period_end"] == old.current_period_end
    assert events[1].data.object.status == "draft"
    assert events[3].data.object.status == "paid"
    assert all(event.request is not None and event.request.id is None for event in events)


def test_failing_payments_deliver_payment_failed_and_the_subscription_past_due(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    subscription = _subscription(emulator_client)
    hook.admin.fail_payments(str(subscription.customer))
    renewal = subscription["items"].data[0].current_period_end
    hook.admin.set_time(renewal + 60)
    hook.settle()
    during_the_draft_hour = emulator_client.v1.subscriptions.retrieve(subscription.id).status

    hook.admin.set_time(renewal + HOUR + 60)
    hook.settle()
    by_type = {event.type: event for event in hook.events()}

    assert by_type["invoice.payment_failed"].data.object.status == "open"
    assert by_type["invoice.payment_failed"].data.object.attempt_count == 1
    past_due = [
        event
        for event in hook.events()
        if event.type == "customer.subscription.updated" and event.data.object.status == "past_due"
    ]
    assert during_the_draft_hour == "active"
    assert len(past_due) == 1
    assert past_due[0].data.to_dict()["previous_attributes"]["status"] == "active"


def test_deleting_a_customer_delivers_its_subscriptions_deleted_and_customer_deleted(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    subscription = _subscription(emulator_client)

    emulator_client.v1.customers.delete(str(subscription.customer))
    hook.settle()
    types = [event.type for event in hook.events()]

    assert types[-2:] == ["customer.subscription.deleted", "customer.deleted"]


def test_a_receiver_answering_500_twice_gets_the_same_event_a_third_time(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    hook.receiver.answer(500, 500)

    emulator_client.v1.customers.create(params={"name": "Retried"})
    received = hook.settle()
    attempts = hook.admin.deliveries(event=received[0].event_id)
    event = emulator_client.v1.events.retrieve(received[0].event_id)

    assert len(received) == 3
    assert len({delivery.event_id for delivery in received}) == 1
    assert received[0].body == received[1].body == received[2].body
    assert [(a.attempt, a.status, a.outcome) for a in attempts] == [
        (1, 500, "failed"),
        (2, 500, "failed"),
        (3, 200, "succeeded"),
    ]
    assert attempts[0].next_retry_at is not None
    assert attempts[1].started_at - attempts[0].finished_at >= 0.15  # the 0.2 s backoff
    assert event.pending_webhooks == 0
    for delivery in received:
        delivery.verified(hook.secret)


def test_a_delivery_that_keeps_failing_is_given_up_and_stays_pending(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    hook.receiver.answer(500, 503, 404)

    emulator_client.v1.customers.create(params={"name": "Given up"})
    received = hook.settle()
    event = emulator_client.v1.events.retrieve(received[0].event_id)
    undelivered = emulator_client.v1.events.list(params={"delivery_success": False})

    assert len(received) == 3  # three attempts: the schedule's two retries
    assert hook.admin.deliveries()[-1].next_retry_at is None
    assert event.pending_webhooks == 1
    assert [e.id for e in undelivered.data] == [event.id]


def test_an_unreachable_endpoint_is_retried_with_the_error_recorded(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.set_retry_schedule([0.1], timeout_seconds=2)
    emulator_client.v1.webhook_endpoints.create(
        params={"url": f"http://127.0.0.1:{free_port()}/nobody", "enabled_events": ["*"]}
    )

    emulator_client.v1.customers.create(params={"name": "Unheard"})
    admin.wait_for_deliveries(10)
    attempts = admin.deliveries()

    assert [(a.attempt, a.status, a.outcome) for a in attempts] == [
        (1, None, "failed"),
        (2, None, "failed"),
    ]
    assert attempts[0].error is not None
    assert "Connect" in attempts[0].error


def test_the_signature_uses_wall_clock_time_even_with_the_clock_31_days_ahead(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    hook.admin.advance_clock("31d")

    emulator_client.v1.customers.create(params={"name": "Ahead"})
    (delivery,) = hook.settle()
    timestamp = int(delivery.headers["stripe-signature"].split(",")[0].removeprefix("t="))
    event = delivery.verified(hook.secret)  # 300 s tolerance against this process's clock

    assert abs(timestamp - time.time()) < 60
    assert event.created >= time.time() + 31 * DAY - 60  # the event itself: emulator time


def test_endpoints_get_only_the_events_they_enabled_and_nothing_once_disabled(
    receiver: Receiver, emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    other = Receiver()
    try:
        invoices = register(receiver, emulator_client, admin, enabled_events=["invoice.paid"])
        customers = register(other, emulator_client, admin, enabled_events=["customer.created"])
        _subscription(emulator_client)
        admin.wait_for_deliveries(10)
        emulator_client.v1.webhook_endpoints.update(
            customers.endpoint_id, params={"disabled": True}
        )
        emulator_client.v1.customers.create(params={"name": "Unseen"})
        admin.wait_for_deliveries(10)

        assert receiver.types() == ["invoice.paid"]
        assert other.types() == ["customer.created"]
        assert [event.type for event in invoices.events()] == ["invoice.paid"]
        assert emulator_client.v1.events.list().data[0].pending_webhooks == 0
    finally:
        other.close()


def test_each_endpoint_gets_its_events_in_the_order_they_were_recorded(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    created = [emulator_client.v1.customers.create(params={"name": f"N{i}"}) for i in range(20)]

    hook.settle()

    assert [delivery.payload["data"]["object"]["id"] for delivery in hook.receiver.received] == [
        customer.id for customer in created
    ]


def test_deliveries_do_not_hold_up_the_api(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    hook.admin.delay_deliveries(10.0)

    started = time.monotonic()
    emulator_client.v1.customers.create(params={"name": "Quick"})
    received_when_answered = len(hook.receiver.received)
    hook.settle(timeout=60.0)

    # Answered before its event was sent, and the event was sent after its delay.
    assert received_when_answered == 0
    assert time.monotonic() - started >= 10.0
    assert len(hook.receiver.received) == 1


def test_during_a_secret_rotation_deliveries_verify_with_the_old_and_the_new_secret(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    old = hook.secret

    new = hook.admin.roll_webhook_secret(hook.endpoint_id, expires_in=60)
    emulator_client.v1.customers.create(params={"name": "Rotating"})
    (during,) = hook.settle()
    hook.admin.roll_webhook_secret(hook.endpoint_id)  # the previous one stops at once
    emulator_client.v1.customers.create(params={"name": "Rotated"})
    after = hook.settle()[-1]

    assert new != old
    assert during.headers["stripe-signature"].count("v1=") == 2
    assert during.verified(old).id == during.verified(new).id
    assert after.headers["stripe-signature"].count("v1=") == 1
    with pytest.raises(stripe.SignatureVerificationError):
        after.verified(new)
    with pytest.raises(EmulatorAdminError) as raised:
        hook.admin.roll_webhook_secret("we_missing")
    assert raised.value.status == 404


def test_a_renewal_draft_waits_while_its_invoice_created_fails_then_finalizes_after_an_answer(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    # Stripe finalizes a renewal an hour after every endpoint answered its invoice.created,
    # not an hour after it was made, and waits up to 72 h while the deliveries fail.
    subscription = _subscription(emulator_client)
    end = subscription["items"].data[0].current_period_end
    hook.settle()
    hook.admin.set_retry_schedule([3.0])  # a retry, 3 s of wall time later
    hook.receiver.answer(500, 500)  # the first attempts of the renewal's two events fail

    hook.admin.set_time(end + 60)
    deadline = time.monotonic() + 10
    while not [
        a for a in hook.admin.deliveries() if (a.type, a.outcome) == ("invoice.created", "failed")
    ]:
        assert time.monotonic() < deadline, "the renewal's invoice.created was never attempted"
        time.sleep(0.05)
    hook.admin.set_time(end + HOUR + 60)  # its hour is over, its invoice.created unanswered
    held = emulator_client.v1.invoices.list(params={"subscription": subscription.id}).data[0]
    hook.settle()  # the retries are answered
    hook.admin.set_time(end + 2 * HOUR + 60)
    finalized = emulator_client.v1.invoices.retrieve(str(held.id))

    assert held.status == "draft"
    assert held.automatically_finalizes_at == end + 2 * HOUR
    assert finalized.status == "paid"
    assert finalized.status_transitions.finalized_at == end + 2 * HOUR


def test_a_renewal_draft_whose_invoice_created_never_gets_through_is_finalized_after_72_hours(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    subscription = _subscription(emulator_client)
    end = subscription["items"].data[0].current_period_end
    hook.settle()
    hook.admin.set_retry_schedule([])  # one attempt each, then given up
    hook.receiver.answer(500, 500)

    hook.admin.set_time(end + 60)
    hook.settle()
    hook.admin.set_time(end + 71 * HOUR)
    still = emulator_client.v1.invoices.list(params={"subscription": subscription.id}).data[0]
    hook.admin.set_time(end + 72 * HOUR + 60)
    finalized = emulator_client.v1.invoices.retrieve(str(still.id))

    assert still.status == "draft"
    assert finalized.status == "paid"
    assert finalized.status_transitions.finalized_at == end + 72 * HOUR

"""What the emulator records as events, and when (emulator only: the clock, payment switches and
exact sequences)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import API_VERSION, EmulatorAdmin
from tests.emulator.support import EMULATOR_KEY, EmulatorProcess

pytestmark = pytest.mark.emulator_only

DAY = 86_400


def _all_events(client: stripe.StripeClient) -> list[dict[str, Any]]:
    """Every event, oldest first, as plain dicts."""
    found: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 100}
    while True:
        page = client.v1.events.list(params=params)  # type: ignore[arg-type]
        found.extend(event.to_dict() for event in page.data)
        if not page.has_more:
            return list(reversed(found))
        params["starting_after"] = page.data[-1].id


def _types(client: stripe.StripeClient, object_id: str | None = None) -> list[str]:
    return [
        event["type"]
        for event in _all_events(client)
        if object_id is None or event["data"]["object"]["id"] == object_id
    ]


def _last(client: stripe.StripeClient, type_: str) -> dict[str, Any]:
    return [event for event in _all_events(client) if event["type"] == type_][-1]


def _price(client: stripe.StripeClient, **recurring: Any) -> stripe.Price:
    return client.v1.prices.create(
        params={"currency": "usd", "unit_amount": 1000, "product_data": {"name": "Plan"},
                "recurring": {"interval": "month", **recurring}}  # type: ignore[typeddict-item]
    )  # fmt: skip


def _subscription(client: stripe.StripeClient, **params: Any) -> stripe.Subscription:
    customer = client.v1.customers.create(params={"name": "Subscriber"})
    return client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": _price(client).id}], **params}  # type: ignore[arg-type]
    )


def test_an_event_names_the_emulators_api_version_and_its_request(
    emulator_client: stripe.StripeClient,
) -> None:
    customer = emulator_client.v1.customers.create(
        params={"name": "Keyed"}, options={"idempotency_key": "create-keyed"}
    )

    event = _last(emulator_client, "customer.created")

    assert event["api_version"] == API_VERSION
    assert event["pending_webhooks"] == 0  # no endpoint wants it
    assert customer.last_response is not None
    assert event["request"] == {
        "id": customer.last_response.request_id,
        "idempotency_key": "create-keyed",
    }
    assert event["created"] == customer.created


def test_data_object_is_a_snapshot_that_later_changes_leave_alone(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscription(emulator_client)
    emulator_client.v1.customers.update(str(subscription.customer), params={"name": "Renamed"})
    admin.advance_clock("32d")

    created = _last(emulator_client, "customer.created")["data"]["object"]
    draft = next(e for e in _all_events(emulator_client) if e["type"] == "invoice.created")
    first_subscription = _last(emulator_client, "customer.subscription.created")

    assert created["name"] == "Subscriber"
    assert draft["data"]["object"]["status"] == "draft"
    assert draft["data"]["object"]["status_transitions"]["paid_at"] is None
    item = first_subscription["data"]["object"]["items"]["data"][0]
    assert item["current_period_start"] == subscription["items"].data[0].current_period_start


def test_a_replayed_idempotent_request_records_no_second_event(
    emulator_client: stripe.StripeClient,
) -> None:
    options: Any = {"idempotency_key": "once"}
    first = emulator_client.v1.customers.create(params={"name": "Once"}, options=options)
    replay = emulator_client.v1.customers.create(params={"name": "Once"}, options=options)

    assert replay.id == first.id
    assert _types(emulator_client) == ["customer.created"]


def test_a_refused_request_records_nothing(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscription(emulator_client)
    before = _types(emulator_client)
    admin.fail_payments(str(subscription.customer))

    with pytest.raises(stripe.InvalidRequestError):
        emulator_client.v1.customers.update(str(subscription.customer), params={"email": "bad"})
    with pytest.raises(stripe.InvalidRequestError):
        emulator_client.v1.customers.update("cus_missing", params={"name": "x"})
    with pytest.raises(stripe.CardError):  # nothing happens with error_if_incomplete
        emulator_client.v1.subscriptions.update(
            subscription.id,
            params={
                "items": [{"id": subscription["items"].data[0].id, "quantity": 2}],
                "proration_behavior": "always_invoice",
                "payment_behavior": "error_if_incomplete",
            },
        )

    assert _types(emulator_client) == before


def test_a_customer_update_lists_only_what_changed_with_the_old_values(
    emulator_client: stripe.StripeClient,
) -> None:
    customer = emulator_client.v1.customers.create(
        params={"name": "Old", "email": "a@example.com", "metadata": {"plan": "basic"}}
    )

    emulator_client.v1.customers.update(
        customer.id, params={"name": "New", "metadata": {"plan": "pro", "seats": "3"}}
    )
    emulator_client.v1.customers.update(customer.id, params={"name": "New"})  # no change
    event = _last(emulator_client, "customer.updated")

    assert _types(emulator_client).count("customer.updated") == 1
    assert event["data"]["previous_attributes"] == {
        "name": "Old",
        "metadata": {"plan": "basic", "seats": None},
    }
    assert event["data"]["object"]["metadata"] == {"plan": "pro", "seats": "3"}


def test_creating_a_subscription_records_it_then_its_first_invoice(
    emulator_client: stripe.StripeClient,
) -> None:
    subscription = _subscription(emulator_client)

    events = [e for e in _all_events(emulator_client) if e["request"]["id"] is not None]
    tail = [e["type"] for e in events if e["type"].startswith(("customer.subscription", "invoice"))]
    created = _last(emulator_client, "customer.subscription.created")["data"]["object"]

    assert tail == [
        "customer.subscription.created",
        "invoice.created",
        "invoice.finalized",
        "invoice.paid",
        "invoice.payment_succeeded",
    ]
    assert created["status"] == "active"
    assert created["latest_invoice"] == subscription.latest_invoice


def test_a_renewal_records_the_subscription_update_with_the_old_period_then_its_invoice(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscription(emulator_client)
    old_item = subscription["items"].data[0]
    before = len(_all_events(emulator_client))

    admin.set_time(old_item.current_period_end + 60)
    renewal = _all_events(emulator_client)[before:]
    updated = renewal[0]
    item = updated["data"]["object"]["items"]["data"][0]
    previous = updated["data"]["previous_attributes"]

    assert [e["type"] for e in renewal] == [
        "customer.subscription.updated",
        "invoice.created",
        "invoice.finalized",
        "invoice.paid",
        "invoice.payment_succeeded",
    ]
    assert all(e["request"] == {"id": None, "idempotency_key": None} for e in renewal)
    assert all(e["created"] == old_item.current_period_end for e in renewal)
    assert item["current_period_start"] == old_item.current_period_end
    old = previous["items"]["data"][0]
    assert (old["current_period_start"], old["current_period_end"]) == (
        old_item.current_period_start,
        old_item.current_period_end,
    )
    assert previous["latest_invoice"] == subscription.latest_invoice
    assert renewal[1]["data"]["object"]["billing_reason"] == "subscription_cycle"


def test_a_trial_ending_records_the_move_from_trialing_to_active(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscription(emulator_client, trial_period_days=7)

    admin.advance_clock("7d1m")
    event = _last(emulator_client, "customer.subscription.updated")

    assert event["data"]["object"]["id"] == subscription.id
    assert event["data"]["object"]["status"] == "active"
    assert event["data"]["previous_attributes"]["status"] == "trialing"


def test_a_cancel_at_period_end_taking_effect_records_customer_subscription_deleted(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscription(emulator_client)
    emulator_client.v1.subscriptions.update(subscription.id, params={"cancel_at_period_end": True})
    asked = _last(emulator_client, "customer.subscription.updated")

    admin.advance_clock("32d")
    deleted = _last(emulator_client, "customer.subscription.deleted")

    assert asked["data"]["previous_attributes"]["cancel_at_period_end"] is False
    assert deleted["data"]["object"]["status"] == "canceled"
    assert deleted["request"]["id"] is None
    assert "previous_attributes" not in deleted["data"]


def test_failing_payments_record_payment_failed_and_past_due_then_paid_and_active(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscription(emulator_client)
    customer_id = str(subscription.customer)
    admin.fail_payments(customer_id)
    before = len(_all_events(emulator_client))

    admin.set_time(subscription["items"].data[0].current_period_end + 60)
    declined = _all_events(emulator_client)[before:]
    admin.succeed_payments(customer_id)
    recovered = _all_events(emulator_client)[before + len(declined) :]

    assert [e["type"] for e in declined] == [
        "customer.subscription.updated",
        "invoice.created",
        "invoice.finalized",
        "customer.updated",
        "invoice.payment_failed",
    ]
    assert declined[0]["data"]["object"]["status"] == "past_due"
    assert declined[0]["data"]["previous_attributes"]["status"] == "active"
    assert declined[3]["data"]["previous_attributes"]["delinquent"] is False
    assert declined[4]["data"]["object"]["next_payment_attempt"] is not None
    assert [e["type"] for e in recovered] == [
        "customer.subscription.updated",
        "invoice.paid",
        "invoice.payment_succeeded",
        "customer.updated",
    ]
    assert recovered[0]["data"]["object"]["status"] == "active"
    assert recovered[3]["data"]["object"]["delinquent"] is False


def test_dunning_ending_in_canceled_records_customer_subscription_deleted(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.set_dunning(retries=1, retry_interval_seconds="1d", final_status="canceled")
    subscription = _subscription(emulator_client)
    admin.fail_payments(str(subscription.customer))
    admin.set_time(subscription["items"].data[0].current_period_end + 60)

    admin.advance_clock("1d1m")

    assert _types(emulator_client, subscription.id)[-1] == "customer.subscription.deleted"
    assert _last(emulator_client, "invoice.payment_failed")["data"]["object"]["attempt_count"] == 2


def test_deleting_a_customer_records_its_subscriptions_deleted_then_the_customer_deleted(
    emulator_client: stripe.StripeClient,
) -> None:
    subscription = _subscription(emulator_client)
    customer_id = str(subscription.customer)

    emulator_client.v1.customers.delete(customer_id)
    events = _all_events(emulator_client)[-2:]

    assert [e["type"] for e in events] == ["customer.subscription.deleted", "customer.deleted"]
    assert events[0]["data"]["object"]["id"] == subscription.id
    assert events[1]["data"]["object"]["id"] == customer_id
    assert events[1]["data"]["object"]["object"] == "customer"
    assert events[1]["data"]["object"]["name"] == "Subscriber"  # the customer as it was


def test_catalog_tax_ids_and_prorations_are_recorded(
    emulator_client: stripe.StripeClient,
) -> None:
    customer = emulator_client.v1.customers.create(
        params={"tax_id_data": [{"type": "eu_vat", "value": "DE123456789"}]}
    )
    price = _price(emulator_client)
    emulator_client.v1.prices.update(price.id, params={"nickname": "monthly"})
    emulator_client.v1.products.update(str(price.product), params={"name": "Renamed"})
    subscription = emulator_client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}]}
    )
    emulator_client.v1.subscriptions.update(
        subscription.id,
        params={"items": [{"id": subscription["items"].data[0].id, "quantity": 2}]},
    )

    types = _types(emulator_client)

    assert types[:6] == [
        "customer.created",
        "customer.tax_id.created",
        "product.created",
        "price.created",
        "price.updated",
        "product.updated",
    ]
    assert types.count("invoiceitem.created") == 2  # the credit and the debit
    assert _last(emulator_client, "price.updated")["data"]["previous_attributes"] == {
        "nickname": None
    }
    assert (
        _last(emulator_client, "customer.subscription.updated")["data"]["previous_attributes"][
            "items"
        ]["data"][0]["quantity"]
        == 1
    )


def test_events_are_filtered_by_created_and_delivery_success_and_paged(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    emulator_client.v1.customers.create(params={"name": "Early"})
    admin.advance_clock("1d")
    middle = admin.now()
    for index in range(3):
        emulator_client.v1.customers.create(params={"name": f"Late {index}"})

    late = emulator_client.v1.events.list(params={"created": {"gte": middle}})
    first_page = emulator_client.v1.events.list(params={"limit": 2})
    second_page = emulator_client.v1.events.list(
        params={"limit": 2, "starting_after": first_page.data[-1].id}
    )
    delivered = emulator_client.v1.events.list(params={"delivery_success": True})
    pending = emulator_client.v1.events.list(params={"delivery_success": False})

    assert [e.data.object.name for e in late.data] == ["Late 2", "Late 1", "Late 0"]
    assert first_page.has_more is True
    assert [e.data.object.name for e in first_page.data + second_page.data] == [
        "Late 2", "Late 1", "Late 0", "Early",
    ]  # fmt: skip
    assert second_page.has_more is False
    assert len(delivered.data) == 4
    assert pending.data == []


def test_events_have_exactly_the_keys_of_stripes_event_fixture(
    emulator: EmulatorProcess, emulator_client: stripe.StripeClient
) -> None:
    customer = emulator_client.v1.customers.create(params={"name": "Keys"})
    emulator_client.v1.customers.update(customer.id, params={"name": "Keys 2"})

    listed = httpx.get(
        f"{emulator.url}/v1/events", headers={"Authorization": f"Bearer {EMULATOR_KEY}"}
    ).json()

    assert [list(event) for event in listed["data"]] == [
        ["id", "object", "api_version", "created", "data", "livemode", "pending_webhooks",
         "request", "type"],
    ] * 2  # fmt: skip
    assert list(listed["data"][0]["data"]) == ["object", "previous_attributes"]
    assert list(listed["data"][1]["data"]) == ["object"]


def test_canceling_a_subscription_records_customer_subscription_deleted_naming_the_request(
    emulator_client: stripe.StripeClient,
) -> None:
    subscription = _subscription(emulator_client)

    canceled = emulator_client.v1.subscriptions.cancel(subscription.id)
    event = _last(emulator_client, "customer.subscription.deleted")

    assert event["data"]["object"]["status"] == "canceled"
    assert event["data"]["object"]["canceled_at"] == canceled.canceled_at
    assert canceled.last_response is not None
    assert event["request"]["id"] == canceled.last_response.request_id


def test_a_declined_payment_through_the_api_still_records_payment_failed(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    subscription = _subscription(
        emulator_client, collection_method="send_invoice", days_until_due=7
    )
    admin.fail_payments(str(subscription.customer))
    assert isinstance(subscription.latest_invoice, str)

    with pytest.raises(stripe.CardError):
        emulator_client.v1.invoices.pay(subscription.latest_invoice)
    event = _last(emulator_client, "invoice.payment_failed")

    # As on Stripe: the request fails, but the attempt happened and is recorded.
    assert event["data"]["object"]["id"] == subscription.latest_invoice
    assert event["data"]["object"]["attempt_count"] == 1

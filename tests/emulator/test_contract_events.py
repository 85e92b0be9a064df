"""Events: behaviour shared by the emulator and real Stripe test mode (real Stripe lists events
a moment after a write, hence ``eventually``)."""

from __future__ import annotations

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.support import StripeTarget, unique


def _one_event(target: StripeTarget, object_id: str, type_: str) -> stripe.Event:
    events = target.eventually(
        lambda: target.events_about(object_id, type_), lambda found: len(found) >= 1
    )
    assert len(events) == 1
    return events[0]


def test_a_created_customer_is_announced_by_a_customer_created_event_naming_its_request(
    stripe_target: StripeTarget,
) -> None:
    name = unique("announced")
    customer = stripe_target.customer(name=name)

    event = _one_event(stripe_target, customer.id, "customer.created")
    retrieved = stripe_target.client.v1.events.retrieve(event.id)

    assert event.id.startswith("evt_")
    assert event.object == "event"
    assert event.livemode is False
    assert event.data.object.name == name
    assert "previous_attributes" not in event.data.to_dict()
    assert event.request is not None
    assert customer.last_response is not None
    assert event.request.id == customer.last_response.request_id
    assert isinstance(event.created, int)
    assert retrieved.to_dict()["data"] == event.to_dict()["data"]
    assert (retrieved.id, retrieved.type) == (event.id, "customer.created")


def test_an_update_records_customer_updated_with_the_old_values_in_previous_attributes(
    stripe_target: StripeTarget,
) -> None:
    customer = stripe_target.customer(name="Before", metadata={"keep": "1", "drop": "2"})

    stripe_target.client.v1.customers.update(
        customer.id, params={"name": "After", "metadata": {"drop": ""}}
    )
    event = _one_event(stripe_target, customer.id, "customer.updated")
    previous = event.data.to_dict()["previous_attributes"]

    assert event.data.object.name == "After"
    assert event.data.object.to_dict()["metadata"] == {"keep": "1"}
    assert previous["name"] == "Before"
    assert previous["metadata"]["drop"] == "2"
    assert "email" not in previous  # unchanged fields are not listed


def test_events_are_listed_newest_first_and_filtered_by_type_or_types(
    stripe_target: StripeTarget,
) -> None:
    customer = stripe_target.customer(name="Listed")
    stripe_target.client.v1.customers.update(customer.id, params={"name": "Listed again"})

    both = stripe_target.eventually(
        lambda: stripe_target.events_about(customer.id, "customer.created", "customer.updated"),
        lambda found: len(found) >= 2,
    )
    wildcard = stripe_target.client.v1.events.list(params={"type": "customer.*", "limit": 100})
    updated_only = stripe_target.client.v1.events.list(params={"type": "customer.updated"})

    assert [event.type for event in both] == ["customer.updated", "customer.created"]
    assert both[0].created >= both[1].created
    assert {e.id for e in both} <= {e.id for e in wildcard.data}
    assert {event.type for event in updated_only.data} == {"customer.updated"}
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.client.v1.events.list(
            params={"type": "customer.created", "types": ["customer.updated"]}
        )
    assert raised.value.http_status == 400


def test_a_missing_event_is_a_404(stripe_target: StripeTarget) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.client.v1.events.retrieve("evt_doesnotexist000000000000")

    assert raised.value.http_status == 404

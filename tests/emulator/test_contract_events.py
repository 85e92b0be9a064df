"""Events and webhook endpoints: behaviour shared by the emulator and real Stripe test mode (real
Stripe lists events a moment after a write, hence ``eventually``)."""

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


def test_a_webhook_endpoint_shows_its_secret_only_in_the_answer_that_creates_it(
    stripe_target: StripeTarget,
) -> None:
    client = stripe_target.client
    created = stripe_target.webhook_endpoint(
        url=f"https://example.com/hooks/{unique('wh')}",
        enabled_events=["customer.created", "invoice.paid"],
        description="billing hooks",
        metadata={"team": "billing"},
    )

    retrieved = client.v1.webhook_endpoints.retrieve(created.id)
    listed = client.v1.webhook_endpoints.list(params={"limit": 100})
    updated = client.v1.webhook_endpoints.update(
        created.id, params={"disabled": True, "enabled_events": ["*"]}
    )
    deleted = client.v1.webhook_endpoints.delete(created.id)

    assert created.id.startswith("we_")
    assert created.secret is not None
    assert created.secret.startswith("whsec_")
    assert created.status == "enabled"
    assert created.enabled_events == ["customer.created", "invoice.paid"]
    assert (created.description, created.to_dict()["metadata"]) == (
        "billing hooks",
        {"team": "billing"},
    )
    assert "secret" not in retrieved.to_dict()
    assert retrieved.url == created.url
    mine = [endpoint for endpoint in listed.data if endpoint.id == created.id]
    assert len(mine) == 1
    assert "secret" not in mine[0].to_dict()
    assert (updated.status, updated.enabled_events) == ("disabled", ["*"])
    assert "secret" not in updated.to_dict()
    assert deleted.deleted is True
    with pytest.raises(stripe.InvalidRequestError) as raised:
        client.v1.webhook_endpoints.retrieve(created.id)
    assert raised.value.http_status == 404


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"url": "not a url", "enabled_events": ["customer.created"]}, "url"),
        ({"url": "ftp://example.com/hooks", "enabled_events": ["customer.created"]}, "url"),
        ({"url": "https://example.com/hooks", "enabled_events": ["customer.nonsense"]},
         "enabled_events"),
        ({"url": "https://example.com/hooks"}, "enabled_events"),
    ],
)  # fmt: skip
def test_a_webhook_endpoint_needs_a_valid_url_and_known_event_types(
    stripe_target: StripeTarget, params: dict[str, object], param: str
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.webhook_endpoint(**params)

    assert raised.value.http_status == 400
    assert raised.value.param is not None
    assert raised.value.param.startswith(param)

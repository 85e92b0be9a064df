"""Stripe's events in, end to end: signed deliveries to ``POST /webhooks/stripe`` → one
command per event → a worker re-reads the object from the Stripe emulator → our rows follow
it, on SQLite and PostgreSQL. The events are signed here as Stripe signs them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import stripe  # noqa: TID251 - the tests change the emulator's objects through the SDK

from domain.plans import Plan
from domain.subscriptions import SubscriptionState
from tests.support.stack import Stack, eventually
from tests.support.stripe_events import ROTATED_SECRET, signature
from tests.support.stripe_events import event as stripe_event
from tests.support.subscriptions import (
    Subscribed,
    new_account,
    new_plan,
    stored_subscription,
    subscribe,
)
from worker.bootstrap import Services
from worker.db.models import CommandRow

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def plan(ctx: Services) -> Plan:
    return new_plan(ctx, "events-in", 1200)


@pytest.fixture
def sub(ctx: Services, plan: Plan) -> Subscribed:
    return subscribe(ctx, new_account(ctx), plan)


@pytest.fixture
def http(stack: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.api_url, timeout=10) as client:
        yield client


def deliver(http: httpx.Client, body: bytes, header: str | None) -> httpx.Response:
    headers = {"Content-Type": "application/json; charset=utf-8"}
    if header is not None:
        headers["Stripe-Signature"] = header
    return http.post("/webhooks/stripe", content=body, headers=headers)


def commands_for(stack: Stack, event_id: str) -> int:
    """The syncs recorded for the event (the one each read's command names first)."""
    with stack.sessions() as session:
        rows = session.query(CommandRow).filter(CommandRow.type == "stripe.sync_object").all()
    return [row.payload["event_id"] for row in rows].count(event_id)


def event(stack: Stack, event_type: str, obj: dict[str, Any], event_id: str) -> bytes:
    """The event as Stripe makes it, at the emulator's time (the stack's clock may have been
    moved by other tests)."""
    with stack.stripe as emulator:
        return stripe_event(event_type, obj, event_id, created=emulator.now())


def subscription_object(sdk: stripe.StripeClient, sub: Subscribed) -> dict[str, Any]:
    """The subscription as Stripe would put it in an event (JSON: the SDK's decimals as
    strings)."""
    retrieved = sdk.v1.subscriptions.retrieve(sub.provider_id)
    document: dict[str, Any] = json.loads(json.dumps(retrieved.to_dict(), default=str))
    return document


def test_a_signed_event_makes_our_row_follow_what_stripe_holds(
    stack: Stack, http: httpx.Client, sub: Subscribed, sdk: stripe.StripeClient
) -> None:
    sdk.v1.subscriptions.cancel(sub.provider_id)
    body = event(
        stack, "customer.subscription.deleted", subscription_object(sdk, sub), "evt_follow1"
    )

    answer = deliver(http, body, signature(body))

    assert answer.status_code == 200, answer.text
    sync = answer.json()["command_id"]
    assert answer.json() == {
        "received": True,
        "handled": True,
        "command_id": sync,
        "duplicate": False,
    }
    assert sync.startswith(f"stripe:subscription:{sub.provider_id}:")
    eventually(
        lambda: stored_subscription(stack, sub.id).state is SubscriptionState.CANCELED or None,
        timeout=15,
        what="the subscription to read canceled",
    )
    assert stack.finished(sync).status.value == "succeeded"


def test_two_deliveries_of_one_event_make_one_command(
    stack: Stack, http: httpx.Client, sub: Subscribed, sdk: stripe.StripeClient
) -> None:
    body = event(
        stack, "customer.subscription.updated", subscription_object(sdk, sub), "evt_twice1"
    )

    first = deliver(http, body, signature(body))
    second = deliver(http, body, signature(body))

    assert first.json()["duplicate"] is False
    assert second.status_code == 200
    assert second.json()["duplicate"] is True
    assert commands_for(stack, "evt_twice1") == 1


def test_a_stale_event_delivered_last_leaves_our_row_equal_to_stripe(
    stack: Stack, http: httpx.Client, sub: Subscribed, sdk: stripe.StripeClient
) -> None:
    stale = subscription_object(sdk, sub)  # still active
    sdk.v1.subscriptions.update(sub.provider_id, params={"cancel_at_period_end": True})
    fresh = subscription_object(sdk, sub)
    newer = event(stack, "customer.subscription.updated", fresh, "evt_order_new")
    older = event(stack, "customer.subscription.updated", stale, "evt_order_old")

    first = deliver(http, newer, signature(newer))
    last = deliver(http, older, signature(older))  # arrives last, says "no cancel_at"

    stack.finished(first.json()["command_id"])
    stack.finished(last.json()["command_id"])
    row = stored_subscription(stack, sub.id)
    assert row.cancel_at is not None
    assert int(row.cancel_at.timestamp()) == fresh["cancel_at"]


@pytest.mark.parametrize(
    "header",
    [None, "t=1,v1=00", "garbage"],
    ids=["missing", "wrong", "unreadable"],
)
def test_a_bad_signature_is_a_400_with_the_error_body_and_records_nothing(
    stack: Stack, http: httpx.Client, sub: Subscribed, sdk: stripe.StripeClient, header: str | None
) -> None:
    body = event(
        stack, "customer.subscription.updated", subscription_object(sdk, sub), "evt_badsig1"
    )

    answer = deliver(http, body, header)

    assert answer.status_code == 400
    error = answer.json()
    assert (error["code"], error["details"][0]["reason"]) == (3, "STRIPE_SIGNATURE_INVALID")
    assert commands_for(stack, "evt_badsig1") == 0


def test_a_signature_older_than_stripe_s_tolerance_is_refused(
    stack: Stack, http: httpx.Client, sub: Subscribed, sdk: stripe.StripeClient
) -> None:
    body = event(stack, "customer.subscription.updated", subscription_object(sdk, sub), "evt_old1")

    answer = deliver(http, body, signature(body, at=int(time.time()) - 301))

    assert answer.status_code == 400
    assert commands_for(stack, "evt_old1") == 0


def test_either_secret_of_a_rotation_is_accepted(
    stack: Stack, http: httpx.Client, sub: Subscribed, sdk: stripe.StripeClient
) -> None:
    body = event(
        stack, "customer.subscription.updated", subscription_object(sdk, sub), "evt_rotated1"
    )

    answer = deliver(http, body, signature(body, ROTATED_SECRET))

    assert answer.status_code == 200
    assert commands_for(stack, "evt_rotated1") == 1


def test_an_event_type_we_do_not_handle_is_answered_and_not_recorded(
    stack: Stack, http: httpx.Client
) -> None:
    body = event(stack, "charge.refunded", {"id": "ch_1", "object": "charge"}, "evt_ignored1")

    answer = deliver(http, body, signature(body))

    assert answer.status_code == 200
    assert answer.json() == {"received": True, "handled": False}
    assert commands_for(stack, "evt_ignored1") == 0


def test_a_body_larger_than_an_event_is_a_413(http: httpx.Client) -> None:
    body = b"{" + b" " * (300 * 1024) + b"}"

    answer = deliver(http, body, signature(body))

    assert answer.status_code == 413

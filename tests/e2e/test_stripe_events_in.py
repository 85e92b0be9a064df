"""Stripe's events in, end to end: signed deliveries to ``POST /webhooks/stripe`` → one
command per event → a worker re-reads the object from the Stripe emulator → our rows follow
it, on SQLite and PostgreSQL. The events are signed here as Stripe signs them."""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
import stripe  # noqa: TID251 - the tests change the emulator's objects through the SDK

from adapters.clock import ShiftableClock
from adapters.db.models import CommandRow
from domain.subscriptions.plans import Plan
from domain.subscriptions.subscription import SubscriptionState
from tests.support.stack import Stack, another_api, eventually
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


def test_a_second_delivery_after_the_first_sync_read_finds_that_sync_and_records_none(
    stack: Stack, http: httpx.Client, sub: Subscribed, sdk: stripe.StripeClient
) -> None:
    body = event(
        stack, "customer.subscription.updated", subscription_object(sdk, sub), "evt_after_read"
    )
    # A sync's id names the second of the object's last read (here: its creation); a read in
    # a later second moves the next sync to another id, where the first one is not.
    created = int(stored_subscription(stack, sub.id).created_at.timestamp())
    clock = ShiftableClock(stack.redis_url)
    eventually(
        lambda: int(clock.now().timestamp()) > created or None,
        timeout=5,
        what="a second after the subscription's creation",
    )
    first = deliver(http, body, signature(body))
    stack.finished(first.json()["command_id"])  # its read moved the object's last read on

    second = deliver(http, body, signature(body))

    assert second.status_code == 200, second.text
    assert second.json()["duplicate"] is True
    assert second.json()["command_id"] == first.json()["command_id"]
    assert commands_for(stack, "evt_after_read") == 1


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


def raw_event(event_id: Any = "evt_raw", **fields: Any) -> dict[str, Any]:
    """A Stripe event's fields, with ``fields`` replacing or adding some."""
    document: dict[str, Any] = json.loads(
        stripe_event("customer.subscription.updated", {"id": "sub_raw", "object": "subscription"})
    )
    return {**document, "id": event_id, **fields}


def refused_as_not_an_event(answer: httpx.Response, field: str) -> None:
    assert answer.status_code == 400, answer.text
    error = answer.json()
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == 3
    assert error["details"][0]["reason"] == "STRIPE_EVENT_INVALID"
    assert error["details"][1]["fieldViolations"][0]["field"].startswith(field)


SUBSCRIPTION_OF = {"id": "sub_ok1", "object": "subscription"}


@pytest.mark.parametrize(
    ("document", "field"),
    [
        pytest.param(raw_event("evt_" + "a" * 66), "id", id="event-id-70-characters"),
        pytest.param(raw_event("evt_with space"), "id", id="event-id-with-a-space"),
        pytest.param(raw_event("evt_a/b"), "id", id="event-id-with-a-slash"),
        pytest.param(raw_event("evt_café"), "id", id="event-id-not-ascii"),
        pytest.param(raw_event(""), "id", id="event-id-empty"),
        pytest.param(raw_event(12345), "id", id="event-id-a-number"),
        pytest.param(
            raw_event("evt_objspace", data={"object": {"id": "sub_a b", "object": "subscription"}}),
            "data.object.id",
            id="object-id-with-a-space",
        ),
        pytest.param(
            raw_event(
                "evt_objlong", data={"object": {"id": "sub_" + "x" * 196, "object": "subscription"}}
            ),
            "data.object.id",
            id="object-id-200-characters",
        ),
        pytest.param(
            raw_event(
                "evt_invoicesub",
                type="invoice.paid",
                data={"object": {"id": "in_1", "object": "invoice", "subscription": "sub_a/b"}},
            ),
            "data.object.subscription",
            id="invoice-subscription-id-with-a-slash",
        ),
        pytest.param(raw_event("evt_created", created=10**20), "created", id="created-1e20"),
        pytest.param(raw_event("evt_createds", created="yesterday"), "created", id="created-text"),
        pytest.param(raw_event("evt_notype", type=None), "type", id="type-missing"),
    ],
)
def test_a_signed_event_that_is_not_a_stripe_event_is_a_400_naming_the_field_and_records_nothing(
    stack: Stack, http: httpx.Client, document: dict[str, Any], field: str
) -> None:
    body = json.dumps(document).encode()

    answer = deliver(http, body, signature(body))

    refused_as_not_an_event(answer, field)
    if isinstance(document["id"], str):
        assert commands_for(stack, document["id"]) == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param(
            b'{"id": "evt_deep1", "type": "charge.refunded", "data": {"object": '
            + b"[" * 100_000
            + b"]" * 100_000
            + b"}}",
            "body",
            id="arrays-100000-deep",
        ),
        pytest.param(
            b'{"id": "evt_deep2", "type": "charge.refunded", "data": {"object": '
            + b"[" * 40
            + b"]" * 40
            + b"}}",
            "data.object",
            id="arrays-40-deep",
        ),
        pytest.param(
            b'{"id": "evt_twice_a", "id": "evt_twice_b", "type": "charge.refunded"}',
            "id",
            id="a-name-twice",
        ),
        pytest.param(
            b'{"id": "evt_nan", "type": "charge.refunded", "created": NaN}', "body", id="nan"
        ),
        pytest.param(b'["evt_list"]', "body", id="not-an-object"),
    ],
)
def test_a_signed_body_outside_strict_json_is_a_400_and_records_nothing(
    stack: Stack, http: httpx.Client, body: bytes, field: str
) -> None:
    answer = deliver(http, body, signature(body))

    refused_as_not_an_event(answer, field)


def test_an_empty_event_id_is_never_recorded_so_no_later_one_is_its_duplicate(
    stack: Stack, http: httpx.Client
) -> None:
    answers = []
    for _ in range(2):
        body = json.dumps(raw_event("", data={"object": SUBSCRIPTION_OF})).encode()
        answers.append(deliver(http, body, signature(body)))

    assert [answer.status_code for answer in answers] == [400, 400]
    assert commands_for(stack, "") == 0


def test_an_event_text_holding_a_line_break_is_still_an_event(
    stack: Stack, http: httpx.Client
) -> None:
    document = raw_event(
        "evt_linebreak1",
        type="invoice.paid",
        data={"object": {"id": "in_1", "object": "invoice", "footer": "Thanks!\r\nACME"}},
    )
    body = json.dumps(document).encode()

    answer = deliver(http, body, signature(body))

    assert answer.status_code == 200, answer.text
    assert answer.json() == {"received": True, "handled": False}  # no subscription to sync


@pytest.mark.parametrize("ahead", [3600, 10 * 365 * 86400], ids=["1-hour", "10-years"])
def test_a_signature_dated_in_the_future_is_refused(
    stack: Stack, http: httpx.Client, ahead: int
) -> None:
    event_id = f"evt_future{ahead}"
    body = json.dumps(raw_event(event_id, data={"object": SUBSCRIPTION_OF})).encode()

    answer = deliver(http, body, signature(body, at=int(time.time()) + ahead))

    assert answer.status_code == 400, answer.text
    assert answer.json()["details"][0]["reason"] == "STRIPE_SIGNATURE_INVALID"
    assert "future" in answer.json()["message"]
    assert commands_for(stack, event_id) == 0


@pytest.mark.parametrize("ahead", [11 * 60, 10 * 365 * 86400], ids=["11-minutes", "10-years"])
def test_a_signed_event_created_too_far_ahead_of_our_clock_is_a_400_naming_created(
    stack: Stack, http: httpx.Client, ahead: int
) -> None:
    event_id = f"evt_ahead{ahead}"
    with stack.stripe as emulator:  # Stripe's time: the stack's clock may have been moved
        created = emulator.now() + ahead
    document = raw_event(event_id, created=created, data={"object": SUBSCRIPTION_OF})
    body = json.dumps(document).encode()

    answer = deliver(http, body, signature(body))  # signed now, validly

    refused_as_not_an_event(answer, "created")
    assert "ahead of our clock" in answer.json()["message"]
    assert commands_for(stack, event_id) == 0


def test_a_signed_event_created_minutes_ahead_of_our_clock_is_taken_as_clocks_disagree(
    stack: Stack, http: httpx.Client, sub: Subscribed, sdk: stripe.StripeClient
) -> None:
    with stack.stripe as emulator:
        created = emulator.now() + 4 * 60
    obj = subscription_object(sdk, sub)
    body = stripe_event("customer.subscription.updated", obj, "evt_ahead_a_little", created=created)

    answer = deliver(http, body, signature(body))

    assert answer.status_code == 200, answer.text
    assert commands_for(stack, "evt_ahead_a_little") == 1


def test_a_future_timestamp_hidden_behind_a_valid_one_is_refused(
    stack: Stack, http: httpx.Client
) -> None:
    body = json.dumps(raw_event("evt_twostamps", data={"object": SUBSCRIPTION_OF})).encode()
    future = signature(body, at=int(time.time()) + 3600)

    answer = deliver(http, body, f"{future},t={int(time.time())}")  # the SDK reads the first

    assert answer.status_code == 400, answer.text
    assert commands_for(stack, "evt_twostamps") == 0


def metric_samples(stack: Stack) -> dict[tuple[str, str], float]:
    """``billing_stripe_events_total`` of the API, by (type, outcome)."""
    text = httpx.get(f"{stack.api_url}/metrics", timeout=10).text
    found: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if line.startswith("billing_stripe_events_total{"):
            labels, _, value = line.partition("} ")
            pairs = dict(
                part.split("=", 1)
                for part in labels.removeprefix("billing_stripe_events_total{").split(",")
            )
            found[(pairs["type"].strip('"'), pairs["outcome"].strip('"'))] = float(value)
    return found


def test_event_types_we_do_not_handle_are_counted_under_one_label(
    stack: Stack, http: httpx.Client
) -> None:
    before = metric_samples(stack)
    invented = [f"made.up_{uuid.uuid4().hex[:12]}" for _ in range(3)]
    for event_type in invented:
        body = stripe_event(event_type, {"id": "x_1", "object": "thing"})
        assert deliver(http, body, signature(body)).status_code == 200

    after = metric_samples(stack)
    assert not [key for key in after if any(name in key[0] for name in invented)]
    assert after[("other", "ignored")] - before.get(("other", "ignored"), 0) >= 3


FAILURES_ALLOWED = 3


@pytest.fixture
def guarded_api(stack: Stack) -> Iterator[str]:
    """Another API process of the stack, allowing each source address only
    ``FAILURES_ALLOWED`` deliveries refused for their signature in the window."""
    with another_api(
        stack,
        "api-guarded",
        BILLING_STRIPE_WEBHOOK_MAX_FAILURES_PER_SOURCE=str(FAILURES_ALLOWED),
    ) as url:
        yield url


ATTACKER = "127.0.0.2"
"""Another loopback address: a source of its own, as Stripe's 127.0.0.1 is."""


def test_a_source_sending_bad_signatures_is_refused_before_its_body_is_read_and_stripe_is_not(
    stack: Stack, guarded_api: str
) -> None:
    forged = json.dumps(raw_event("evt_forged1", data={"object": SUBSCRIPTION_OF})).encode()
    transport = httpx.HTTPTransport(local_address=ATTACKER)
    with httpx.Client(base_url=guarded_api, transport=transport, timeout=10) as attacker:
        refusals = [
            deliver(attacker, forged, signature(forged, "whsec_guessed")).status_code
            for _ in range(FAILURES_ALLOWED)
        ]
    # The next one declares a large body and sends none of it: a 429 comes back at once,
    # where reading the body first would have ended in the 408 of the read deadline.
    address = urlparse(guarded_api)
    with socket.create_connection(
        (address.hostname, address.port), timeout=10, source_address=(ATTACKER, 0)
    ) as conn:
        conn.sendall(
            b"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Stripe-Signature: t=1,v1=00\r\nContent-Length: 200000\r\n\r\n"
        )
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, error = answer.partition(b"\r\n\r\n")
    # Stripe, from its own address, is not held back by the attacker's failures.
    valid = json.dumps(raw_event("evt_unharmed1", data={"object": SUBSCRIPTION_OF})).encode()
    with httpx.Client(base_url=guarded_api, timeout=10) as stripe_side:
        delivered = deliver(stripe_side, valid, signature(valid))

    assert refusals == [400] * FAILURES_ALLOWED
    assert head.startswith(b"HTTP/1.1 429"), answer
    assert re.search(rb"(?im)^retry-after: *[1-9][0-9]*\r?$", head), head
    body = json.loads(error)
    assert (body["code"], body["details"][0]["reason"]) == (8, "STRIPE_SIGNATURES_THROTTLED")
    assert delivered.status_code == 200, delivered.text
    assert commands_for(stack, "evt_unharmed1") == 1
    assert commands_for(stack, "evt_forged1") == 0

"""Webhook delivery, on in-memory ports: the relay makes the deliveries, ``deliver`` attempts
them one message at a time, and beat's sweep sends what fell due."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from application.handlers.events.relay import relay_events
from application.handlers.events.webhook_deliveries import (
    DELIVER_WEBHOOK,
    WEBHOOKS_QUEUE,
    Outcome,
    deliver,
    event_body,
    send_due_deliveries,
)
from application.requests.sweeps import RelayEvents, SendDueDeliveries
from domain.events.base import Event
from domain.events.users import UserEnabledEvent
from domain.ports.events import WebhookResponse
from domain.webhooks import (
    DeliveryMessage,
    DeliveryPolicy,
    DeliveryState,
    WebhookDelivery,
    WebhookEndpoint,
)
from tests.support.fakes.application import FakeApplication
from tests.support.fakes.data import a_user
from tests.support.fakes.database import DatabaseUnavailable

URL = "https://receiver.example/hook"
OTHER_URL = "https://other.example/hook"
POLICY = DeliveryPolicy(
    base_delay=timedelta(seconds=5),
    max_delay=timedelta(minutes=1),
    budget=timedelta(minutes=10),
    lease=timedelta(seconds=60),
    timeout=timedelta(seconds=10),
)
FAILED_500 = WebhookResponse(status=500, error="HTTP 500: oops")


@pytest.fixture
def app() -> FakeApplication:
    return FakeApplication(deliveries=POLICY)


def an_endpoint(app: FakeApplication, url: str = URL) -> WebhookEndpoint:
    endpoint = WebhookEndpoint.new(url, ["*"], app.clock.now())
    app.db.seed(endpoint)
    return endpoint


def an_event(app: FakeApplication, user_id: str = "usr_1") -> Event:
    """A ``user.enabled`` event in the outbox, relayed: its deliveries made and published."""
    event = UserEnabledEvent.of(a_user(user_id, enabled=True), command_id=None, now=app.clock.now())
    with app.unit_of_work() as uow:
        uow.events.add(event)
        uow.commit()
    relay_events(RelayEvents(), app)
    return event


def messages(app: FakeApplication) -> list[dict[str, Any]]:
    """The delivery messages published since the last call (taken off the fake queue)."""
    published = [item for item in app.published.published if item.task_name == DELIVER_WEBHOOK]
    assert all(item.queue == WEBHOOKS_QUEUE for item in published)
    app.published.published.clear()
    return [item.payload for item in published]


def run(app: FakeApplication, message: dict[str, Any]) -> Outcome:
    return deliver(DeliveryMessage.model_validate(message), app)


def only(app: FakeApplication) -> dict[str, Any]:
    [message] = messages(app)
    return message


def delivery(app: FakeApplication, message: dict[str, Any]) -> WebhookDelivery:
    found: WebhookDelivery = app.db.row("webhook_deliveries", message["delivery_id"])
    return found


def test_a_delivery_posts_the_event_signed_with_its_id_and_succeeds_on_a_2xx(
    app: FakeApplication,
) -> None:
    endpoint = an_endpoint(app)
    event = an_event(app)
    message = only(app)

    assert run(app, message) is Outcome.SUCCEEDED

    [sent] = app.webhooks.sent
    assert sent.url == URL
    assert sent.message_id == event.id
    assert json.loads(sent.body) == event.model_dump(mode="json")
    assert sent.secrets == (endpoint.secret,)
    stored = delivery(app, message)
    assert (stored.state, stored.attempts, stored.last_status) == (DeliveryState.SUCCEEDED, 1, 200)
    assert stored.delivered_at == app.clock.now()


def test_the_body_is_compact_json_with_sorted_keys_whatever_order_the_database_kept() -> None:
    assert event_body({"b": 1, "a": {"d": 2, "c": "é"}}) == b'{"a":{"c":"\\u00e9","d":2},"b":1}'
    assert event_body({"a": {"c": "é", "d": 2}, "b": 1}) == event_body(
        {"b": 1, "a": {"d": 2, "c": "é"}}
    )


def test_a_failed_attempt_is_retried_after_a_backoff_by_the_sweep_with_the_same_id_and_body(
    app: FakeApplication,
) -> None:
    an_endpoint(app)
    an_event(app)
    app.webhooks.answer(URL, FAILED_500)
    message = only(app)
    failed_at = app.clock.now()

    assert run(app, message) is Outcome.RETRYING

    stored = delivery(app, message)
    assert stored.state is DeliveryState.PENDING
    assert (stored.attempts, stored.last_status, stored.last_error) == (1, 500, "HTTP 500: oops")
    assert failed_at <= stored.next_attempt_at <= failed_at + POLICY.base_delay
    assert messages(app) == [], "a retry is never a Celery countdown"
    app.clock.advance(stored.next_attempt_at - failed_at)
    assert send_due_deliveries(SendDueDeliveries(), app) == 1
    retried = only(app)
    assert retried == {"delivery_id": message["delivery_id"], "claim": 2}
    assert run(app, retried) is Outcome.SUCCEEDED
    first, second = app.webhooks.sent
    assert (second.message_id, second.body) == (first.message_id, first.body)
    assert delivery(app, message).attempts == 2


def test_each_retry_waits_at_most_the_exponential_ceiling_capped_at_the_longest_backoff(
    app: FakeApplication,
) -> None:
    an_endpoint(app)
    an_event(app)
    app.webhooks.answer(URL, *[FAILED_500] * 8)
    message = only(app)
    waits = []
    for _ in range(8):
        assert run(app, message) is Outcome.RETRYING
        now = app.clock.now()
        waits.append(delivery(app, message).next_attempt_at - now)
        app.clock.advance(waits[-1])
        assert send_due_deliveries(SendDueDeliveries(), app) == 1
        message = only(app)

    ceilings = [min(POLICY.base_delay * 2**n, POLICY.max_delay) for n in range(8)]
    assert all(
        timedelta(0) <= wait <= ceiling for wait, ceiling in zip(waits, ceilings, strict=True)
    )
    assert len(set(waits)) > 1, "full jitter draws each wait"


def test_retry_after_is_a_floor_of_the_next_attempt_capped_at_the_longest_backoff(
    app: FakeApplication,
) -> None:
    an_endpoint(app)
    an_event(app)
    app.webhooks.answer(
        URL,
        WebhookResponse(status=429, retry_after=40.0, error="HTTP 429"),
        WebhookResponse(status=503, retry_after=36_000.0, error="HTTP 503"),
    )
    message = only(app)

    assert run(app, message) is Outcome.RETRYING
    start = app.clock.now()
    first_retry = delivery(app, message).next_attempt_at
    assert start + timedelta(seconds=40) <= first_retry <= start + POLICY.max_delay
    app.clock.advance(first_retry - start)
    send_due_deliveries(SendDueDeliveries(), app)
    assert run(app, only(app)) is Outcome.RETRYING
    assert delivery(app, message).next_attempt_at == app.clock.now() + POLICY.max_delay


@pytest.mark.parametrize("status", [None, 400, 401, 404, 410, 429, 500, 503, 302])
def test_every_answer_but_a_2xx_is_retried(app: FakeApplication, status: int | None) -> None:
    an_endpoint(app)
    an_event(app)
    app.webhooks.answer(URL, WebhookResponse(status=status, error="no"))

    assert run(app, only(app)) is Outcome.RETRYING


def test_a_delivery_failing_for_its_whole_budget_fails_and_disables_its_endpoint_with_the_reason(
    app: FakeApplication,
) -> None:
    endpoint = an_endpoint(app)
    app.clock.advance(timedelta(seconds=1))  # the relay takes endpoints oldest first
    healthy = an_endpoint(app, OTHER_URL)
    event = an_event(app, "usr_1")
    first, to_healthy = messages(app)
    later = an_event(app, "usr_1")
    waiting, later_to_healthy = messages(app)
    app.webhooks.answer(URL, *[FAILED_500] * 100)
    assert run(app, to_healthy) is Outcome.SUCCEEDED
    assert run(app, later_to_healthy) is Outcome.SUCCEEDED
    assert run(app, waiting) is Outcome.WAITING
    started = app.clock.now()

    outcomes = [run(app, first)]
    for _ in range(100):
        if delivery(app, first).state is DeliveryState.FAILED:
            break
        app.clock.advance(delivery(app, first).next_attempt_at - app.clock.now())
        send_due_deliveries(SendDueDeliveries(), app)
        outcomes.extend(run(app, message) for message in messages(app))

    assert Outcome.FAILED in outcomes
    assert outcomes.count(Outcome.RETRYING) >= 5
    assert app.clock.now() - started <= POLICY.budget
    failed = delivery(app, first)
    assert failed.state is DeliveryState.FAILED
    disabled = app.db.row("webhook_endpoints", endpoint.id)
    assert not disabled.is_enabled
    assert disabled.disabled_reason == (
        f"delivery {failed.id} of {event.id} failed for 10m: HTTP 500: oops"
    )
    abandoned = delivery(app, waiting)
    assert abandoned.event_id == later.id
    assert abandoned.state is DeliveryState.FAILED
    assert abandoned.last_error == f"endpoint disabled: {disabled.disabled_reason}"
    assert abandoned.attempts == 0
    assert app.db.row("webhook_endpoints", healthy.id).is_enabled
    assert {url for url in (sent.url for sent in app.webhooks.sent)} == {URL, OTHER_URL}


def test_a_message_of_an_older_claim_does_nothing(app: FakeApplication) -> None:
    an_endpoint(app)
    app.published.fail_next(ConnectionError("redis down"))
    an_event(app)
    assert messages(app) == []
    message = {"delivery_id": app.db.rows("webhook_deliveries")[0].id, "claim": 1}
    app.clock.advance(POLICY.lease + timedelta(seconds=1))
    assert send_due_deliveries(SendDueDeliveries(), app) == 1
    current = only(app)

    assert run(app, message) is Outcome.STALE
    assert app.webhooks.sent == []
    assert run(app, current) is Outcome.SUCCEEDED
    assert run(app, current) is Outcome.STALE, "a duplicate of a finished delivery"
    assert len(app.webhooks.sent) == 1


def test_deliveries_whose_batch_could_not_go_are_sent_by_the_sweep_once_their_leases_end(
    app: FakeApplication,
) -> None:
    an_endpoint(app)
    an_endpoint(app, OTHER_URL)
    app.published.fail_next_batch(ConnectionError("redis went away"))
    an_event(app)
    assert messages(app) == []

    app.clock.advance(POLICY.lease - timedelta(seconds=1))
    assert send_due_deliveries(SendDueDeliveries(), app) == 0
    app.clock.advance(timedelta(seconds=2))
    assert send_due_deliveries(SendDueDeliveries(), app) == 2
    for message in messages(app):
        assert run(app, message) is Outcome.SUCCEEDED
    assert {sent.url for sent in app.webhooks.sent} == {URL, OTHER_URL}


def test_a_message_that_waited_past_its_lease_still_attempts_if_no_sweep_took_it(
    app: FakeApplication,
) -> None:
    an_endpoint(app)
    an_event(app)
    message = only(app)
    app.clock.advance(POLICY.lease * 2)  # a busy queue

    assert run(app, message) is Outcome.SUCCEEDED
    assert len(app.webhooks.sent) == 1


def test_an_attempt_renews_the_lease_so_that_no_sweep_takes_the_delivery_meanwhile(
    app: FakeApplication,
) -> None:
    an_endpoint(app)
    an_event(app)
    (stored,) = app.db.rows("webhook_deliveries")
    app.clock.advance(POLICY.lease * 2)
    app.webhooks.answer(URL, WebhookResponse(status=None, error="slow receiver"))
    taken_during_the_attempt: list[int] = []
    send = app.webhooks.send

    def slow_receiver(url: str, **request: Any) -> WebhookResponse:
        taken_during_the_attempt.append(send_due_deliveries(SendDueDeliveries(), app))
        return send(url, **request)

    app.webhooks.send = slow_receiver  # type: ignore[method-assign]

    run(app, {"delivery_id": stored.id, "claim": 1})

    assert taken_during_the_attempt == [0]


def test_a_later_event_of_a_subject_waits_until_the_earlier_one_succeeded_then_follows_at_once(
    app: FakeApplication,
) -> None:
    an_endpoint(app)
    earlier_event = an_event(app, "usr_1")
    earlier = only(app)
    later_event = an_event(app, "usr_1")
    later = only(app)
    other_subject = an_event(app, "usr_2")

    assert run(app, later) is Outcome.WAITING
    assert delivery(app, later).next_attempt_at == delivery(app, earlier).lease_until
    assert run(app, only(app)) is Outcome.SUCCEEDED, "another subject does not wait"
    app.webhooks.answer(URL, FAILED_500)
    assert run(app, earlier) is Outcome.RETRYING
    app.clock.advance(delivery(app, earlier).next_attempt_at - app.clock.now())
    assert send_due_deliveries(SendDueDeliveries(), app) == 1, "the later one still waits"
    assert run(app, only(app)) is Outcome.SUCCEEDED
    followed = only(app)
    assert followed["delivery_id"] == later["delivery_id"], "taken at once, not at a sweep"
    assert run(app, followed) is Outcome.SUCCEEDED

    assert [sent.message_id for sent in app.webhooks.sent] == [
        other_subject.id,
        earlier_event.id,
        earlier_event.id,
        later_event.id,
    ]


def test_a_delivery_to_a_disabled_endpoint_is_abandoned_with_the_endpoints_reason(
    app: FakeApplication,
) -> None:
    endpoint = an_endpoint(app)
    an_event(app)
    message = only(app)
    endpoint.disable("operator: receiver retired", app.clock.now())
    app.db.seed(endpoint)

    assert run(app, message) is Outcome.ABANDONED
    assert app.webhooks.sent == []
    stored = delivery(app, message)
    assert stored.state is DeliveryState.FAILED
    assert stored.last_error == "endpoint disabled: operator: receiver retired"
    assert stored.attempts == 0


def test_a_delivery_whose_endpoint_was_deleted_is_abandoned(app: FakeApplication) -> None:
    endpoint = an_endpoint(app)
    an_event(app)
    message = only(app)
    del app.db.tables["webhook_endpoints"][endpoint.id]

    assert run(app, message) is Outcome.ABANDONED
    assert delivery(app, message).last_error == "endpoint disabled: endpoint deleted"


def test_the_sweep_claims_due_deliveries_and_expired_leases_and_leaves_the_others(
    app: FakeApplication,
) -> None:
    an_endpoint(app)
    an_event(app, "usr_1")
    held = only(app)  # claimed by the relay, its message in flight
    an_event(app, "usr_2")
    app.webhooks.answer(URL, FAILED_500)
    retrying = only(app)
    run(app, retrying)

    assert send_due_deliveries(SendDueDeliveries(), app) == 0
    app.clock.advance(POLICY.lease + timedelta(seconds=1))
    assert send_due_deliveries(SendDueDeliveries(), app) == 2
    assert sorted((m["delivery_id"], m["claim"]) for m in messages(app)) == sorted(
        [(held["delivery_id"], 2), (retrying["delivery_id"], 2)]
    )
    assert send_due_deliveries(SendDueDeliveries(), app) == 0, "claimed: not taken twice"


def test_a_database_error_after_the_attempt_raises_and_the_same_message_delivers_again(
    app: FakeApplication,
) -> None:
    an_endpoint(app)
    an_event(app)
    message = only(app)
    app.db.before_next_commit(lambda: None)  # the attempt's start (its lease) commits
    app.db.before_next_commit(lambda: app.db.fail_next_commits(1))  # its outcome does not

    with pytest.raises(DatabaseUnavailable):
        run(app, message)
    assert delivery(app, message).state is DeliveryState.DELIVERING

    assert run(app, message) is Outcome.SUCCEEDED
    assert len(app.webhooks.sent) == 2, "at least once: the receiver dedupes by webhook-id"


def test_a_database_error_before_the_attempt_raises_and_sends_nothing_until_the_retry(
    app: FakeApplication,
) -> None:
    an_endpoint(app)
    an_event(app)
    message = only(app)
    app.db.fail_next_commits(1)

    with pytest.raises(DatabaseUnavailable):
        run(app, message)
    assert app.webhooks.sent == []

    assert run(app, message) is Outcome.SUCCEEDED
    assert len(app.webhooks.sent) == 1

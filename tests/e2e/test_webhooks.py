"""Webhooks on real parts: the API enables a user, a worker process relays its event and
delivers it over HTTP to a real receiver that verifies each request's signature
(``standardwebhooks``), beat's sweep sends the retries, and an endpoint failing for its whole
budget is disabled in the database. Short backoff and budget, so that each test takes
seconds."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from adapters.clock import SystemClock
from adapters.db.uow import SqlUnitOfWork
from domain.webhooks import DeliveryState, WebhookDelivery, WebhookEndpoint
from tests.support.records import create_user
from tests.support.stack import Stack, eventually, stack_env
from tests.support.webhook_receiver import Received, WebhookReceiver

pytestmark = pytest.mark.e2e

WEBHOOKS_REDIS_DB = 11
"""Redis databases 11 (SQLite) and 12 (PostgreSQL); the shared stacks use 1 and 2, chaos 9
and 10."""
BUDGET_SECONDS = 3.0
MAX_BACKOFF_SECONDS = 1.0
FAST_WEBHOOKS = {
    "BILLING_WEBHOOK_RETRY_BASE_SECONDS": "0.2",
    "BILLING_WEBHOOK_RETRY_MAX_SECONDS": str(MAX_BACKOFF_SECONDS),
    "BILLING_WEBHOOK_RETRY_BUDGET_SECONDS": str(BUDGET_SECONDS),
    "BILLING_WEBHOOK_SWEEP_INTERVAL_SECONDS": "0.5",
    "BILLING_EVENTS_RELAY_INTERVAL_SECONDS": "1",
    "BILLING_WEBHOOK_TIMEOUT_SECONDS": "5",
}


@pytest.fixture(scope="module")
def stack(
    backend: str, workdir: Path, redis_server: str, make_database: Callable[[str], str]
) -> Iterator[Stack]:
    """A stack of its own with fast webhook retries: a worker, beat and the API (no Stripe:
    enabling a user needs none)."""
    name = f"webhooks_{backend}"
    base = workdir / name
    base.mkdir(parents=True, exist_ok=True)
    database_url = make_database(name)
    redis_url = f"{redis_server}/{WEBHOOKS_REDIS_DB + (backend == 'postgresql')}"
    redis.Redis.from_url(redis_url).flushdb()
    env = stack_env(database_url=database_url, redis_url=redis_url, data_dir=base, **FAST_WEBHOOKS)
    system = Stack(name=name, database_url=database_url, redis_url=redis_url, workdir=base, env=env)
    try:
        system.start_worker()
        system.start_beat()
        system.start_api()
        system.client = system.new_client()
        yield system
    finally:
        system.stop()


@pytest.fixture
def register(stack: Stack) -> Iterator[Callable[[WebhookReceiver], WebhookEndpoint]]:
    """Register a receiver as an endpoint of every event; disabled after the test, so that
    later tests' events do not go to a receiver that is gone."""
    registered: list[WebhookEndpoint] = []

    def add(receiver: WebhookReceiver) -> WebhookEndpoint:
        endpoint = WebhookEndpoint.new(receiver.url, ["*"], datetime.now(UTC))
        with SqlUnitOfWork(stack.sessions) as uow:
            uow.webhook_endpoints.add(endpoint)
            uow.commit()
        receiver.secret = endpoint.secret
        registered.append(endpoint)
        return endpoint

    yield add
    with SqlUnitOfWork(stack.sessions) as uow:
        for endpoint in registered:
            stored = uow.webhook_endpoints.get(endpoint.id)
            if stored is not None and stored.disable("test over", datetime.now(UTC)):
                uow.webhook_endpoints.save(stored)
        uow.commit()


def enabled_user(stack: Stack) -> str:
    """A disabled user, enabled through the API (its ``user.enabled`` event follows)."""
    user = create_user(
        stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@example.com", disabled=True
    )
    with stack.http() as http:
        response = http.post(f"/v1beta1/users/{user.id}/enable", json={})
    assert response.status_code == 200, response.text
    stack.finished(response.headers["Command-Id"])
    return str(user.id)


def accepted_for(receiver: WebhookReceiver, user_id: str) -> Received | None:
    for request in receiver.accepted():
        if request.event["data"]["user_id"] == user_id:
            return request
    return None


def sample(url: str, name: str, **labels: str) -> float | None:
    """A sample an exporter serves now, parsed as Prometheus parses it (``None``: absent, or
    the exporter does not answer yet)."""
    try:
        text = httpx.get(url, timeout=5).text
    except httpx.HTTPError:
        return None
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and found.labels == labels:
                return found.value
    return None


def deliveries_of(stack: Stack, endpoint: WebhookEndpoint) -> list[WebhookDelivery]:
    with SqlUnitOfWork(stack.sessions) as uow:
        return uow.webhook_deliveries.find(endpoint_id=endpoint.id)


def test_an_enabled_user_is_delivered_as_a_signed_user_enabled_event(
    stack: Stack, register: Callable[[WebhookReceiver], WebhookEndpoint]
) -> None:
    with WebhookReceiver() as receiver:
        endpoint = register(receiver)
        user_id = enabled_user(stack)

        request = eventually(lambda: accepted_for(receiver, user_id), 15, "the delivery")

    assert request.verified
    event = request.event
    assert (event["type"], event["version"], event["data"]) == (
        "user.enabled",
        1,
        {"user_id": user_id, "state": "enabled"},
    )
    assert event["subject"] == {"type": "user", "id": user_id}
    assert request.webhook_id == event["id"]
    assert request.headers["content-type"] == "application/json"
    with SqlUnitOfWork(stack.sessions) as uow:
        recorded = uow.events.get(event["id"])
    assert recorded is not None
    assert recorded.document == event
    [delivery] = eventually(
        lambda: [d for d in deliveries_of(stack, endpoint) if d.state is DeliveryState.SUCCEEDED],
        5,
        "the delivery recorded succeeded",
    )
    assert (delivery.event_id, delivery.attempts, delivery.last_status) == (event["id"], 1, 200)


def test_a_receiver_failing_its_first_requests_still_gets_every_event_exactly_as_sent(
    stack: Stack, register: Callable[[WebhookReceiver], WebhookEndpoint]
) -> None:
    with WebhookReceiver(failures=3) as receiver:
        endpoint = register(receiver)
        users = [enabled_user(stack) for _ in range(3)]

        def every_event_accepted() -> list[Received] | None:
            accepted = receiver.accepted()
            return accepted if all(accepted_for(receiver, user) for user in users) else None

        accepted = eventually(every_event_accepted, 15, "every event accepted")
        requests = receiver.received()

    assert all(request.verified for request in requests)
    assert sorted(request.event["data"]["user_id"] for request in accepted) == sorted(users), (
        "each event accepted once"
    )
    assert [r.status for r in requests].count(500) == 3
    # Each retry is the same message: its webhook-id (what receivers dedupe by) and its body.
    by_id: dict[str, set[bytes]] = {}
    for request in requests:
        by_id.setdefault(request.webhook_id, set()).add(request.body)
    assert len(by_id) == 3
    assert all(len(bodies) == 1 for bodies in by_id.values())

    def all_succeeded() -> list[WebhookDelivery] | None:
        found = deliveries_of(stack, endpoint)
        succeeded = all(d.state is DeliveryState.SUCCEEDED for d in found)
        return found if len(found) == 3 and succeeded else None

    deliveries = eventually(all_succeeded, 5, "the deliveries recorded succeeded")
    assert sum(d.attempts for d in deliveries) == len(requests)


def test_an_endpoint_failing_for_its_whole_budget_is_disabled_with_the_reason(
    stack: Stack, register: Callable[[WebhookReceiver], WebhookEndpoint]
) -> None:
    with WebhookReceiver(always_fail=True) as receiver:
        endpoint = register(receiver)
        enabled_user(stack)

        def disabled() -> WebhookEndpoint | None:
            with SqlUnitOfWork(stack.sessions) as uow:
                stored = uow.webhook_endpoints.get(endpoint.id)
            return stored if stored is not None and not stored.is_enabled else None

        stored = eventually(disabled, BUDGET_SECONDS + 12, "the endpoint disabled")
        attempts = len(receiver.received())

    [delivery] = deliveries_of(stack, endpoint)
    assert delivery.state is DeliveryState.FAILED
    assert delivery.attempts == attempts >= 2
    assert stored.disabled_reason == (
        f"delivery {delivery.id} of {delivery.event_id} failed for 3s: HTTP 500"
    )
    assert delivery.last_attempt_at is not None
    assert delivery.first_attempt_at is not None
    # Counted by the worker once the task returned (just after its commit), and read by
    # beat from the database at each scrape.
    eventually(
        lambda: sample(
            stack.worker_metrics_urls["w1"], "billing_webhook_deliveries_total", outcome="failed"
        ),
        5,
        "the failed delivery counted",
    )
    assert sample(
        stack.worker_metrics_urls["w1"], "billing_webhook_deliveries_total", outcome="retrying"
    )
    eventually(
        lambda: sample(stack.beat_metrics_url, "billing_webhook_endpoints", state="disabled"),
        10,
        "beat's gauge of disabled endpoints",
    )
    assert sample(stack.beat_metrics_url, "billing_webhook_deliveries", state="failed")
    assert sample(stack.beat_metrics_url, "billing_events_unpublished") is not None
    # Given up when the next retry (at most the longest backoff away) would pass the budget;
    # the last attempt itself may run a sweep late.
    retried_for = (delivery.last_attempt_at - delivery.first_attempt_at).total_seconds()
    assert BUDGET_SECONDS - MAX_BACKOFF_SECONDS <= retried_for <= BUDGET_SECONDS + 2

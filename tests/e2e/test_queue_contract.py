"""Other services publish commands straight onto the queue with a plain Celery client.

These tests do not import our Celery app nor our task code: only the documented contract
(task name, queue, keyword arguments).
"""

from __future__ import annotations

import json
import uuid

import pytest
import redis
from celery import Celery

from adapters.clock import SystemClock
from tests.support.records import create_organization, create_user, user_state
from tests.support.stack import Stack, eventually

pytestmark = pytest.mark.e2e


def test_a_command_published_by_another_service_enables_the_user(
    stack: Stack, publisher: Celery
) -> None:
    user = create_user(
        stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io", disabled=True
    )
    command_id = str(uuid.uuid4())
    publisher.send_task(
        "users.enable", kwargs={"command_id": command_id, "user_id": user.id}, queue="users"
    )
    record = stack.finished(command_id)
    assert record.status.value == "succeeded"
    assert record.source == "queue"
    assert user_state(stack.sessions, str(user.id)) == "enabled"


def test_a_command_id_defaults_to_the_task_id(stack: Stack, publisher: Celery) -> None:
    user = create_user(stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io")
    task_id = str(uuid.uuid4())
    publisher.send_task("users.enable", kwargs={"user_id": user.id}, task_id=task_id, queue="users")
    record = stack.finished(task_id)
    assert record.status.value == "succeeded"


def test_the_same_command_delivered_twice_does_the_work_once(
    stack: Stack, publisher: Celery
) -> None:
    user = create_user(
        stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io", disabled=True
    )
    command_id = str(uuid.uuid4())
    for _ in range(2):
        publisher.send_task(
            "users.enable", queue="users", kwargs={"command_id": command_id, "user_id": user.id}
        )
    record = stack.finished(command_id)
    assert record.result == {"user_id": user.id, "was_already_enabled": False}
    assert record.attempts == 1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"user_id": "u", "colour": "red"}, "colour"),
        ({}, "user_id"),
        ({"user_id": 42}, "user_id"),
        ({"user_id": "u", "version": 2}, "version"),
    ],
)
def test_an_invalid_message_is_rejected_once_with_its_reason_recorded(
    stack: Stack, publisher: Celery, kwargs: dict[str, object], field: str
) -> None:
    command_id = str(uuid.uuid4())
    publisher.send_task("users.enable", kwargs={"command_id": command_id, **kwargs}, queue="users")
    record = stack.finished(command_id)
    assert record.status.value == "rejected"
    assert record.attempts == 1
    assert record.error is not None
    assert record.error["code"] == 3
    fields = [v["field"] for v in record.error["details"][0]["fieldViolations"]]
    assert field in fields


def test_positional_arguments_are_rejected(stack: Stack, publisher: Celery) -> None:
    task_id = str(uuid.uuid4())
    publisher.send_task("users.enable", args=["usr_1"], task_id=task_id, queue="users")
    record = stack.finished(task_id)
    assert record.status.value == "rejected"
    assert record.error is not None
    assert record.error["code"] == 3


def test_a_rejected_message_does_not_block_the_queue(stack: Stack, publisher: Celery) -> None:
    publisher.send_task("users.enable", kwargs={"nonsense": True}, queue="users")
    user = create_user(
        stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io", disabled=True
    )
    publisher.send_task("users.enable", kwargs={"user_id": user.id}, queue="users")
    eventually(
        lambda: user_state(stack.sessions, str(user.id)) == "enabled",
        what="the valid command after the invalid one",
    )


def test_another_service_creates_a_billing_account_with_the_same_command(
    stack: Stack, publisher: Celery
) -> None:
    org = create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex}")
    command_id = str(uuid.uuid4())
    account = {"name": "Acme", "email": "billing@acme.example", "currency": "EUR"}
    kwargs = {"command_id": command_id, "org_id": org.id, "account": account}
    for _ in range(2):  # delivered twice: one account, one customer
        publisher.send_task("billing.create_account", kwargs=kwargs, queue="billing")

    record = stack.finished(command_id)

    assert record.status.value == "succeeded", record.error
    assert record.result is not None
    created = record.result["billing_account"]
    assert created["org_id"] == org.id
    assert created["state"] == "active"
    assert created["currency"] == "eur"
    assert created["provider_id"].startswith("cus_")
    with stack.stripe as stripe:
        customer_posts = [
            logged
            for logged in stripe.requests(path_prefix="/v1/customers", method="POST")
            if logged.form.get("metadata", {}).get("billing_account_id") == created["id"]
            and not logged.replayed
        ]
    assert len(customer_posts) == 1


def test_a_tax_id_stripe_rejects_names_the_commands_field_not_the_http_requests(
    stack: Stack, publisher: Celery
) -> None:
    org = create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex}")
    command_id = str(uuid.uuid4())
    account = {
        "name": "Acme",
        "email": "billing@acme.example",
        "address": {"country": "DE"},
        "tax_data": [{"type": "eu_vat", "id": "DE12"}],
    }
    publisher.send_task(
        "billing.create_account",
        kwargs={"command_id": command_id, "org_id": org.id, "account": account},
        queue="billing",
    )

    record = stack.finished(command_id)

    assert record.status.value == "rejected"
    assert record.error is not None
    fields = [v["field"] for v in record.error["details"][0]["fieldViolations"]]
    assert fields == ["account.tax_data[0].id"]


def test_a_publisher_s_result_holds_the_command_s_outcome_and_no_started_state(
    stack: Stack, publisher: Celery
) -> None:
    user = create_user(
        stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io", disabled=True
    )
    task_id = str(uuid.uuid4())
    # Celery's Redis backend publishes every state it stores on the task's channel.
    stored = redis.Redis.from_url(stack.redis_url).pubsub()  # type: ignore[no-untyped-call]
    stored.subscribe(f"celery-task-meta-{task_id}")
    eventually(lambda: stored.get_message(timeout=0.1), 10, "the subscription")
    publisher.send_task("users.enable", kwargs={"user_id": user.id}, task_id=task_id, queue="users")
    states: list[str] = []

    def outcome() -> bool:
        message = stored.get_message(timeout=0.1)
        if message is not None and message["type"] == "message":
            states.append(json.loads(message["data"])["status"])
        return bool(states) and states[-1] in ("SUCCESS", "FAILURE")

    eventually(outcome, 30, "the task's stored outcome")
    stored.close()

    # No STARTED first (task_track_started off: a read and a write to Redis per task that
    # nothing reads); the publisher's result is the outcome.
    assert states == ["SUCCESS"]
    assert stack.finished(task_id).status.value == "succeeded"

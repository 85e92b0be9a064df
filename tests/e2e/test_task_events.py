"""A worker's task events, what Flower shows: every task's events reach Redis, published
together (``adapters.messaging.broker.GuardedConsumer``) rather than about two messages a
task."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest
import redis
from celery import Celery

from adapters.clock import SystemClock
from tests.support.records import create_user
from tests.support.stack import Stack, eventually

pytestmark = pytest.mark.e2e

COMMANDS = 100


def events_in(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The task events one pub/sub message of the worker carries."""
    envelope = json.loads(message["data"])
    body = envelope["body"]
    if envelope["properties"].get("body_encoding") == "base64":
        body = base64.b64decode(body)
    events = json.loads(body)
    return events if isinstance(events, list) else [events]


def test_a_worker_s_task_events_all_arrive_in_fewer_messages_than_its_tasks(
    stack: Stack, publisher: Celery
) -> None:
    users = [
        create_user(stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io").id
        for _ in range(COMMANDS)
    ]
    task_ids = {str(uuid.uuid4()) for _ in users}
    listener = redis.Redis.from_url(stack.redis_url).pubsub()  # type: ignore[no-untyped-call]
    listener.psubscribe("*celeryev*")
    eventually(lambda: listener.get_message(timeout=0.1), 10, "the subscription")

    for task_id, user_id in zip(sorted(task_ids), users, strict=True):
        publisher.send_task(
            "users.enable", kwargs={"user_id": user_id}, task_id=task_id, queue="users"
        )
    succeeded: set[str] = set()
    messages = 0

    def all_succeeded() -> bool:
        nonlocal messages
        while (message := listener.get_message(timeout=0.1)) is not None:
            if message["type"] != "pmessage":
                continue
            ours = [event for event in events_in(message) if event.get("uuid") in task_ids]
            messages += bool(ours)
            succeeded.update(e["uuid"] for e in ours if e["type"] == "task-succeeded")
        return succeeded == task_ids

    eventually(all_succeeded, 60, "every task's task-succeeded event")
    listener.close()

    # Received, started and succeeded for each: about 2.3 messages a task before.
    assert messages < COMMANDS

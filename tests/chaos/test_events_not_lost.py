"""Events survive what happens between the commit that wrote them and their publication."""

from __future__ import annotations

import os
import signal
import uuid

import pytest
import redis

from adapters.clock import SystemClock
from tests.chaos.conftest import StackFactory
from tests.support.events import STREAM, outbox_rows, stream_entries
from tests.support.records import create_user
from tests.support.stack import eventually

pytestmark = pytest.mark.chaos

RELAY_LOCK = f"{STREAM}:relay-lock"


def test_a_worker_killed_after_the_commit_and_before_the_publish_still_has_its_event_published(
    make_stack: StackFactory,
) -> None:
    stack = make_stack({"BILLING_EVENTS_RELAY_INTERVAL_SECONDS": "0.5"})
    client = redis.Redis.from_url(stack.redis_url)
    client.xgroup_create(STREAM, "tests", id="$", mkstream=True)
    user_id = str(
        create_user(
            stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io", disabled=True
        ).id
    )
    # The relay's lock is taken, as by a relay that hangs: the worker commits the change and
    # its event, and cannot publish it.
    client.set(RELAY_LOCK, "held-by-the-test", px=120_000)
    worker = stack.start_worker("doomed", concurrency=1)
    stack.start_api()
    stack.client = stack.new_client()
    with stack.http() as http:
        response = http.post(f"/v1beta1/users/{user_id}/enable", json={})
    assert response.status_code == 200, response.text
    (row,) = outbox_rows(stack.sessions, f"user:{user_id}")
    assert row.published_at is None

    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait()
    client.delete(RELAY_LOCK)
    stack.start_worker("after", concurrency=1)
    stack.start_beat()

    eventually(
        lambda: outbox_rows(stack.sessions, f"user:{user_id}")[0].published_at,
        timeout=30,
        what="beat's relay to publish the event",
    )
    answer = client.xreadgroup("tests", "c1", {STREAM: ">"}, count=100)
    events = [fields[b"id"].decode() for _entry, fields in stream_entries(answer)]
    assert events.count(row.id) == 1

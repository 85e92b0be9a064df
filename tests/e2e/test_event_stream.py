"""Events out onto the Redis stream: written with the change, relayed right after the
command, read by consumer groups that acknowledge what they read."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis

from adapters.clock import SystemClock
from domain.events.catalog import parse_event
from tests.support.events import STREAM, outbox_rows, read_group
from tests.support.records import create_organization, create_user
from tests.support.stack import Stack, eventually

pytestmark = pytest.mark.e2e


def new_group(client: redis.Redis) -> str:
    group = f"tests-{uuid.uuid4().hex[:8]}"
    client.xgroup_create(STREAM, group, id="$", mkstream=True)
    return group


def read_until(
    client: redis.Redis, group: str, wanted: set[str], timeout: float = 15.0
) -> list[dict[str, Any]]:
    """Read the group until every event id in ``wanted`` came; returns what came, in order."""
    seen: list[dict[str, Any]] = []

    def all_came() -> bool:
        seen.extend(event for _entry, event in read_group(client, group, "c1"))
        return wanted <= {event["id"] for event in seen}

    eventually(all_came, timeout, f"events {sorted(wanted)} on the stream")
    return seen


def test_a_consumer_group_reads_every_event_of_the_commands_in_order(stack: Stack) -> None:
    client = redis.Redis.from_url(stack.redis_url)
    group = new_group(client)
    user_ids = [
        str(
            create_user(
                stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io", disabled=True
            ).id
        )
        for _ in range(3)
    ]
    org = create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex[:8]}")
    with stack.http() as http:
        for user_id in user_ids:
            assert http.post(f"/v1beta1/users/{user_id}/enable", json={}).status_code == 200
        created = http.post(
            f"/v1beta1/organizations/{org.id}/billing",
            json={"body": {"name": "Acme", "email": "billing@acme.example"}},
        )
        assert created.status_code == 200, created.text
    account_id = created.json()["billing_account"]["id"]
    written = [
        row.document
        for key in [*(f"user:{user_id}" for user_id in user_ids), f"billing_account:{account_id}"]
        for row in outbox_rows(stack.sessions, key)
    ]
    assert len(written) == 5

    came = read_until(client, group, {event["id"] for event in written})

    ours = [event for event in came if event["id"] in {each["id"] for each in written}]
    assert sorted(event["id"] for event in ours) == sorted(event["id"] for event in written)
    account_events = [event["type"] for event in ours if event["subject"]["id"] == account_id]
    assert account_events == ["billing_account.created", "billing_account.registered"]
    for event in ours:
        assert parse_event(event).model_dump(mode="json") == event
    assert client.xpending(STREAM, group)["pending"] == 0
    # The relay records them published in a transaction after the stream took them: a
    # consumer may read them first (CI, SQLite under load).
    eventually(
        lambda: all(
            row.published_at is not None
            for key in (f"user:{user_id}" for user_id in user_ids)
            for row in outbox_rows(stack.sessions, key)
        ),
        timeout=10,
        what="the outbox to record the events published",
    )


def test_each_consumer_group_gets_its_own_copy_of_every_event(stack: Stack) -> None:
    client = redis.Redis.from_url(stack.redis_url)
    billing, analytics = new_group(client), new_group(client)
    user_id = str(
        create_user(
            stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io", disabled=True
        ).id
    )
    with stack.http() as http:
        assert http.post(f"/v1beta1/users/{user_id}/enable", json={}).status_code == 200
    (row,) = outbox_rows(stack.sessions, f"user:{user_id}")

    for group in (billing, analytics):
        came = read_until(client, group, {row.id})
        assert [event["type"] for event in came if event["id"] == row.id] == ["user.enabled"]

"""Stripe's event storm at the period end, on real Redis, worker processes, the API and the
Stripe emulator (SQLite and PostgreSQL): the syncs Stripe's events ask for wait behind the
due changes and an account creation, and the events of one object make one read of it.

The order of work is read from the command log (one worker process takes one message at a
time, so the order its commands finish in is the order it took them) and the reads from the
emulator's request log: counts and order, no timings."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
import redis

from adapters.clock import SystemClock
from adapters.db.models import CommandRow
from application.requests.sweeps import ENQUEUE_DUE_CHANGES
from domain.billing.account_commands import CreateBillingAccount
from domain.provider.sync import SyncStripeObject
from domain.subscriptions.change_commands import ApplyScheduledChange
from domain.subscriptions.change_states import ChangeState
from tests.chaos.conftest import StackFactory
from tests.chaos.test_scheduled_changes import schedule_changes, states
from tests.support.records import create_organization
from tests.support.stack import Stack, eventually
from tests.support.stripe_events import event, signature
from tests.support.subscriptions import (
    DAY,
    Subscribed,
    new_account,
    new_plan,
    operator,
    subscribe,
)

pytestmark = pytest.mark.chaos

APPLY_CHANGE = ApplyScheduledChange.TASK_NAME


def deliver(
    stack: Stack, http: httpx.Client, sub: Subscribed, created_ago: timedelta = timedelta()
) -> dict[str, Any]:
    """A signed ``customer.subscription.updated`` for ``sub``, as Stripe sends it (created at
    the emulator's time, less ``created_ago``)."""
    with stack.stripe as emulator:
        created = emulator.now() - int(created_ago.total_seconds())
    raw = event(
        "customer.subscription.updated",
        {"id": sub.provider_id, "object": "subscription"},
        f"evt_{uuid.uuid4().hex[:24]}",
        created=created,
    )
    answer = http.post(
        "/webhooks/stripe",
        content=raw,
        headers={"Content-Type": "application/json", "Stripe-Signature": signature(raw)},
    )
    assert answer.status_code == 200, answer.text
    document: dict[str, Any] = answer.json()
    return document


def rows_of(stack: Stack, *types: str) -> list[CommandRow]:
    with stack.sessions() as session:
        return list(session.query(CommandRow).filter(CommandRow.type.in_(types)).all())


def syncs_of(stack: Stack, sub: Subscribed) -> list[CommandRow]:
    return [
        row
        for row in rows_of(stack, SyncStripeObject.TASK_NAME)
        if row.payload["object_id"] == sub.provider_id
    ]


def reads_of(stack: Stack, sub: Subscribed) -> int:
    with stack.stripe as emulator:
        return len(emulator.requests(f"/v1/subscriptions/{sub.provider_id}", method="GET"))


def queued_tasks(stack: Stack, queue: str) -> list[str]:
    """The names of the tasks waiting on ``queue``, over its priority lists (kombu names
    them after it)."""
    client = redis.Redis.from_url(stack.redis_url)
    return [
        json.loads(message)["headers"]["task"]
        for key in client.scan_iter(f"{queue}*")
        for message in client.lrange(key, 0, -1)
    ]


def until(check: Callable[[], bool], what: str) -> None:
    eventually(lambda: check() or None, timeout=60, interval=0.1, what=what)


def test_stripe_s_syncs_wait_behind_the_due_changes_and_an_account_creation(
    make_stack: StackFactory,
) -> None:
    # Beat's sweep expires four intervals after it is queued (40 s here): still fresh once the
    # worker is up, however long a loaded machine takes to start it.
    stack = make_stack({"BILLING_SCHEDULED_CHANGES_INTERVAL_SECONDS": "10"})
    _, change_ids, _ = schedule_changes(stack, 6)
    ctx = operator(stack)
    plan = new_plan(ctx, "storm", 1900)
    account = new_account(ctx)
    stormed = [subscribe(ctx, account, plan) for _ in range(12)]
    org = create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex}")
    stack.start_api()
    client = stack.new_client()
    stack.advance_time(32 * DAY)  # every change is due

    # The storm first, then an account creation: all of it queued before any worker runs.
    with httpx.Client(base_url=stack.api_url, timeout=30) as http:
        for sub in stormed:
            for _ in range(3):  # a renewal's events
                deliver(stack, http, sub)
    with stack.http(client, headers={"Prefer": "respond-async"}) as http:
        created = http.post(
            f"/v1beta1/organizations/{org.id}/billing",
            json={"body": {"name": "Acme", "email": "billing@acme.example"}},
        )
    assert created.status_code == 202, created.text
    creation_id = created.headers["Command-Id"]
    # Beat's sweep is queued before the worker starts: the worker finds the whole backlog.
    stack.start_beat()
    until(
        lambda: ENQUEUE_DUE_CHANGES in queued_tasks(stack, "maintenance"),
        "beat's due-changes sweep queued",
    )
    stack.start_worker("w1", concurrency=1)

    until(lambda: states(stack, change_ids)[ChangeState.APPLIED] == 6, "the changes applied")
    stack.finished(creation_id, timeout=60)
    until(
        lambda: all(
            row.finished_at is not None for row in rows_of(stack, SyncStripeObject.TASK_NAME)
        ),
        "every sync done",
    )

    rows = rows_of(stack, SyncStripeObject.TASK_NAME, APPLY_CHANGE, CreateBillingAccount.TASK_NAME)
    assert {row.status for row in rows} == {"succeeded"}
    finished = {row.id: row.finished_at for row in rows if row.finished_at is not None}
    order = [row.type for row in sorted(rows, key=lambda row: finished[row.id])]
    assert order.count(SyncStripeObject.TASK_NAME) == len(stormed)  # one per object
    assert order.count(APPLY_CHANGE) == 6
    first_sync = order.index(SyncStripeObject.TASK_NAME)
    assert order.index(CreateBillingAccount.TASK_NAME) < first_sync, order
    assert APPLY_CHANGE not in order[first_sync:], order


def test_the_events_of_one_subscription_make_one_read_and_none_is_lost(
    make_stack: StackFactory,
) -> None:
    stack = make_stack({})
    ctx = operator(stack)
    plan = new_plan(ctx, "coalesced", 1900)
    sub, raced = subscribe(ctx, new_account(ctx), plan), subscribe(ctx, new_account(ctx), plan)
    stack.start_api()
    with stack.stripe as emulator:
        emulator.clear_requests()

    with httpx.Client(base_url=stack.api_url, timeout=30) as http:
        answers = [deliver(stack, http, sub) for _ in range(40)]  # the worker is not running yet
        [first] = [answer for answer in answers if not answer["duplicate"]]
        assert {answer["command_id"] for answer in answers} == {first["command_id"]}
        assert len(syncs_of(stack, sub)) == 1

        # A sync a worker has begun (marked running, as a worker does before it reads) may
        # have read already: an event arriving now gets a read of its own, after it.
        started = deliver(stack, http, raced)["command_id"]
        begun = stack.command(started)
        stack.commands.begin(started, begun.type, begun.payload, source="worker")
        during = deliver(stack, http, raced)
        assert during["duplicate"] is False
        assert during["command_id"] != started

        stack.start_worker("w1", concurrency=1)
        assert stack.finished(during["command_id"]).status.value == "succeeded"
        assert reads_of(stack, raced) == 1
        assert stack.finished(first["command_id"]).status.value == "succeeded"
        assert reads_of(stack, sub) == 1

        # Older than the read that just ran (a redelivery after an outage): nothing to do.
        late = deliver(stack, http, sub, created_ago=timedelta(minutes=10))
        assert (late["command_id"], late["duplicate"]) == (None, True)
        assert len(syncs_of(stack, sub)) == 1

        # After the read: a read of its own, which comes after it.
        fresh = deliver(stack, http, sub)
        assert fresh["duplicate"] is False
        assert fresh["command_id"] != first["command_id"]
        assert stack.finished(fresh["command_id"]).status.value == "succeeded"
        assert reads_of(stack, sub) == 2
        assert len(syncs_of(stack, sub)) == 2

"""The period-end burst at Stripe's test-mode rate: 300 changes fall due together, the
emulator allows 25 writes a second, two worker nodes of four processes apply them. The
shared budget drains them at Stripe's pace: every change applied once, nothing failed, no
lease run out, hardly a 429; and an account created over HTTP meanwhile is answered at once.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from adapters.clock import SystemClock
from domain.subscriptions.change_states import ChangeState
from stripe_emulator import LoggedRequest
from tests.chaos.conftest import StackFactory
from tests.chaos.test_scheduled_changes import schedule_changes, states
from tests.support.records import create_organization
from tests.support.stack import eventually
from tests.support.subscriptions import DAY, executed_updates, stored_change

pytestmark = pytest.mark.chaos

CHANGES = 300
STRIPE_RATE = 25  # Stripe's test mode, for writes (and, apart, for reads)
BURST = 5  # the budget's default: a fifth of a second's rate
NETWORK_JITTER = 2
"""Calls the emulator may see in a window beyond the budget's own bound: two requests sent
a few milliseconds apart can arrive closer together than they left."""


def most_calls_in_any_second(requests: list[LoggedRequest]) -> int:
    times = sorted(request.wall_time for request in requests)
    most, start = 0, 0
    for end, at in enumerate(times):
        while at - times[start] >= 1.0:
            start += 1
        most = max(most, end - start + 1)
    return most


def test_a_burst_of_due_changes_drains_at_stripes_pace_with_nothing_failed(
    make_stack: StackFactory,
) -> None:
    stack = make_stack({"BILLING_SCHEDULED_CHANGE_LEASE_SECONDS": "30"})
    subscribed, change_ids, team_price = schedule_changes(stack, CHANGES)
    org = create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex}")
    with stack.stripe as emulator:
        emulator.set_rate_limit(STRIPE_RATE)
        emulator.clear_requests()
    stack.start_worker("w1", concurrency=4)
    stack.start_worker("w2", concurrency=4)
    stack.start_api()
    client = stack.new_client()
    stack.advance_time(32 * DAY)  # every change is due
    stack.start_beat()

    eventually(
        lambda: states(stack, change_ids)[ChangeState.APPLIED] >= CHANGES // 3,
        timeout=60,
        interval=0.2,
        what="the burst under way",
    )
    with stack.http(client) as http:
        created = http.post(
            f"/v1beta1/organizations/{org.id}/billing",
            json={"body": {"name": "Acme", "email": "billing@acme.example"}},
        )
    assert created.status_code == 200, created.text  # within the synchronous wait

    eventually(
        lambda: states(stack, change_ids)[ChangeState.APPLIED] == CHANGES,
        timeout=120,
        interval=0.5,
        what=f"{CHANGES} changes applied (so far {dict(states(stack, change_ids))})",
    )
    assert stack.commands.list_failed() == []
    assert {stored_change(stack, change_id).claims for change_id in change_ids} == {1}
    with stack.stripe as emulator:
        for sub in subscribed:
            [update] = executed_updates(emulator, sub.provider_id)
            assert update.form["items"]["0"]["price"] == team_price
        calls = emulator.requests()
    statuses = Counter(request.status for request in calls)
    assert statuses[429] <= 0.01 * len(calls), statuses
    writes = [request for request in calls if request.method != "GET"]
    assert most_calls_in_any_second(writes) <= STRIPE_RATE + BURST + 1 + NETWORK_JITTER
    # A change is one read (its boundary, checked) and one write.
    assert len(writes) >= CHANGES
    reads = [request for request in calls if request.method == "GET"]
    assert CHANGES <= len(reads) <= 1.01 * CHANGES + 1
    assert most_calls_in_any_second(reads) <= STRIPE_RATE + BURST + 1 + NETWORK_JITTER


def test_commands_that_wait_for_the_budget_are_requeued_without_using_their_retry_budget(
    make_stack: StackFactory,
) -> None:
    # Two calls a second, no burst, and no task may block for a token: every call that finds
    # the budget spent is re-queued until its token is due. One attempt per command: a wait
    # counted as a failure would fail the command.
    stack = make_stack(
        {
            "BILLING_STRIPE_RATE_PER_SECOND": "2",
            "BILLING_STRIPE_BURST": "0",
            "BILLING_STRIPE_MAX_WAIT_SECONDS": "0",
            "BILLING_RETRY_MAX_ATTEMPTS": "1",
        }
    )
    stack.start_worker("w1", concurrency=4)
    stack.start_api()
    client = stack.new_client()
    orgs = [
        create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex}").id
        for _ in range(6)
    ]

    with stack.http(client, headers={"Prefer": "respond-async"}) as http:
        command_ids = [
            http.post(
                f"/v1beta1/organizations/{org_id}/billing",
                json={"body": {"name": "Acme", "email": "billing@acme.example"}},
            ).headers["Command-Id"]
            for org_id in orgs
        ]

    records = [stack.finished(command_id, timeout=30) for command_id in command_ids]
    assert {record.status.value for record in records} == {"succeeded"}
    assert all(record.retries == [] for record in records)
    assert max(record.attempts for record in records) > 1  # some of them waited
    with stack.stripe as emulator:
        creations = emulator.requests("/v1/customers", method="POST")
    assert len(creations) == len(orgs)  # a waiting command never reached Stripe
    sent = sorted(request.wall_time for request in creations)
    assert sent[-1] - sent[0] >= (len(orgs) - 1) / 2 - 0.1  # two a second

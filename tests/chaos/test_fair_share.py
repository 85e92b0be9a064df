"""One client's fair share: a client allowed to change one organization's subscriptions
sends synchronous previews from 8 threads through a period end, on real Redis, a worker
process, beat, the API and the Stripe emulator (SQLite and PostgreSQL). Its commands beyond
its share are refused (429, ``Retry-After``, the error body) before anything is recorded,
and every other organization's due change is applied while the flood goes on."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import httpx
import pytest
import redis

from adapters.db.models import CommandRow
from domain.permissions import Grant, Scope
from domain.subscriptions.change_previews import PreviewPlanChange
from domain.subscriptions.change_states import ChangeState
from tests.chaos.conftest import StackFactory
from tests.chaos.test_scheduled_changes import schedule_changes, states
from tests.support.stack import Stack, eventually
from tests.support.subscriptions import DAY, new_account, new_plan, operator, subscribe

pytestmark = pytest.mark.chaos

CHANGES = 10
FLOOD_THREADS = 8


def until_queued(stack: Stack, queue: str) -> None:
    """Until a message waits on ``queue`` (any of its priority lists, named after it)."""
    client = redis.Redis.from_url(stack.redis_url)
    eventually(
        lambda: sum(int(client.llen(key)) for key in client.scan_iter(f"{queue}*")) or None,
        timeout=60,
        what=f"a message on {queue}",
    )


def previews_recorded(stack: Stack) -> int:
    with stack.sessions() as session:
        return (
            session.query(CommandRow).filter(CommandRow.type == PreviewPlanChange.TASK_NAME).count()
        )


def test_one_client_s_preview_flood_does_not_hold_back_the_period_end(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(
        {"BILLING_CLIENT_COMMANDS_PER_SECOND": "2", "BILLING_CLIENT_COMMAND_BURST": "2"}
    )
    _, change_ids, _ = schedule_changes(stack, CHANGES)
    ctx = operator(stack)
    target = subscribe(ctx, new_account(ctx), new_plan(ctx, "flooded", 900))
    other_plan = new_plan(ctx, "flooded-to", 2900)
    flooder = stack.new_client(
        "flooder",
        grant=Grant(
            scopes=frozenset({Scope.SUBSCRIPTIONS_CHANGE}), org_ids=frozenset({target.org_id})
        ),
    )
    stack.start_worker("w1", concurrency=1)
    stack.start_api()

    stop = threading.Event()
    lock = threading.Lock()
    statuses: Counter[int] = Counter()
    refusals: list[httpx.Response] = []

    def flood() -> None:
        with stack.http(flooder) as http:
            while not stop.is_set():
                answer = http.post(f"{target.change_url}/preview", json={"plan": other_plan.name})
                with lock:
                    statuses[answer.status_code] += 1
                    if answer.status_code == 429 and len(refusals) < 5:
                        refusals.append(answer)
                if answer.status_code == 429:  # a client that reads Retry-After
                    stop.wait(float(answer.headers["Retry-After"]))

    threads = [threading.Thread(target=flood) for _ in range(FLOOD_THREADS)]
    for thread in threads:
        thread.start()
    try:
        eventually(lambda: statuses[200] > 0, timeout=60, what="the flood under way")
        stack.advance_time(32 * DAY)  # every change is due, while the previews go on
        stack.start_beat()
        eventually(
            lambda: states(stack, change_ids)[ChangeState.APPLIED] == CHANGES or None,
            timeout=90,
            interval=0.2,
            what=f"every change applied during the flood ({dict(states(stack, change_ids))})",
        )
        flooding = not stop.is_set() and all(thread.is_alive() for thread in threads)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)

    assert flooding
    assert statuses[429] > 0, statuses
    assert statuses[500] == 0, statuses
    refusal: Any = refusals[0].json()
    assert refusals[0].headers["Retry-After"].isdigit()
    assert refusal["code"] == 8  # RESOURCE_EXHAUSTED
    assert refusal["details"][0]["reason"] == "CLIENT_COMMAND_RATE_EXCEEDED"
    # A refused request recorded nothing: every preview recorded was answered (200, 202, or
    # the preview's own error once the period rolled).
    answered = sum(count for status, count in statuses.items() if status != 429)
    assert previews_recorded(stack) == answered


def test_a_client_s_backlog_ahead_of_the_period_end_is_at_most_its_burst(
    make_stack: StackFactory,
) -> None:
    # One token a minute and a burst of 2: within this test, the client has three commands.
    stack = make_stack(
        {
            "BILLING_CLIENT_COMMANDS_PER_SECOND": str(1 / 60),
            "BILLING_CLIENT_COMMAND_BURST": "2",
            # Beat's sweeps expire after four intervals: some are fresh once the worker is up.
            "BILLING_SCHEDULED_CHANGES_INTERVAL_SECONDS": "2",
        }
    )
    _, change_ids, _ = schedule_changes(stack, CHANGES)
    ctx = operator(stack)
    target = subscribe(ctx, new_account(ctx), new_plan(ctx, "backlog", 900))
    other_plan = new_plan(ctx, "backlog-to", 2900)
    one_org = Grant(
        scopes=frozenset({Scope.SUBSCRIPTIONS_CHANGE}), org_ids=frozenset({target.org_id})
    )
    flooder = stack.new_client("flooder", grant=one_org)
    stack.start_api()

    # The flood is queued before any worker runs: 8 threads, 5 previews each.
    statuses: Counter[int] = Counter()
    lock = threading.Lock()

    def flood() -> None:
        with stack.http(flooder, headers={"Prefer": "respond-async"}) as http:
            for _ in range(5):
                answer = http.post(f"{target.change_url}/preview", json={"plan": other_plan.name})
                with lock:
                    statuses[answer.status_code] += 1

    threads = [threading.Thread(target=flood) for _ in range(FLOOD_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stack.advance_time(32 * DAY)
    stack.start_beat()
    until_queued(stack, "maintenance")
    stack.start_worker("w1", concurrency=1)
    eventually(
        lambda: states(stack, change_ids)[ChangeState.APPLIED] == CHANGES or None,
        timeout=90,
        interval=0.2,
        what="every change applied",
    )

    assert statuses == {202: 3, 429: FLOOD_THREADS * 5 - 3}, statuses
    assert previews_recorded(stack) == 3  # what the worker does for this client: its share

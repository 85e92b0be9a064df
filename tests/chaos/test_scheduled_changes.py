"""Due plan changes under pressure: two beats sweeping together, workers killed mid-change.
Every change reaches Stripe exactly once (the emulator's request log says so)."""

from __future__ import annotations

import json
import os
import re
import signal
import uuid
from collections import Counter
from datetime import datetime

import pytest

from adapters.clock import SystemClock
from adapters.db.uow import SqlUnitOfWork
from domain.subscriptions.change_states import ChangeState
from domain.subscriptions.scheduled_changes import ScheduledChange
from tests.chaos.conftest import StackFactory
from tests.support.stack import Stack, eventually
from tests.support.subscriptions import (
    DAY,
    Subscribed,
    change_in,
    executed_updates,
    new_account,
    new_plan,
    operator,
    stored_change,
    stored_subscription,
    subscribe,
)

pytestmark = pytest.mark.chaos


TEAM_AMOUNT = 2900
"""The team plan's price (:func:`schedule_changes`): what each period after a change costs."""


def schedule_changes(stack: Stack, count: int) -> tuple[list[Subscribed], list[str], str]:
    """``count`` subscriptions of one account on a starter plan, each with a change to a team
    plan at its period's end; returns them, the change ids and the team plan's price id."""
    ctx = operator(stack)
    starter = new_plan(ctx, "starter", 900)
    team = new_plan(ctx, "team", TEAM_AMOUNT)
    assert team.provider_price_id is not None
    account = new_account(ctx)
    subscribed = [subscribe(ctx, account, starter) for _ in range(count)]
    now = SystemClock().now()
    with SqlUnitOfWork(stack.sessions) as uow:
        change_ids = []
        for sub in subscribed:
            subscription = uow.subscriptions.get(sub.id)
            assert subscription is not None
            change = ScheduledChange.at_period_end(
                f"chg_{uuid.uuid4().hex}", subscription, team, now=now
            )
            uow.scheduled_changes.add(change)
            change_ids.append(change.id)
        uow.commit()
    return subscribed, change_ids, team.provider_price_id


def states(stack: Stack, change_ids: list[str]) -> Counter[ChangeState]:
    with SqlUnitOfWork(stack.sessions) as uow:
        return Counter(
            change.state
            for change_id in change_ids
            if (change := uow.scheduled_changes.get(change_id)) is not None
        )


def test_two_beats_over_200_due_changes_update_stripe_once_per_change(
    make_stack: StackFactory,
) -> None:
    # A lease longer than the test: a change claimed twice would be a sweep's mistake. Small
    # batches: many sweeps of both beats, run by both workers, race for the same changes.
    stack = make_stack(
        {
            "BILLING_SCHEDULED_CHANGE_LEASE_SECONDS": "120",
            "BILLING_SCHEDULED_CHANGES_BATCH_SIZE": "10",
        }
    )
    subscribed, change_ids, team_price = schedule_changes(stack, 200)
    stack.advance_time(32 * DAY)  # every change is due

    stack.start_worker("w1", concurrency=2)
    stack.start_worker("w2", concurrency=2)
    stack.start_beat("beat-a")
    stack.start_beat("beat-b")

    eventually(
        lambda: states(stack, change_ids)[ChangeState.APPLIED] == len(change_ids),
        timeout=120,
        interval=0.5,
        what=f"200 changes applied (so far {dict(states(stack, change_ids))})",
    )
    with stack.stripe as emulator:
        for sub in subscribed:
            [update] = executed_updates(emulator, sub.provider_id)
            assert update.form["items"]["0"]["price"] == team_price
    sweeps = [
        int(claimed)
        for worker in ("w1", "w2")
        for claimed in re.findall(
            r"claimed (\d+) due plan changes", (stack.workdir / f"worker-{worker}.log").read_text()
        )
    ]
    assert sum(sweeps) == len(change_ids)  # each claimed once, in many sweeps
    assert len(sweeps) >= len(change_ids) // 10
    claims = {stored_change(stack, change_id).claims for change_id in change_ids}
    assert claims == {1}
    for beat in ("beat-a", "beat-b"):
        log = (stack.workdir / f"{beat}.log").read_text()
        assert "Sending due task apply-due-plan-changes" in log, f"{beat} never swept"


def test_a_worker_killed_mid_change_leaves_it_applied_exactly_once(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(
        {
            "BILLING_SCHEDULED_CHANGE_LEASE_SECONDS": "3",
            "BILLING_BROKER_VISIBILITY_TIMEOUT_SECONDS": "4",
        }
    )
    [sub], [change_id], team_price = schedule_changes(stack, 1)
    stack.advance_time(32 * DAY)
    with stack.stripe as emulator:
        # Stripe makes the change, then answers nothing for a while.
        emulator.add_fault(
            "hang",
            f"POST /v1/subscriptions/{sub.provider_id}",
            after_execution=True,
            hang_seconds=5,
            count=1,
        )
        first = stack.start_worker("first", concurrency=1)
        stack.start_beat()
        eventually(lambda: emulator.faults()[0].fired == 1, timeout=20, what="the change under way")
        assert stored_change(stack, change_id).state is ChangeState.APPLYING
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        stack.start_worker("second", concurrency=1)

        applied = eventually(
            lambda: change_in(stack, change_id, ChangeState.APPLIED),
            timeout=40,
            what="the change applied by another worker",
        )
        # The hung request is logged once its connection closes.
        [update] = eventually(
            lambda: executed_updates(emulator, sub.provider_id), what="the hung update logged"
        )
        assert update.form["items"]["0"]["price"] == team_price
    assert applied.claims >= 1
    subscription = stored_subscription(stack, sub.id)
    assert subscription.plan_id == applied.target_plan_id


CLAIMED = re.compile(
    r"claimed (\d+) due plan changes, published \d+(; the next run takes the rest)?"
)


def sweep_runs(stack: Stack, worker: str) -> list[tuple[datetime, int, bool]]:
    """Each run of the due-changes sweep that claimed some, from the worker's JSON log: when,
    how many it claimed, and whether it left the rest to a run sent at once."""
    runs = []
    for line in (stack.workdir / f"worker-{worker}.log").read_text().splitlines():
        if not line.startswith("{") or "due plan changes" not in line:
            continue
        record = json.loads(line)
        if found := CLAIMED.fullmatch(record["message"]):
            at = datetime.fromisoformat(record["time"])
            runs.append((at, int(found[1]), found[2] is not None))
    return runs


def test_a_burst_beyond_one_short_run_is_fed_by_runs_sent_at_once_not_at_beat_s_next_tick(
    make_stack: StackFactory,
) -> None:
    # Every run stops after its first chunk of 50; beat ticks every 10 s. Without the runs a
    # sweep sends itself, the 10 changes after the first 50 would wait for the next tick.
    interval = 10.0
    stack = make_stack(
        {
            "BILLING_SCHEDULED_CHANGES_RUN_SECONDS": "0",
            "BILLING_SCHEDULED_CHANGES_INTERVAL_SECONDS": str(interval),
        }
    )
    subscribed, change_ids, team_price = schedule_changes(stack, 60)
    stack.advance_time(32 * DAY)
    stack.start_worker("w1", concurrency=2)
    stack.start_beat()

    eventually(
        lambda: states(stack, change_ids)[ChangeState.APPLIED] == len(change_ids),
        timeout=60,
        interval=0.5,
        what=f"60 changes applied (so far {dict(states(stack, change_ids))})",
    )
    runs = sweep_runs(stack, "w1")
    assert [(claimed, more) for _, claimed, more in runs] == [(50, True), (10, False)]
    (first, *_), (second, *_) = runs
    assert (second - first).total_seconds() < interval / 2
    with stack.stripe as emulator:
        for sub in subscribed:
            [update] = executed_updates(emulator, sub.provider_id)
            assert update.form["items"]["0"]["price"] == team_price

"""Two beats at once, as a second host would run them: a batch of period-end plan changes
falls due while both sweep, over two worker nodes, and each change is applied once (one
subscription update at Stripe, one ``plan_change.applied`` event).

Each beat keeps its own schedule file, as each host's data directory does (beat's file is
only its memory of when each entry last ran; two beats writing one ``dbm.dumb`` file can read
each other's half-written records). What makes the second beat harmless is the database: a
sweep claims due changes under a lease, so two sweeps never claim the same change.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from functools import partial

import pytest
from sqlalchemy import select

from adapters.db.models import EventRow
from domain.events.subscriptions import PlanChangeApplied
from domain.subscriptions.change_states import ChangeState
from tests.chaos.conftest import StackFactory
from tests.chaos.test_scheduled_changes import TEAM_AMOUNT, schedule_changes, states
from tests.emulator.support import sdk_client
from tests.support.invoices import net_for_period
from tests.support.stack import Stack, eventually
from tests.support.subscriptions import DAY, executed_updates, stored_change
from worker.launch.command_lines import celery_beat_argv

pytestmark = pytest.mark.chaos

CHANGES = 60

SWEEP = "Sending due task apply-due-plan-changes"
BEATS = ("beat", "beat-second")


def start_second_host_beat(stack: Stack, name: str) -> subprocess.Popen[bytes]:
    """Another beat on the stack, as a second host runs it: its own schedule file."""
    return stack.group.start(
        name,
        celery_beat_argv(stack.workdir / f"{name}-schedule"),
        env=stack.env,
        log_path=stack.workdir / f"{name}.log",
    )


def sweeps_sent(stack: Stack, beat: str) -> int:
    path = stack.workdir / f"{beat}.log"
    return path.read_text(errors="replace").count(SWEEP) if path.exists() else 0


def log_tail(stack: Stack, beat: str, lines: int = 40) -> str:
    path = stack.workdir / f"{beat}.log"
    text = path.read_text(errors="replace") if path.exists() else "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def swept_since(stack: Stack, beat: str, sweeps: int) -> bool:
    return sweeps_sent(stack, beat) > sweeps


def applied_events(stack: Stack) -> Counter[str]:
    """The ``plan_change.applied`` events in the outbox, by change id."""
    with stack.sessions() as session:
        documents = session.scalars(
            select(EventRow.document).where(EventRow.type == PlanChangeApplied.TYPE)
        ).all()
    return Counter(str(document["data"]["change_id"]) for document in documents)


def test_two_beats_at_once_apply_each_change_due_at_once_exactly_once(
    make_stack: StackFactory,
) -> None:
    # A lease longer than the test: a change claimed twice would be a sweep's mistake. Small
    # batches: many sweeps of both beats, run by both worker nodes, race for the same changes.
    stack = make_stack(
        {
            "BILLING_SCHEDULED_CHANGE_LEASE_SECONDS": "120",
            "BILLING_SCHEDULED_CHANGES_BATCH_SIZE": "5",
        }
    )
    subscribed, change_ids, team_price = schedule_changes(stack, CHANGES)
    stack.start_worker("w1", concurrency=2)
    stack.start_worker("w2", concurrency=2)
    first = stack.start_beat("beat")
    second = start_second_host_beat(stack, "beat-second")
    for beat in BEATS:
        try:
            eventually(partial(sweeps_sent, stack, beat), timeout=60, what=f"{beat} sweeping")
        except AssertionError as waited:
            raise AssertionError(f"{waited}; its log ends:\n{log_tail(stack, beat)}") from None
    assert states(stack, change_ids)[ChangeState.SCHEDULED] == CHANGES  # nothing due yet
    before = {beat: sweeps_sent(stack, beat) for beat in BEATS}

    stack.advance_time(32 * DAY)  # every change falls due at once, under both beats

    eventually(
        lambda: states(stack, change_ids)[ChangeState.APPLIED] == CHANGES,
        timeout=120,
        interval=0.5,
        what=f"{CHANGES} changes applied (so far {dict(states(stack, change_ids))})",
    )
    # Both beats kept sweeping while the changes were due: neither stopped the other.
    for beat in BEATS:
        eventually(
            partial(swept_since, stack, beat, before[beat]),
            timeout=30,
            what=f"{beat} sweeping after the changes fell due",
        )
    assert first.poll() is None
    assert second.poll() is None

    with stack.stripe as emulator:
        for sub in subscribed:
            [update] = executed_updates(emulator, sub.provider_id)  # one update per change
            assert update.form["items"]["0"]["price"] == team_price
    assert applied_events(stack) == Counter({change_id: 1 for change_id in change_ids})
    assert {stored_change(stack, change_id).claims for change_id in change_ids} == {1}
    # Stripe renewed each before the late change reached it: the period nets to team's price.
    sdk = sdk_client(stack.stripe_url)
    boundaries = {
        sub.provider_id: stored_change(stack, cid).effective_at
        for sub, cid in zip(subscribed, change_ids, strict=True)
    }
    billed = {
        provider_id: net_for_period(sdk, provider_id, start)
        for provider_id, start in boundaries.items()
    }
    assert billed == dict.fromkeys(boundaries, TEAM_AMOUNT)

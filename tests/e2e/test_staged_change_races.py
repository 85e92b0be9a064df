"""Plan changes that race Stripe's renewal, end to end, judged on the invoices the Stripe
emulator makes, on SQLite and PostgreSQL.

A change at the period's end is made at Stripe ahead of its boundary (staged). These tests hold
Stripe's write across the boundary with the emulator's latency fault, and take staged changes
back (a cancel, a replacement, an immediate change) before it: whatever the timing, the new
period costs, net, the price of the plan our rows say it is on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import stripe  # noqa: TID251 - the tests read the emulator's invoices through the SDK
from sqlalchemy import select

from adapters.db.models import ProviderCallRow
from domain.subscriptions.change_states import ChangeReason, ChangeState
from domain.subscriptions.scheduled_changes import ScheduledChange
from stripe_emulator import EmulatorAdmin
from tests.e2e.test_period_end_billing import (
    at_period_end,
    billed_from,
    invoices,
    move_to,
    reconcile,
    renewal_check_of,
    staged,
    subscribe,
    wait_for,
)
from tests.support.invoices import Invoice, pay_open_invoices
from tests.support.stack import Stack, eventually, stack_of_its_own
from tests.support.subscriptions import (
    Catalog,
    Subscribed,
    changes_of,
    executed_updates,
    stored_change,
    stored_subscription,
    three_plans,
)
from worker.bootstrap import Services

pytestmark = pytest.mark.e2e

RACES_REDIS_DB = 13
"""Redis databases 13 (SQLite) and 14 (PostgreSQL), as ``test_period_end_billing.py``'s
stacks, which never run at the same time as these (each module stops its stack)."""
GUARD = timedelta(seconds=60)
"""``BILLING_STAGED_CHANGE_GUARD_SECONDS`` of this stack: a minute rather than the default
5 s, so that a request asked "in the last seconds" is still there when the worker takes it,
however slow the machine."""
SCHEDULED_CHANGE_LEASE_SECONDS = 600
HELD = 8_000
"""How long (ms) the emulator holds the write: far longer than the test takes to move the
clocks over the boundary once it sees the write on its way."""


@pytest.fixture(scope="module")
def stack(
    backend: str, workdir: Path, redis_server: str, make_database: Callable[[str], str]
) -> Iterator[Stack]:
    """A stack of its own (its clock is moved across boundaries): an emulator, a worker,
    beat and the API, immediate changes invoiced at once."""
    name = f"races_{backend}"
    redis_url = f"{redis_server}/{RACES_REDIS_DB + (backend == 'postgresql')}"
    with stack_of_its_own(
        name,
        workdir,
        make_database(name),
        redis_url,
        BILLING_PRORATION_BEHAVIOR="always_invoice",
        BILLING_STAGED_CHANGE_GUARD_SECONDS=str(GUARD.total_seconds()),
        # The tests' 10 s lease would run out as the clocks jump over the boundary, and a
        # second claim would race the held write: keep it longer than the jumps.
        BILLING_SCHEDULED_CHANGE_LEASE_SECONDS=str(SCHEDULED_CHANGE_LEASE_SECONDS),
    ) as system:
        WORKERS[name] = system.start_worker()
        system.start_beat()
        system.start_api()
        system.client = system.new_client()
        yield system


WORKERS: dict[str, subprocess.Popen[bytes]] = {}
"""Each stack's worker process, which a test kills and starts again."""


@pytest.fixture(scope="module")
def catalog(ctx: Services) -> Catalog:
    return three_plans(ctx, scale_amount=4900)


def change(api: httpx.Client, sub: Subscribed, body: dict[str, Any]) -> httpx.Response:
    return api.post(sub.change_url, json=body, timeout=60)


def subscription_lines(invoice: Invoice) -> list[tuple[int, bool, str | None]]:
    return [(line.amount, line.proration, line.price) for line in invoice.lines]


def calls_of_applying(stack: Stack, change: ScheduledChange) -> list[str]:
    """The Stripe calls the commands applying ``change`` finished (recorded after each)."""
    with stack.sessions() as session:
        rows = session.scalars(
            select(ProviderCallRow).where(
                ProviderCallRow.command_id.startswith(f"apply:{change.id}:")
            )
        ).all()
        return [row.operation for row in rows]


def net_from(invoiced: list[Invoice]) -> int:
    return sum(invoice.total for invoice in invoiced)


# --- row 1: the change's write held across the boundary --------------------------------------


@pytest.mark.parametrize("answer", ["seen", "lost"])
def test_a_change_whose_write_stripe_holds_across_the_renewal_nets_the_new_period_to_its_price(
    answer: str,
    stack: Stack,
    api: httpx.Client,
    ctx: Services,
    catalog: Catalog,
    sdk: stripe.StripeClient,
    emulator: EmulatorAdmin,
) -> None:
    """Whether the held write's answer reaches the worker or is lost after Stripe executed
    it (the retry then reads a subscription on the new price in a renewed period, which looks
    the same as a write made in time: the renewal invoice tells them apart)."""
    sub = subscribe(ctx, catalog.team)
    pay_open_invoices(sdk, sub.provider_id)
    change = at_period_end(stack, api, sub, catalog.starter)
    boundary = change.effective_at
    updates = f"POST /v1/subscriptions/{sub.provider_id}"
    emulator.add_fault("latency", updates, latency_ms=HELD, count=1)
    if answer == "lost":
        emulator.add_fault("drop", updates, after_execution=True, count=1)

    move_to(stack, boundary - timedelta(seconds=11))  # the sweep claims it; the worker reads…
    eventually(
        lambda: calls_of_applying(stack, change),
        timeout=20,
        what="the worker to read the subscription before the boundary",
    )
    move_to(stack, boundary + timedelta(seconds=1))  # …and its write reaches Stripe after it
    applied = wait_for(stack, change, ChangeState.APPLIED)

    renewal, correction = billed_from(sdk, sub, boundary)
    assert renewal.billing_reason == "subscription_cycle"
    assert subscription_lines(renewal) == [(2900, False, catalog.team.provider_price_id)]
    assert correction.billing_reason == "subscription_update"
    assert correction.status != "draft"  # invoiced now, not a period later
    assert sorted(subscription_lines(correction)) == [
        (-2900, True, catalog.team.provider_price_id),
        (900, True, catalog.starter.provider_price_id),
    ]
    assert all(line.start == boundary for line in correction.lines)
    assert net_from([renewal, correction]) == 900  # the new period costs starter's price
    assert applied.reason == ChangeReason.CORRECTED_LATE.value
    assert stored_subscription(stack, sub.id).plan_id == catalog.starter.id
    item = sdk.v1.subscriptions.retrieve(sub.provider_id)["items"].data[0]
    assert item.price.id == catalog.starter.provider_price_id
    written = [r.idempotency_key or "" for r in executed_updates(emulator, sub.provider_id)]
    assert sorted(written) == sorted(
        [change.provider_idempotency_key, change.late_realign_key, change.late_correction_key]
    )  # each write once at Stripe
    move_to(stack, boundary + timedelta(minutes=2))
    reconcile(stack)
    assert renewal_check_of(stack, change).state == "billed_right"  # the gauge's source


# --- row 4: a staged change taken back --------------------------------------------------------


def test_a_staged_upgrade_canceled_half_an_hour_before_the_boundary_renews_at_the_old_price(
    stack: Stack, api: httpx.Client, ctx: Services, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    sub = subscribe(ctx, catalog.starter)
    pay_open_invoices(sdk, sub.provider_id)
    upgrade = staged(stack, api, sub, catalog.team)
    boundary = upgrade.effective_at

    response = change(api, sub, {"phase_change": {"cancel_upcoming_changes": True}})

    assert response.status_code == 200, response.text
    assert response.json()["phase"]["plan_id"] == catalog.starter.id
    assert stored_change(stack, upgrade.id).state is ChangeState.CANCELED
    move_to(stack, boundary + timedelta(seconds=1))
    [renewal] = eventually(
        lambda: billed_from(sdk, sub, boundary), timeout=20, what="the renewal invoice"
    )
    assert subscription_lines(renewal) == [(900, False, catalog.starter.provider_price_id)]
    assert stored_subscription(stack, sub.id).plan_id == catalog.starter.id
    assert stored_change(stack, upgrade.id).state is ChangeState.CANCELED


def test_a_staged_change_replaced_before_the_boundary_renews_at_the_replacements_price(
    stack: Stack, api: httpx.Client, ctx: Services, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    sub = subscribe(ctx, catalog.starter)
    pay_open_invoices(sdk, sub.provider_id)
    first = staged(stack, api, sub, catalog.team)
    boundary = first.effective_at

    response = change(api, sub, {"plan_change": {"plan": catalog.scale.name}})

    assert response.status_code == 200, response.text
    assert response.json()["phase"] == {
        "plan_id": catalog.scale.id,
        "effective_at": boundary.isoformat(),
    }
    assert stored_change(stack, first.id).state is ChangeState.CANCELED
    [replacement] = [c for c in changes_of(stack, sub.id) if c.state.is_pending]
    assert replacement.target_plan_id == catalog.scale.id
    wait_for(stack, replacement, ChangeState.STAGED)
    move_to(stack, boundary + timedelta(seconds=1))
    wait_for(stack, replacement, ChangeState.APPLIED)

    [renewal] = billed_from(sdk, sub, boundary)
    assert subscription_lines(renewal) == [(4900, False, catalog.scale.provider_price_id)]
    assert stored_subscription(stack, sub.id).plan_id == catalog.scale.id
    assert stored_change(stack, first.id).state is ChangeState.CANCELED


def test_an_immediate_change_after_a_change_was_staged_is_made_and_the_renewal_bills_it(
    stack: Stack, api: httpx.Client, ctx: Services, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    sub = subscribe(ctx, catalog.starter)
    pay_open_invoices(sdk, sub.provider_id)
    first = staged(stack, api, sub, catalog.team)
    boundary = first.effective_at
    before = len(invoices(sdk, sub))

    response = change(api, sub, {"plan_change": {"plan": catalog.scale.name, "immediate": True}})

    assert response.status_code == 200, response.text
    assert response.json()["phase"]["plan_id"] == catalog.scale.id
    assert stored_change(stack, first.id).state is ChangeState.CANCELED
    assert stored_subscription(stack, sub.id).plan_id == catalog.scale.id
    [now] = invoices(sdk, sub)[before:]
    # Prorated from starter (the staged price was taken back without proration) to scale.
    assert {line.price for line in now.lines} == {
        catalog.starter.provider_price_id,
        catalog.scale.provider_price_id,
    }
    move_to(stack, boundary + timedelta(seconds=1))
    [renewal] = eventually(
        lambda: [
            i for i in invoices(sdk, sub)[before + 1 :] if i.billing_reason == "subscription_cycle"
        ],
        timeout=20,
        what="the renewal invoice",
    )
    assert subscription_lines(renewal) == [(4900, False, catalog.scale.provider_price_id)]
    assert stored_change(stack, first.id).state is ChangeState.CANCELED


def test_in_the_last_seconds_a_staged_change_is_not_taken_back_and_the_answer_says_when(
    stack: Stack, api: httpx.Client, ctx: Services, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    sub = subscribe(ctx, catalog.starter)
    pay_open_invoices(sdk, sub.provider_id)
    upgrade = staged(stack, api, sub, catalog.team)
    boundary = upgrade.effective_at
    move_to(stack, boundary - GUARD / 2)

    response = change(api, sub, {"phase_change": {"cancel_upcoming_changes": True}})

    assert response.status_code == 400, response.text
    body = response.json()
    [detail] = [d for d in body["details"] if d.get("reason") == "CHANGE_ALREADY_STAGED"]
    assert detail["metadata"]["effective_at"] == boundary.isoformat()
    assert "once that period has started" in body["message"]
    move_to(stack, boundary + timedelta(seconds=1))
    wait_for(stack, upgrade, ChangeState.APPLIED)
    [renewal] = billed_from(sdk, sub, boundary)
    assert subscription_lines(renewal) == [(2900, False, catalog.team.provider_price_id)]
    assert stored_subscription(stack, sub.id).plan_id == catalog.team.id


def test_a_withdrawal_stripe_holds_across_the_renewal_is_corrected_to_the_old_price(
    stack: Stack,
    api: httpx.Client,
    ctx: Services,
    catalog: Catalog,
    sdk: stripe.StripeClient,
    emulator: EmulatorAdmin,
) -> None:
    sub = subscribe(ctx, catalog.starter)
    pay_open_invoices(sdk, sub.provider_id)
    upgrade = staged(stack, api, sub, catalog.team)
    boundary = upgrade.effective_at
    move_to(stack, boundary - 2 * GUARD)
    emulator.add_fault(
        "latency", f"POST /v1/subscriptions/{sub.provider_id}", latency_ms=HELD, count=1
    )
    answers: list[httpx.Response] = []
    with stack.http() as other:
        cancel = threading.Thread(
            target=lambda: answers.append(
                change(other, sub, {"phase_change": {"cancel_upcoming_changes": True}})
            )
        )
        cancel.start()
        try:
            eventually(
                lambda: stored_change(stack, upgrade.id).is_withdrawing,
                timeout=20,
                what="the withdrawal to be on its way to Stripe",
            )
            move_to(stack, boundary + timedelta(seconds=1))  # Stripe renews before it arrives
        finally:
            cancel.join(60)

    [answer] = answers
    assert answer.status_code == 200, answer.text
    assert stored_change(stack, upgrade.id).state is ChangeState.CANCELED
    renewal, correction = billed_from(sdk, sub, boundary)
    assert subscription_lines(renewal) == [(2900, False, catalog.team.provider_price_id)]
    assert sorted(subscription_lines(correction)) == [
        (-2900, True, catalog.team.provider_price_id),
        (900, True, catalog.starter.provider_price_id),
    ]
    assert net_from([renewal, correction]) == 900  # the plan it stays on
    assert stored_subscription(stack, sub.id).plan_id == catalog.starter.id


def test_a_worker_killed_mid_withdrawal_leaves_the_change_held_and_the_redelivery_finishes_it(
    stack: Stack,
    api: httpx.Client,
    ctx: Services,
    catalog: Catalog,
    sdk: stripe.StripeClient,
    emulator: EmulatorAdmin,
) -> None:
    sub = subscribe(ctx, catalog.starter)
    pay_open_invoices(sdk, sub.provider_id)
    upgrade = staged(stack, api, sub, catalog.team)
    boundary = upgrade.effective_at
    move_to(stack, boundary - 2 * GUARD)
    emulator.add_fault(
        "latency", f"POST /v1/subscriptions/{sub.provider_id}", latency_ms=HELD, count=1
    )
    worker = WORKERS[stack.name]
    with stack.http() as other:
        cancel = threading.Thread(
            target=lambda: change(other, sub, {"phase_change": {"cancel_upcoming_changes": True}})
        )
        cancel.start()
        try:
            eventually(
                lambda: stored_change(stack, upgrade.id).is_withdrawing,
                timeout=20,
                what="the withdrawal to be on its way to Stripe",
            )
            os.killpg(worker.pid, signal.SIGKILL)  # kill -9, its write still held at Stripe
            worker.wait(30)
            move_to(stack, boundary + timedelta(seconds=1))  # Stripe renews at the staged price
            assert stored_change(stack, upgrade.id).is_withdrawing  # not taken effect here
        finally:
            WORKERS[stack.name] = stack.start_worker(f"w{len(WORKERS)}-again")
            cancel.join(60)

    eventually(
        lambda: stored_change(stack, upgrade.id).state is ChangeState.CANCELED,
        timeout=90,
        what="the redelivered cancel to finish the withdrawal",
    )
    renewal, correction = billed_from(sdk, sub, boundary)
    assert subscription_lines(renewal) == [(2900, False, catalog.team.provider_price_id)]
    assert net_from([renewal, correction]) == 900
    assert stored_subscription(stack, sub.id).plan_id == catalog.starter.id
    withdrawals = [
        entry
        for entry in emulator.requests(f"/v1/subscriptions/{sub.provider_id}", "POST")
        if entry.idempotency_key == f"{upgrade.id}:withdraw" and not entry.replayed
    ]
    assert len(withdrawals) <= 1 or all(entry.status != 200 for entry in withdrawals[1:])


def test_a_cancel_that_gave_up_after_stripe_took_the_change_back_is_finished_not_applied(
    stack: Stack,
    api: httpx.Client,
    ctx: Services,
    catalog: Catalog,
    sdk: stripe.StripeClient,
    emulator: EmulatorAdmin,
) -> None:
    """Seed 2014: every answer to the withdrawal is lost after Stripe made it, so the cancel
    spends its retries and fails. The change may not take effect at the boundary: Stripe
    holds the old price. Beat finishes the withdrawal once its lease runs out."""
    sub = subscribe(ctx, catalog.starter)
    pay_open_invoices(sdk, sub.provider_id)
    upgrade = staged(stack, api, sub, catalog.team)
    boundary = upgrade.effective_at
    move_to(stack, boundary - 2 * GUARD)
    lost = emulator.add_fault(  # every answer, the first and its replays
        "drop", f"POST /v1/subscriptions/{sub.provider_id}", after_execution=True, replays=True
    )
    try:
        asked = api.post(
            sub.change_url,
            json={"phase_change": {"cancel_upcoming_changes": True}},
            headers={"Prefer": "respond-async"},
        )
        assert asked.status_code == 202, asked.text
        cancel = stack.finished(asked.json()["command_id"], timeout=60)  # its retries spent
    finally:
        emulator.remove_fault(lost.id)
    assert cancel.status.value == "failed"
    assert stored_change(stack, upgrade.id).is_withdrawing
    assert sdk.v1.subscriptions.retrieve(sub.provider_id)["items"]["data"][0]["price"]["id"] == (
        catalog.starter.provider_price_id
    )

    move_to(stack, boundary + timedelta(seconds=SCHEDULED_CHANGE_LEASE_SECONDS))

    eventually(
        lambda: stored_change(stack, upgrade.id).state is ChangeState.CANCELED or None,
        timeout=60,
        what="beat to finish the withdrawal",
    )
    assert stored_change(stack, upgrade.id).reason == ChangeReason.WITHDRAWAL_FINISHED.value
    [renewal] = billed_from(sdk, sub, boundary)
    assert subscription_lines(renewal) == [(900, False, catalog.starter.provider_price_id)]
    assert stored_subscription(stack, sub.id).plan_id == catalog.starter.id
    withdrawals = [
        entry
        for entry in emulator.requests(f"/v1/subscriptions/{sub.provider_id}", "POST")
        if entry.idempotency_key == f"{upgrade.id}:withdraw"
        and not entry.replayed
        and entry.fault != "drop(replay)"
    ]
    assert len(withdrawals) == 1  # executed once: every later one was a replay

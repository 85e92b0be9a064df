"""The check of a renewal a plan change took effect at (``domain/subscriptions/renewal_checks.py``):
what each reading of the renewal invoice records. ``tests/e2e/test_period_end_billing.py``
proves it on the emulator's invoices and the exported gauge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from domain.subscriptions.change_previews import PreviewLine
from domain.subscriptions.change_states import ChangeKind, ChangeState
from domain.subscriptions.plans import Plan, PlanSpec
from domain.subscriptions.renewal_checks import (
    CHECK_DELAY,
    MAX_MISSING_CHECKS,
    RECHECK_MISSING_AFTER,
    RECHECK_WRONG_AFTER,
    RenewalCheck,
    RenewalCheckState,
)
from domain.subscriptions.renewals import BilledInvoice, BilledPeriod
from domain.subscriptions.scheduled_changes import ScheduledChange

BOUNDARY = datetime(2026, 12, 1, tzinfo=UTC)
NEXT = datetime(2027, 1, 1, tzinfo=UTC)


def team() -> Plan:
    plan = Plan.new("plan_team", PlanSpec(name="team", amount=2900, currency="usd"), BOUNDARY)
    plan.provider_price_id = "price_team"
    return plan


def a_check() -> RenewalCheck:
    change = ScheduledChange(
        id="chg_1",
        subscription_id="sub_1",
        from_plan_id="plan_starter",
        target_plan_id="plan_team",
        kind=ChangeKind.END_OF_PERIOD,
        effective_at=BOUNDARY,
        state=ChangeState.APPLIED,
        proration_behavior="none",
        created_at=BOUNDARY - timedelta(days=20),
        updated_at=BOUNDARY,
    )
    return RenewalCheck.after(change, BOUNDARY + timedelta(seconds=2))


def billed(*lines: tuple[str, int, bool]) -> BilledPeriod:
    made = tuple(
        PreviewLine("", amount, proration, BOUNDARY, NEXT, price)
        for price, amount, proration in lines
    )
    renewal = BilledInvoice("in_1", "paid", "subscription_cycle", "usd", BOUNDARY, made[:1])
    return BilledPeriod(renewal, made[0], made[1:])


def test_a_check_falls_due_shortly_after_the_boundary_of_the_change_it_follows() -> None:
    check = a_check()

    assert (check.id, check.plan_id, check.period_start) == ("chg_1", "plan_team", BOUNDARY)
    assert check.subscription_id == "sub_1"
    assert check.due_at == BOUNDARY + timedelta(seconds=2) + CHECK_DELAY
    assert check.state is RenewalCheckState.DUE
    assert check.created_at == check.updated_at == BOUNDARY + timedelta(seconds=2)
    assert (check.checks, check.checked_at, check.finding) == (0, None, None)


def test_a_check_is_recorded_as_read_when_it_reads_the_renewal_found_or_not() -> None:
    check = a_check()
    now = BOUNDARY + timedelta(minutes=1)

    check.read(None, team(), now)

    assert check.checked_at == check.updated_at == now
    assert check.checks == 1


def test_a_check_whose_subscription_or_plan_is_gone_stops_not_billed() -> None:
    check = a_check()
    now = BOUNDARY + timedelta(minutes=3)

    check.stop(now)

    assert check.state is RenewalCheckState.NOT_BILLED
    assert check.updated_at == now


def test_a_renewal_at_the_plan_s_price_or_corrected_to_it_is_billed_right() -> None:
    at_price, corrected = a_check(), a_check()
    now = BOUNDARY + timedelta(minutes=1)

    at_price.read(billed(("price_team", 2900, False)), team(), now)
    corrected.read(
        billed(
            ("price_starter", 900, False), ("price_starter", -900, True), ("price_team", 2900, True)
        ),
        team(),
        now,
    )

    assert (at_price.state, at_price.finding) == (RenewalCheckState.BILLED_RIGHT, None)
    assert corrected.state is RenewalCheckState.BILLED_RIGHT


def test_a_renewal_at_other_money_is_billed_wrong_says_what_and_is_read_again() -> None:
    check = a_check()
    now = BOUNDARY + timedelta(minutes=1)

    check.read(billed(("price_starter", 900, False)), team(), now)

    assert check.state is RenewalCheckState.BILLED_WRONG
    assert "billed 9.00 USD (price_starter), no correction" in (check.finding or "")
    assert "team (29.00 USD)" in (check.finding or "")
    assert check.due_at == now + RECHECK_WRONG_AFTER


def test_a_renewal_not_found_is_looked_for_again_then_left_not_billed() -> None:
    check = a_check()
    now = BOUNDARY + timedelta(minutes=1)

    check.read(None, team(), now)
    assert (check.state, check.due_at) == (RenewalCheckState.DUE, now + RECHECK_MISSING_AFTER)
    for _ in range(MAX_MISSING_CHECKS - 1):
        check.read(None, team(), now)

    assert check.state is RenewalCheckState.NOT_BILLED
    assert check.checks == MAX_MISSING_CHECKS

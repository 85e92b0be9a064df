"""How a period-end change reaches Stripe when Stripe renews before it
(``domain/subscriptions/period_end.py``): the decisions alone;
``tests/e2e/test_staged_change_races.py`` proves them on the emulator's invoices."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from domain.subscriptions.change_states import ChangeKind, ChangeState
from domain.subscriptions.period_end import (
    PriceWrite,
    Step,
    period_end_step,
    renewal_correction,
    staged_too_late,
    withdrawal,
)
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import ProviderSubscription

BOUNDARY = datetime(2026, 12, 1, tzinfo=UTC)
NEXT = datetime(2027, 1, 1, tzinfo=UTC)


def a_change() -> ScheduledChange:
    return ScheduledChange(
        id="chg_1",
        subscription_id="sub_1",
        from_plan_id="team",
        target_plan_id="starter",
        kind=ChangeKind.END_OF_PERIOD,
        effective_at=BOUNDARY,
        state=ChangeState.APPLYING,
        proration_behavior="none",
        created_at=BOUNDARY - timedelta(days=20),
        updated_at=BOUNDARY - timedelta(days=20),
    )


def stripe_holds(price: str, *, renewed: bool) -> ProviderSubscription:
    start, end = (BOUNDARY, NEXT) if renewed else (BOUNDARY - timedelta(days=30), BOUNDARY)
    return ProviderSubscription(
        id="sub_stripe",
        status="active",
        item_id="si_1",
        price_id=price,
        current_period_start=start,
        current_period_end=end,
    )


def test_an_answer_showing_the_new_period_begun_means_the_renewal_billed_the_old_price() -> None:
    change = a_change()

    assert staged_too_late(change, stripe_holds("price_starter", renewed=True))
    assert not staged_too_late(change, stripe_holds("price_starter", renewed=False))


def test_the_correction_of_a_renewal_puts_the_billed_price_back_then_prorates_from_its_start() -> (
    None
):
    change = a_change()

    writes = renewal_correction(
        stripe_holds("price_starter", renewed=True),
        billed_price_id="price_team",
        wanted_price_id="price_starter",
        realign_key=change.late_realign_key,
        correction_key=change.late_correction_key,
    )

    assert writes == [
        PriceWrite("price_team", "none", "chg_1:realign-late"),
        PriceWrite("price_starter", "always_invoice", "chg_1:apply-late", proration_date=BOUNDARY),
    ]


def test_a_renewal_still_at_the_billed_price_needs_the_correction_alone() -> None:
    change = a_change()

    writes = renewal_correction(
        stripe_holds("price_team", renewed=True),
        billed_price_id="price_team",
        wanted_price_id="price_starter",
        realign_key=change.late_realign_key,
        correction_key=change.late_correction_key,
    )

    assert [write.idempotency_key for write in writes] == ["chg_1:apply-late"]


def test_a_retry_finding_the_new_price_of_a_change_marked_late_corrects_again() -> None:
    change = a_change()
    change.correct_late(BOUNDARY + timedelta(seconds=9))

    step = period_end_step(
        change, stripe_holds("price_starter", renewed=True), "price_starter", interval_changes=False
    )

    assert (step.step, step.correct_renewal, step.send) == (Step.APPLY, True, False)


def test_a_retry_finding_the_new_price_of_a_change_made_in_time_records_it_without_writes() -> None:
    step = period_end_step(
        a_change(),
        stripe_holds("price_starter", renewed=True),
        "price_starter",
        interval_changes=False,
    )

    assert (step.step, step.correct_renewal, step.send) == (Step.APPLY, False, False)


def test_a_withdrawal_puts_the_old_price_back_without_proration_under_its_own_key() -> None:
    assert withdrawal(a_change(), "price_team") == PriceWrite(
        "price_team", "none", "chg_1:withdraw"
    )

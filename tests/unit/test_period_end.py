"""How a period-end change reaches Stripe when Stripe renews before it
(``domain/subscriptions/period_end.py``): the decisions alone;
``tests/e2e/test_staged_change_races.py`` proves them on the emulator's invoices."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from domain.subscriptions.change_previews import PreviewLine
from domain.subscriptions.change_states import ChangeKind, ChangeReason, ChangeState
from domain.subscriptions.period_end import (
    PriceWrite,
    Step,
    billed_at_the_old_price,
    period_end_step,
    renewal_correction,
    staged_too_late,
    withdrawal,
)
from domain.subscriptions.renewals import BilledInvoice
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


def test_a_retry_finding_the_new_price_in_a_renewed_period_reads_the_renewal_before_recording() -> (
    None
):
    step = period_end_step(
        a_change(),
        stripe_holds("price_starter", renewed=True),
        "price_starter",
        interval_changes=False,
    )

    assert (step.step, step.check_renewal, step.correct_renewal, step.send) == (
        Step.APPLY,
        True,
        False,
        False,
    )


def test_a_retry_finding_the_new_price_before_the_renewal_stages_without_reading_invoices() -> None:
    step = period_end_step(
        a_change(),
        stripe_holds("price_starter", renewed=False),
        "price_starter",
        interval_changes=False,
    )

    assert (step.step, step.check_renewal, step.send) == (Step.STAGE, False, False)


def test_a_retry_of_a_change_to_another_interval_is_settled_by_stripe_s_own_proration() -> None:
    step = period_end_step(
        a_change(),
        stripe_holds("price_starter", renewed=True),
        "price_starter",
        interval_changes=True,
    )

    assert (step.step, step.check_renewal, step.correct_renewal) == (Step.APPLY, False, False)


def test_a_change_to_another_interval_found_made_before_the_boundary_is_applied_not_staged() -> (
    None
):
    step = period_end_step(
        a_change(),
        stripe_holds("price_starter", renewed=False),
        "price_starter",
        interval_changes=True,
    )

    assert (step.step, step.send) == (Step.APPLY, False)


def test_a_change_found_made_for_a_boundary_stripe_has_moved_is_applied_not_staged() -> None:
    moved = replace(
        stripe_holds("price_starter", renewed=False),
        current_period_end=BOUNDARY + timedelta(days=2),
    )

    step = period_end_step(a_change(), moved, "price_starter", interval_changes=False)

    assert (step.step, step.send) == (Step.APPLY, False)


def test_a_change_due_on_time_is_staged_at_stripe_without_proration_under_its_own_key() -> None:
    change = a_change()

    step = period_end_step(
        change, stripe_holds("price_team", renewed=False), "price_starter", interval_changes=False
    )

    assert (step.step, step.send, step.proration_behavior) == (Step.STAGE, True, "none")
    assert step.idempotency_key == change.provider_idempotency_key
    assert step.idempotency_key


def test_a_change_to_another_interval_due_on_time_is_made_at_once_crediting_the_old_period() -> (
    None
):
    change = a_change()

    step = period_end_step(
        change, stripe_holds("price_team", renewed=False), "price_annual", interval_changes=True
    )

    assert (step.step, step.send) == (Step.APPLY, True)
    assert step.proration_behavior == "create_prorations"
    assert step.idempotency_key == change.provider_idempotency_key


def test_a_change_of_a_subscription_over_at_stripe_is_skipped_saying_how_it_ended() -> None:
    for status, reason in (
        ("canceled", ChangeReason.SUBSCRIPTION_CANCELED),
        ("incomplete_expired", ChangeReason.SUBSCRIPTION_ENDED),
    ):
        over = replace(stripe_holds("price_team", renewed=False), status=status)

        step = period_end_step(a_change(), over, "price_starter", interval_changes=False)

        assert (step.step, step.reason) == (Step.SKIP, reason)


def line(
    price: str, amount: int, *, proration: bool = False, start: datetime = BOUNDARY
) -> PreviewLine:
    return PreviewLine("", amount, proration, start, NEXT, price)


def invoice(invoice_id: str, reason: str, *lines: PreviewLine) -> BilledInvoice:
    return BilledInvoice(invoice_id, "paid", reason, "usd", BOUNDARY, lines)


def test_a_renewal_that_billed_the_old_price_uncorrected_names_the_price_to_correct_from() -> None:
    earlier = invoice(
        "in_0", "subscription_cycle", line("price_team", 2900, start=BOUNDARY - timedelta(days=30))
    )
    renewal = invoice("in_1", "subscription_cycle", line("price_team", 2900))

    assert (
        billed_at_the_old_price(
            stripe_holds("price_starter", renewed=True), [renewal, earlier], "price_starter"
        )
        == "price_team"
    )


def test_a_renewal_at_the_new_price_or_already_corrected_needs_nothing() -> None:
    at_new = invoice("in_1", "subscription_cycle", line("price_starter", 900))
    at_old = invoice("in_1", "subscription_cycle", line("price_team", 2900))
    correction = invoice(
        "in_2",
        "subscription_update",
        line("price_team", -2900, proration=True),
        line("price_starter", 900, proration=True),
    )
    renewed = stripe_holds("price_starter", renewed=True)

    assert billed_at_the_old_price(renewed, [at_new], "price_starter") is None
    assert billed_at_the_old_price(renewed, [correction, at_old], "price_starter") is None
    assert billed_at_the_old_price(renewed, [], "price_starter") is None


def test_a_withdrawal_puts_the_old_price_back_without_proration_under_its_own_key() -> None:
    assert withdrawal(a_change(), "price_team") == PriceWrite(
        "price_team", "none", "chg_1:withdraw"
    )


def test_a_change_falling_due_on_a_subscription_a_stripe_schedule_manages_is_skipped_unsent() -> (
    None
):
    scheduled = replace(stripe_holds("price_team", renewed=False), schedule_id="sub_sched_1")

    step = period_end_step(a_change(), scheduled, "price_starter", interval_changes=False)

    assert (step.step, step.reason, step.send) == (Step.SKIP, ChangeReason.PROVIDER_SCHEDULE, False)

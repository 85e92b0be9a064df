"""How a plan change at the period's end reaches the provider, decided on the subscription as
the provider holds it.

Stripe bills a licensed price in advance: at the boundary it renews the subscription and
invoices the new period at the price its item has at that instant. So a change at the period's
end is made at the provider *ahead* of the boundary (``lead`` before it, when beat claims it),
without proration: the renewal then bills the new period at the new price, with one line and
nothing to correct. Here the change is ``staged`` until the boundary, when it takes effect.

The boundary is read, not assumed: the change moves with a period end that moved (a trial
extended, the cycle reset), and is skipped if the subscription ends at or before it. A change
made after the provider renewed (workers down across the boundary, a clock that jumped over it)
is a correction: prorated from the start of the new period and invoiced at once, so that the
new period costs the new price net, the correction visible as proration lines.

The provider may also renew *while* the on-time change is on its way (a write held across the
boundary): its answer then shows the new period begun, billed at the old price. When that
answer is lost, the retry's read cannot tell the write made before the renewal from the write
made after it (both show the new price in a renewed period), so the renewal invoice is read:
if it billed the old price and nothing corrected it (:func:`billed_at_the_old_price`), the
same correction follows, after the old price is put back on the item without proration (a
correction prorates from the price the item has): :func:`renewal_correction`. A staged change
taken back before its boundary (:func:`withdrawal`) is corrected the same way when the provider
renewed first, the other way round.

A change to a price of another interval (month → year) restarts Stripe's billing cycle and
invoices the new period at once, whenever it is made. Made ahead of the boundary, the new
period starts then (``lead`` early), the unused rest of the old period is credited on that same
invoice, and there is no renewal of the old interval: one invoice for the new period, nothing
twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from domain.subscriptions.change_states import ChangeReason
from domain.subscriptions.proration import ProrationBehavior
from domain.subscriptions.renewals import BilledInvoice, renewal_of_period
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import ProviderSubscription


class Step(StrEnum):
    SKIP = "skip"
    """Nothing to change: the subscription ends by the boundary."""
    RESCHEDULE = "reschedule"
    """The boundary moved; the change moves with it and waits again."""
    STAGE = "stage"
    """Made (or found made) at the provider before the boundary; takes effect there."""
    APPLY = "apply"
    """Made (or found made) at the provider, in effect now."""


@dataclass(frozen=True)
class PeriodEndStep:
    """What to do for a change at the period's end. ``send`` says whether the provider must
    be called (with ``proration_behavior``, ``proration_date`` and ``idempotency_key``)."""

    step: Step
    send: bool = False
    proration_behavior: ProrationBehavior = "none"
    proration_date: datetime | None = None
    idempotency_key: str = ""
    reason: ChangeReason | None = None
    effective_at: datetime | None = None
    """For ``reschedule``: the boundary as the provider has it now."""
    correct_renewal: bool = False
    """The provider renewed at the old price after the change was made: correct the new
    period (:func:`renewal_correction`) before recording the change applied."""
    check_renewal: bool = False
    """The provider holds the new price and renewed, and whether the write reached it before
    or after the renewal is not known (its answer was lost): read what the renewal billed
    (:func:`billed_at_the_old_price`) before recording the change applied."""


@dataclass(frozen=True)
class PriceWrite:
    """One update of the subscription item's price at the provider."""

    price_id: str
    proration_behavior: ProrationBehavior
    idempotency_key: str
    proration_date: datetime | None = None


def renewed_since(remote: ProviderSubscription, boundary: datetime) -> bool:
    """Whether the provider's subscription shows the period from ``boundary`` begun (it
    renewed, and invoiced that period at the price its item had then)."""
    return remote.current_period_start >= boundary


def renewal_correction(
    remote: ProviderSubscription,
    *,
    billed_price_id: str,
    wanted_price_id: str,
    realign_key: str,
    correction_key: str,
) -> list[PriceWrite]:
    """The writes that make the period the provider renewed at ``billed_price_id`` cost
    ``wanted_price_id`` net: the billed price back on the item without proration if the item
    left it since (nothing invoiced), then the late correction, prorated from the period's
    start and invoiced at once (a credit of the billed price for the whole period, a charge
    of the wanted one). Each under its own key, so that a repetition replays it."""
    writes = []
    if remote.price_id != billed_price_id:
        writes.append(PriceWrite(billed_price_id, "none", realign_key))
    writes.append(
        PriceWrite(
            wanted_price_id,
            "always_invoice",
            correction_key,
            proration_date=remote.current_period_start,
        )
    )
    return writes


def billed_at_the_old_price(
    remote: ProviderSubscription, invoices: Sequence[BilledInvoice], target_price_id: str
) -> str | None:
    """The price the provider's renewal of its current period billed, when that is not the
    target and nothing corrected the period since (a write whose answer was lost reached the
    provider after it renewed); ``None`` when the period bills the target already, or when
    ``invoices`` do not hold that renewal (nothing was billed for it to correct)."""
    period = renewal_of_period(invoices, remote.current_period_start)
    return None if period is None else period.billed_other_than(target_price_id)


def staged_too_late(change: ScheduledChange, answer: ProviderSubscription) -> bool:
    """Whether the provider's answer to the change sent ahead of its boundary shows that it
    renewed first (the write was held across the boundary): the renewal billed the old price
    for a period that should cost the new one."""
    return renewed_since(answer, change.effective_at)


def withdrawal(change: ScheduledChange, from_price_id: str) -> PriceWrite:
    """The write that takes a staged change back: the item on the price it had before,
    without proration (the period that ends bills nothing more)."""
    return PriceWrite(from_price_id, "none", change.withdrawal_key)


def period_end_step(
    change: ScheduledChange,
    remote: ProviderSubscription,
    target_price_id: str,
    *,
    interval_changes: bool,
) -> PeriodEndStep:
    """Decide how ``change`` reaches the provider, whose subscription is ``remote`` now."""
    boundary = change.effective_at
    renewed = remote.current_period_start >= boundary
    if remote.state.is_over:
        return PeriodEndStep(Step.SKIP, reason=ChangeReason.subscription_in(remote.state))
    if not renewed and remote.ends_by(boundary):
        return PeriodEndStep(Step.SKIP, reason=ChangeReason.SUBSCRIPTION_ENDS)
    if remote.schedule_id is not None and remote.price_id != target_price_id:
        # Never fought: the schedule's next phase would set its own price at the boundary.
        return PeriodEndStep(Step.SKIP, reason=ChangeReason.PROVIDER_SCHEDULE)
    if remote.price_id == target_price_id:
        # An earlier attempt went through (its outcome was lost with its worker).
        if renewed and change.corrects_late:
            # …after the provider renewed, and the correction may not have gone out: it goes
            # (again: a repetition is a replay of each write).
            return PeriodEndStep(Step.APPLY, correct_renewal=True)
        if renewed and not interval_changes:
            # …before or after the renewal: the subscription looks the same either way, the
            # renewal invoice does not. (Another interval restarts the cycle: Stripe's own
            # proration settles a change made after the renewal.)
            return PeriodEndStep(Step.APPLY, check_renewal=True)
        on_time = remote.current_period_end == boundary and not interval_changes
        return PeriodEndStep(Step.STAGE if on_time else Step.APPLY)
    if renewed:
        # The provider renewed at the old price: prorate from the new period's start, and
        # invoice the difference now rather than a period later.
        return PeriodEndStep(
            Step.APPLY,
            send=True,
            proration_behavior="always_invoice",
            proration_date=remote.current_period_start,
            idempotency_key=change.late_correction_key,
        )
    if remote.current_period_end != boundary:
        return PeriodEndStep(Step.RESCHEDULE, effective_at=remote.current_period_end)
    if interval_changes:
        # The cycle restarts when the change is made: credit the rest of the old period on
        # the new period's invoice.
        return PeriodEndStep(
            Step.APPLY,
            send=True,
            proration_behavior="create_prorations",
            idempotency_key=change.provider_idempotency_key,
        )
    return PeriodEndStep(
        Step.STAGE,
        send=True,
        proration_behavior="none",
        idempotency_key=change.provider_idempotency_key,
    )

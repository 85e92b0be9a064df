"""The check of each renewal a plan change at the period's end took effect at: what Stripe's
renewal invoice billed for that period, against the plan the change put in force.

A change at the period's end is made at Stripe ahead of its boundary so that the renewal bills
the new price; whatever went wrong on the way (a write that reached Stripe after it renewed
and whose answer was lost, a price changed at Stripe by hand, a correction that failed), the
renewal invoice is the truth of what the period costs. So when such a change takes effect, a
:class:`RenewalCheck` is recorded, due shortly after the boundary; beat's reconciliation sweep
reads the subscription's invoices when it falls due and records what they show. A period
``billed_wrong`` is counted by the ``billing_renewals_billed_wrong`` gauge (its alert pages)
and read again every :data:`RECHECK_WRONG_AFTER`, so that a correction made at Stripe clears
it; one whose renewal invoice is not there yet is read again a few times before it is left
``not_billed`` (a subscription canceled at the boundary, a trial: nothing billed to judge).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from domain.billing.currencies import format_amount
from domain.subscriptions.plans import Plan
from domain.subscriptions.renewals import BilledPeriod
from domain.subscriptions.scheduled_changes import ScheduledChange

CHECK_DELAY = timedelta(seconds=30)
"""How long after the boundary the renewal is first read: Stripe renews at the boundary and
makes the renewal invoice with it; a little slack for clocks."""
RECHECK_MISSING_AFTER = timedelta(minutes=1)
"""How soon a renewal invoice not found yet is looked for again."""
MAX_MISSING_CHECKS = 10
"""How often a renewal invoice is looked for before the period is left ``not_billed``."""
RECHECK_WRONG_AFTER = timedelta(minutes=5)
"""How often a period billed wrong is read again (a correction at Stripe clears it)."""


class RenewalCheckState(StrEnum):
    DUE = "due"
    """Not read yet, or its renewal invoice not found yet."""
    BILLED_RIGHT = "billed_right"
    """The period costs the plan's price net (at its price, or corrected to it)."""
    BILLED_WRONG = "billed_wrong"
    """The period costs something else: counted by the gauge, read again until it is right."""
    NOT_BILLED = "not_billed"
    """No renewal invoice for the period after every look: nothing billed to judge."""


@dataclass
class RenewalCheck:
    """The check of the renewal at ``period_start`` of a subscription, which the change
    ``id`` (one check per change) put on ``plan_id``."""

    id: str
    subscription_id: str
    plan_id: str
    period_start: datetime
    due_at: datetime
    state: RenewalCheckState
    created_at: datetime
    updated_at: datetime
    checks: int = 0
    finding: str | None = None
    checked_at: datetime | None = None

    @classmethod
    def after(cls, change: ScheduledChange, now: datetime) -> RenewalCheck:
        """The check of the renewal ``change`` (a change at the period's end, applied) took
        effect at."""
        return cls(
            id=change.id,
            subscription_id=change.subscription_id,
            plan_id=change.target_plan_id,
            period_start=change.effective_at,
            due_at=max(change.effective_at, now) + CHECK_DELAY,
            state=RenewalCheckState.DUE,
            created_at=now,
            updated_at=now,
        )

    def read(self, period: BilledPeriod | None, plan: Plan, now: datetime) -> None:
        """Record what the renewal invoice of the period (``None``: not found) shows."""
        self.checks += 1
        self.checked_at = self.updated_at = now
        if period is None:
            if self.checks >= MAX_MISSING_CHECKS:
                self.state, self.finding = RenewalCheckState.NOT_BILLED, None
            else:
                self.due_at = now + RECHECK_MISSING_AFTER
            return
        if period.bills(plan):
            self.state, self.finding = RenewalCheckState.BILLED_RIGHT, None
            return
        self.state = RenewalCheckState.BILLED_WRONG
        self.finding = (
            f"{period.shown()}, while plan {plan.name} "
            f"({format_amount(plan.amount, plan.currency)}) was in force at its start"
        )
        self.due_at = now + RECHECK_WRONG_AFTER

    def stop(self, now: datetime) -> None:
        """Nothing left to judge: the subscription or its plan is gone here."""
        self.state, self.updated_at = RenewalCheckState.NOT_BILLED, now

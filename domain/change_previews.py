"""What an immediate plan change would invoice, asked of the provider without changing anything
(``POST …/subscriptions/{id}/change/preview``).

The preview answers the time it prorates at (``proration_date``); an immediate change that
names the same time (``plan_change.proration_date``) invoices the same amounts to the cent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from pydantic import AwareDatetime

from domain.errors import Aborted, error_info
from domain.messages import Command, ResourceId, Result
from domain.plans import PlanRef


@dataclass(frozen=True)
class PreviewLine:
    """One line of the invoice a change would make: amounts in the currency's minor units
    (cents; whole yen for zero-decimal currencies), credits negative."""

    description: str
    amount: int
    proration: bool
    period_start: datetime
    period_end: datetime
    price_id: str | None


@dataclass(frozen=True)
class ChangePreview:
    """The invoice a change would make, as the provider computes it."""

    currency: str
    amount_due: int
    subtotal: int
    total: int
    lines: tuple[PreviewLine, ...]


def ensure_in_current_period(
    subscription_id: str, period_start: datetime, period_end: datetime, at: datetime
) -> None:
    """A preview prorates at ``at``, which the provider takes only within the subscription's
    current period there. Outside it, the period is being rolled over (our clock is past its
    end before the provider renewed it, or behind its start just after): not the request's
    fault, and gone within seconds, so :class:`Aborted` (409, ask again), never a 400
    blaming the plan."""
    if period_start <= at <= period_end:
        return
    raise Aborted(
        f"subscription {subscription_id!r} is between billing periods at the provider (its "
        f"period ends {period_end.isoformat()}); ask for the preview again in a few seconds",
        details=[
            error_info(
                "BILLING_PERIOD_ROLLING_OVER",
                subscription_id=subscription_id,
                period_end=period_end.isoformat(),
            )
        ],
    )


class PreviewPlanChange(Command):
    """Answer what changing the subscription's plan now would invoice; changes nothing."""

    TASK_NAME: ClassVar[str] = "subscriptions.preview_plan_change"
    QUEUE: ClassVar[str] = "subscriptions"

    org_id: ResourceId
    billing_account_id: ResourceId
    subscription_id: ResourceId
    plan: PlanRef


class PlanChangePreviewed(Result):
    """The invoice an immediate change to ``plan_id`` made at ``proration_date`` would make
    (``billed``: ``now`` with ``always_invoice``, ``next_invoice`` with ``create_prorations``,
    where the lines wait for the renewal). Amounts in minor units of ``currency``."""

    subscription_id: str
    plan_id: str
    proration_date: AwareDatetime
    proration_behavior: str
    billed: str
    currency: str
    amount_due: int
    subtotal: int
    total: int
    lines: list[dict[str, Any]]

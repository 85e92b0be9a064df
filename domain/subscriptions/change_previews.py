"""What an immediate plan change would invoice, asked of the provider without changing anything
(``POST …/subscriptions/{id}/change/preview``).

The preview answers the time it prorates at (``proration_date``); an immediate change that
names the same time (``plan_change.proration_date``) invoices the same amounts to the cent.

Stripe prorates as of any ``proration_date`` in the current period, so a caller free to name
one could back-date a downgrade to the period's start and be credited for time it used on the
dearer plan. So a change honours only a time a preview answered (an :class:`IssuedPreview` is
recorded with each answer) for the same change (the same subscription, from the same plan, to
the same plan), within :data:`PREVIEW_VALIDITY` of that time; anything else is refused,
naming the field.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from pydantic import AwareDatetime

from domain.billing.currencies import minimum_charge
from domain.errors import Aborted, InvalidArgument, error_info
from domain.messages import Command, ResourceId, Result
from domain.subscriptions.plans import PlanRef
from domain.subscriptions.subscription import Subscription

PREVIEW_VALIDITY = timedelta(minutes=5)
"""How long after a preview the change it previewed may be prorated as of the preview's time:
long enough for a customer to read the price and confirm, short enough that the credit a
late change earns by its earlier time stays a fraction of a cent on a monthly plan."""


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
    discount: int = 0
    """What the provider's discounts take off ``amount`` (a credit's discount is negative:
    ``amount - discount`` is what the line costs)."""

    @property
    def net(self) -> int:
        """What the line costs, its discounts taken off."""
        return self.amount - self.discount


@dataclass(frozen=True)
class ChangePreview:
    """The invoice a change would make, as the provider computes it."""

    currency: str
    amount_due: int
    subtotal: int
    total: int
    lines: tuple[PreviewLine, ...]
    total_discount: int = 0
    """What the provider's discounts take off the subtotal (``total`` is after them)."""
    starting_balance: int = 0
    """The customer's balance the invoice takes in (negative: a credit), which ``amount_due``
    includes."""


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
    where the lines wait for the renewal). Amounts in minor units of ``currency``;
    ``charged_now`` and ``carried_to_balance`` as :func:`settlement_of` tells."""

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
    charged_now: int | None = None
    carried_to_balance: int = 0
    total_discount: int = 0
    starting_balance: int = 0


def settlement_of(amount_due: int, currency: str, billed_now: bool) -> tuple[int | None, int]:
    """What making the change does with ``amount_due``: (charged to the customer's card at
    once, carried to the customer's balance for the next invoice).

    Lines that wait for the next invoice charge nothing now. An amount due below Stripe's
    minimum charge for the currency (:func:`minimum_charge`: 0.50 USD, 0.30 GBP, 50 JPY…) is
    never charged: Stripe marks the invoice paid and carries the amount to the balance, so the
    change is made even on a card that would decline, and the customer pays it with the next
    invoice. Where that minimum follows the day's exchange rate it is not known here: the
    charge is then ``None`` (the whole amount if it is over the minimum, else nothing), and
    nothing is said to be carried."""
    if not billed_now or amount_due <= 0:
        return 0, 0
    minimum = minimum_charge(currency)
    if minimum is None:
        return None, 0
    if amount_due < minimum:
        return 0, amount_due
    return amount_due, 0


@dataclass
class IssuedPreview:
    """A preview answered to a caller: the one ``proration_date`` an immediate change of
    ``subscription_id`` from ``from_plan_id`` to ``plan_id`` may name, until
    ``proration_date + PREVIEW_VALIDITY``. Its id is derived from all four, so the change finds
    it by what it names."""

    id: str
    subscription_id: str
    from_plan_id: str
    plan_id: str
    proration_date: datetime
    created_at: datetime

    @classmethod
    def of(
        cls,
        subscription_id: str,
        from_plan_id: str,
        plan_id: str,
        proration_date: datetime,
        now: datetime,
    ) -> IssuedPreview:
        return cls(
            id=cls.id_for(subscription_id, from_plan_id, plan_id, proration_date),
            subscription_id=subscription_id,
            from_plan_id=from_plan_id,
            plan_id=plan_id,
            proration_date=proration_date,
            created_at=now,
        )

    @staticmethod
    def id_for(
        subscription_id: str, from_plan_id: str, plan_id: str, proration_date: datetime
    ) -> str:
        # Whole seconds, as the provider prorates: a caller may send the time back with or
        # without its zero microseconds, in any offset.
        second = int(proration_date.timestamp())
        key = f"billing-worker:preview:{subscription_id}:{from_plan_id}:{plan_id}:{second}"
        return "prv_" + uuid.uuid5(uuid.NAMESPACE_URL, key).hex

    def expires_at(self) -> datetime:
        return self.proration_date + PREVIEW_VALIDITY


def ensure_previewed(
    subscription: Subscription,
    plan_id: str,
    proration_date: datetime,
    preview: IssuedPreview | None,
    now: datetime,
) -> None:
    """A change of ``subscription`` to ``plan_id`` names ``proration_date`` only as
    ``preview`` (the one recorded under the change's :meth:`IssuedPreview.id_for`, if any)
    answered it, not longer than :data:`PREVIEW_VALIDITY` ago, and within the current period
    (see the module's docstring)."""
    subscription.ensure_proration_date(proration_date, now)
    minutes = int(PREVIEW_VALIDITY.total_seconds() // 60)
    change = (
        f"the change of subscription {subscription.id!r} from plan {subscription.plan_id!r} "
        f"to {plan_id!r}"
    )
    if preview is None:
        raise InvalidArgument.for_fields(
            f"no preview of {change} answered the proration date {proration_date.isoformat()}",
            [
                (
                    "proration_date",
                    "must be the proration_date a preview of this same change answered "
                    f"(within the last {minutes} minutes); preview the change, or leave "
                    "proration_date out to prorate as of now",
                )
            ],
        )
    if now > preview.expires_at():
        raise InvalidArgument.for_fields(
            f"the preview of {change} at {proration_date.isoformat()} expired at "
            f"{preview.expires_at().isoformat()}",
            [
                (
                    "proration_date",
                    f"comes from a preview older than {minutes} minutes; preview the change "
                    "again, or leave proration_date out to prorate as of now",
                )
            ],
        )

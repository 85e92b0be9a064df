"""The database's part of beat's gauges (``adapters.observability.gauges``): counts and ages
read in one session at each scrape."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, union_all
from sqlalchemy.orm import Session, aliased, sessionmaker

from adapters.db.models import (
    BillingAccountRow,
    CommandStatusCountRow,
    EventRow,
    PlanRow,
    RenewalCheckRow,
    ScheduledChangeRow,
    SubscriptionRow,
    WebhookDeliveryRow,
    WebhookEndpointRow,
)
from adapters.observability.gauges import DatabaseFigures
from domain.billing.accounts import BillingAccountState
from domain.messages import CommandStatus
from domain.subscriptions.change_states import ChangeKind, ChangeState
from domain.subscriptions.renewal_checks import RenewalCheckState
from domain.subscriptions.subscription import SubscriptionState
from domain.webhooks import DeliveryState

COUNTED_CHANGE_STATES = [state.value for state in ChangeState if state.is_pending]
"""Plan changes are counted in their pending states only: the finished ones (applied,
canceled, skipped) are a year of history, which a scrape would read whole every time."""
IN_OUR_HANDS = [
    state for state in COUNTED_CHANGE_STATES if state != ChangeState.AWAITING_PAYMENT.value
]
"""The pending states in which a change waits for us (not for the customer)."""
COUNTED_DELIVERY_STATES = [
    state.value for state in DeliveryState if state is not DeliveryState.SUCCEEDED
]
"""Deliveries are counted unfinished, and failed (an operator's to replay); the succeeded ones
are the outbox's history (their flow is ``billing_webhook_deliveries_total``)."""


class SqlSystemFigures:
    """Reads :class:`DatabaseFigures` as of a given instant."""

    def __init__(self, sessions: sessionmaker[Session], period_end_lead: timedelta) -> None:
        self._sessions = sessions
        self._period_end_lead = period_end_lead

    def __call__(self, now: datetime) -> DatabaseFigures:
        unstaged = [ChangeState.SCHEDULED.value, ChangeState.APPLYING.value]
        with self._sessions() as session:
            by_state = _count_by(session, ScheduledChangeRow.state, COUNTED_CHANGE_STATES)
            row = ScheduledChangeRow
            lead = self._period_end_lead
            # Due: a change at the period's end once it should be made at Stripe (the lead
            # before its boundary) and until it is staged; any other once it is in effect.
            due_at_stripe: datetime | None = session.scalar(
                select(func.min(row.effective_at)).where(
                    row.state.in_(unstaged),
                    row.kind == ChangeKind.END_OF_PERIOD.value,
                    row.effective_at <= now + lead,
                )
            )
            due_here: datetime | None = session.scalar(
                select(func.min(row.effective_at)).where(
                    # not one awaiting the customer's payment: the customer's to make
                    row.state.in_(IN_OUR_HANDS),
                    row.kind == ChangeKind.IMMEDIATE.value,
                    row.effective_at <= now,
                )
            )
            staged_past: datetime | None = session.scalar(
                select(func.min(row.effective_at)).where(
                    row.state == ChangeState.STAGED.value, row.effective_at <= now
                )
            )
            candidates = [
                moment
                for moment in (
                    None if due_at_stripe is None else due_at_stripe - lead,
                    due_here,
                    staged_past,
                )
                if moment is not None
            ]
            oldest_due = min(candidates) if candidates else None
            # Kept by triggers as commands change (adapters/db/status_counts.py).
            counted = dict(
                session.execute(
                    select(CommandStatusCountRow.status, CommandStatusCountRow.count)
                ).all()
            )
            failed = int(counted.get(CommandStatus.FAILED.value, 0))
            rejected = int(counted.get(CommandStatus.REJECTED.value, 0))
            deliveries_by_state = _count_by(
                session, WebhookDeliveryRow.state, COUNTED_DELIVERY_STATES
            )
            endpoints_by_state = _count_by(session, WebhookEndpointRow.state)
            unpublished = int(
                session.scalar(
                    select(func.count())
                    .select_from(EventRow)
                    .where(EventRow.published_at.is_(None))
                )
                or 0
            )
            pending_count, oldest_pending = session.execute(
                select(func.count(), func.min(BillingAccountRow.created_at)).where(
                    BillingAccountRow.state == BillingAccountState.PENDING.value
                )
            ).one()
            off_plan = _subscriptions_off_plan(session)
            # The live states named (not "not over"): a search of the partial index by state
            # reads only the discounted live rows.
            live = [state.value for state in SubscriptionState if not state.is_over]
            discounted = int(
                session.scalar(
                    select(func.count())
                    .select_from(SubscriptionRow)
                    .where(
                        SubscriptionRow.billed_discount.is_not(None),
                        SubscriptionRow.state.in_(live),
                    )
                )
                or 0
            )
            billed_wrong = int(
                session.scalar(
                    select(func.count())
                    .select_from(RenewalCheckRow)
                    .where(RenewalCheckRow.state == RenewalCheckState.BILLED_WRONG.value)
                )
                or 0
            )
        return DatabaseFigures(
            changes_by_state=by_state,
            oldest_due_change=oldest_due,
            failed_commands=failed,
            rejected_commands=rejected,
            deliveries_by_state=deliveries_by_state,
            endpoints_by_state=endpoints_by_state,
            unpublished_events=unpublished,
            pending_accounts=int(pending_count or 0),
            oldest_pending_account=oldest_pending,
            subscriptions_off_plan=off_plan,
            renewals_billed_wrong=billed_wrong,
            subscriptions_discounted=discounted,
        )


def _subscriptions_off_plan(session: Session) -> dict[str, int]:
    """Live subscriptions whose billed price (as last read) is not their plan's, by kind;
    one whose pending change holds that price at Stripe (being made, or staged ahead of its
    boundary) is in flight, not off.

    "Not its plan's price" is asked plan by plan (the plans are few), each as the two ranges
    below and above its price on the index on (plan, billed price), one statement each in a
    union: the few subscriptions off their plan are read, not every live one."""
    sub, billed, change, target = (
        SubscriptionRow,
        aliased(PlanRow),
        ScheduledChangeRow,
        aliased(PlanRow),
    )
    columns = (sub.id, sub.billed_price_id, sub.state)
    ranges = []
    for plan_id, price in session.execute(select(PlanRow.id, PlanRow.provider_price_id)):
        if price is None:
            ranges.append(
                select(*columns).where(sub.plan_id == plan_id, sub.billed_price_id.is_not(None))
            )
        else:
            ranges.append(
                select(*columns).where(sub.plan_id == plan_id, sub.billed_price_id < price)
            )
            ranges.append(
                select(*columns).where(sub.plan_id == plan_id, sub.billed_price_id > price)
            )
    counts = {"unknown_price": 0, "other_plan": 0}
    if not ranges:
        return counts
    off = union_all(*ranges).subquery("off_their_plan")
    over = [state.value for state in SubscriptionState if state.is_over]
    in_flight = (
        select(change.id)
        .join(target, target.id == change.target_plan_id)
        .where(
            change.subscription_id == off.c.id,
            change.state.in_([ChangeState.APPLYING.value, ChangeState.STAGED.value]),
            target.provider_price_id == off.c.billed_price_id,
        )
        .exists()
    )
    rows = session.execute(
        select(billed.id.is_not(None), func.count())
        .select_from(off)
        .outerjoin(billed, billed.provider_price_id == off.c.billed_price_id)
        .where(off.c.state.not_in(over), ~in_flight)
        .group_by(billed.id.is_not(None))
    ).all()
    for known, count in rows:
        counts["other_plan" if known else "unknown_price"] += int(count)
    return counts


def _count_by(session: Session, column: Any, states: Sequence[str] | None = None) -> dict[str, int]:
    """Rows by ``column``'s value; only of ``states`` when given (read through the index on
    the state, rows of other states unread)."""
    query = select(column, func.count()).group_by(column)
    if states is not None:
        query = query.where(column.in_(states))
    return {str(value): int(count) for value, count in session.execute(query).all()}

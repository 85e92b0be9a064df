"""The database's part of beat's gauges (``worker.observability.gauges``): counts and ages
read in one session at each scrape."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from domain.billing import BillingAccountState
from domain.messages import CommandStatus
from domain.scheduled_changes import ChangeKind, ChangeState
from worker.db.models import (
    BillingAccountRow,
    CommandRow,
    EventRow,
    ScheduledChangeRow,
    WebhookDeliveryRow,
    WebhookEndpointRow,
)
from worker.observability.gauges import DatabaseFigures


class SqlSystemFigures:
    """Reads :class:`DatabaseFigures` as of a given instant."""

    def __init__(self, sessions: sessionmaker[Session], period_end_lead: timedelta) -> None:
        self._sessions = sessions
        self._period_end_lead = period_end_lead

    def __call__(self, now: datetime) -> DatabaseFigures:
        pending = [state.value for state in ChangeState if state.is_pending]
        unstaged = [ChangeState.SCHEDULED.value, ChangeState.APPLYING.value]
        with self._sessions() as session:
            by_state: dict[str, int] = {
                str(state): int(count)
                for state, count in session.execute(
                    select(ScheduledChangeRow.state, func.count()).group_by(
                        ScheduledChangeRow.state
                    )
                ).all()
            }
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
                    row.state.in_(pending),
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
            failed, rejected = (
                int(
                    session.scalar(
                        select(func.count())
                        .select_from(CommandRow)
                        .where(CommandRow.status == status.value)
                    )
                    or 0
                )
                for status in (CommandStatus.FAILED, CommandStatus.REJECTED)
            )
            deliveries_by_state = _count_by(session, WebhookDeliveryRow.state)
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
        )


def _count_by(session: Session, column: Any) -> dict[str, int]:
    return {
        str(value): int(count)
        for value, count in session.execute(select(column, func.count()).group_by(column)).all()
    }

"""The console's lists: one page each, in a stable order, with a cursor to the next.

Organizations, users, billing accounts and subscriptions are listed by id, and their cursor
encodes the list and the last id of the page. Commands are listed oldest first (by creation,
then id), and their cursor encodes both. A page of ``limit`` rows has a cursor when one more
row exists.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, and_, func, or_, select, text
from sqlalchemy.orm import InstrumentedAttribute, Session

from adapters.db.models import (
    PENDING_CHANGE_STATES,
    BillingAccountRow,
    CommandRow,
    EventRow,
    OrganizationRow,
    ProviderCallRow,
    ScheduledChangeRow,
    SubscriptionRow,
    UserRow,
)
from domain.errors import InvalidArgument
from domain.messages import CommandStatus, is_id
from domain.operations.console import (
    IN_FLIGHT_STATUSES,
    MAX_PAGE_SIZE,
    BillingAccountItem,
    BillingAccountPage,
    CommandPage,
    CommandView,
    EventView,
    OrganizationItem,
    OrganizationPage,
    ProviderCallView,
    SubscriptionItem,
    SubscriptionPage,
    UserItem,
    UserPage,
)


def _bad(field: str, why: str) -> InvalidArgument:
    return InvalidArgument.for_fields(f"{field} {why}", [(field, why)])


def checked_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise _bad("limit", f"must be between 1 and {MAX_PAGE_SIZE}")
    return limit


def _by_id(
    session: Session,
    query: Select[Any],
    column: InstrumentedAttribute[str],
    limit: int,
    after: str | None,
) -> tuple[list[Any], str | None]:
    """A page of ``query`` ordered by ``column`` (an id) after the cursor ``after``."""
    checked_limit(limit)
    listed = column.class_.__tablename__
    if after is not None:
        query = query.where(column > _id_after(after, listed))
    rows = list(session.scalars(query.order_by(column).limit(limit + 1)).all())
    page = rows[:limit]
    if len(rows) <= limit:
        return page, None
    return page, _id_cursor(listed, str(getattr(page[-1], column.key)))


def _id_cursor(listed: str, last_id: str) -> str:
    """The cursor after ``last_id`` in the list of ``listed`` (a table): opaque, and naming
    its list, so that a cursor no page of that list gave is refused rather than taken for
    an id (``after=x`` would otherwise be a valid, empty, page)."""
    return base64.urlsafe_b64encode(f"{listed}|{last_id}".encode()).decode().rstrip("=")


def _id_after(cursor: str, listed: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise _bad("after", "must be the next_cursor of the page before") from None
    cursor_of, _, last_id = raw.partition("|")
    if cursor_of != listed or not is_id(last_id):
        raise _bad("after", "must be the next_cursor of the page before")
    return last_id


def _filtered(query: Select[Any], **equal: tuple[Any, str | None]) -> Select[Any]:
    for column, value in equal.values():
        if value is not None:
            query = query.where(column == value)
    return query


def organizations(
    session: Session, *, state: str | None, limit: int, after: str | None
) -> OrganizationPage:
    query = _filtered(select(OrganizationRow), state=(OrganizationRow.state, state))
    rows, cursor = _by_id(session, query, OrganizationRow.id, limit, after)
    items = [
        OrganizationItem(
            id=row.id, name=row.name, title=row.title, state=row.state, created_at=row.created_at
        )
        for row in rows
    ]
    return OrganizationPage(items=items, next_cursor=cursor)


def users(session: Session, *, state: str | None, limit: int, after: str | None) -> UserPage:
    query = _filtered(select(UserRow), state=(UserRow.state, state))
    rows, cursor = _by_id(session, query, UserRow.id, limit, after)
    items = [
        UserItem(
            id=row.id, email=row.email, name=row.name, state=row.state, created_at=row.created_at
        )
        for row in rows
    ]
    return UserPage(items=items, next_cursor=cursor)


def billing_accounts(
    session: Session, *, state: str | None, org_id: str | None, limit: int, after: str | None
) -> BillingAccountPage:
    query = _filtered(
        select(BillingAccountRow),
        state=(BillingAccountRow.state, state),
        org_id=(BillingAccountRow.org_id, org_id),
    )
    rows, cursor = _by_id(session, query, BillingAccountRow.id, limit, after)
    items = [
        BillingAccountItem(
            id=row.id,
            org_id=row.org_id,
            state=row.state,
            registered=row.provider_id is not None,
            provider_id=row.provider_id,
            currency=row.currency,
            created_at=row.created_at,
            customer_deleted_at=row.customer_deleted_at,
        )
        for row in rows
    ]
    return BillingAccountPage(items=items, next_cursor=cursor)


def subscriptions(
    session: Session,
    *,
    state: str | None,
    billing_account_id: str | None,
    plan_id: str | None,
    limit: int,
    after: str | None,
) -> SubscriptionPage:
    query = _filtered(
        select(SubscriptionRow),
        state=(SubscriptionRow.state, state),
        account=(SubscriptionRow.billing_account_id, billing_account_id),
        plan=(SubscriptionRow.plan_id, plan_id),
    )
    rows, cursor = _by_id(session, query, SubscriptionRow.id, limit, after)
    pending: dict[str, str] = {
        subscription_id: change_id
        for subscription_id, change_id in session.execute(
            select(ScheduledChangeRow.subscription_id, ScheduledChangeRow.id).where(
                ScheduledChangeRow.subscription_id.in_([row.id for row in rows]),
                text(PENDING_CHANGE_STATES),
            )
        )
    }
    items = [
        SubscriptionItem(
            id=row.id,
            billing_account_id=row.billing_account_id,
            plan_id=row.plan_id,
            state=row.state,
            provider_id=row.provider_id,
            current_period_end=row.current_period_end,
            pending_change=pending.get(row.id),
        )
        for row in rows
    ]
    return SubscriptionPage(items=items, next_cursor=cursor)


def command_view(row: CommandRow) -> CommandView:
    retries = list(row.retries or [])
    next_retry_at = None
    if row.status == "retrying" and retries:
        last = retries[-1]
        try:
            at = datetime.fromisoformat(str(last["at"]))
            next_retry_at = at + timedelta(seconds=float(last.get("delay_seconds") or 0))
        except (KeyError, TypeError, ValueError):
            next_retry_at = None
    error = row.error or {}
    return CommandView(
        id=row.id,
        type=row.type,
        status=row.status,
        source=row.source,
        attempts=row.attempts,
        created_at=row.created_at,
        updated_at=row.updated_at,
        finished_at=row.finished_at,
        last_error=str(error["message"]) if error.get("message") else None,
        next_retry_at=next_retry_at,
        retries=len(retries),
    )


def call_view(row: ProviderCallRow) -> ProviderCallView:
    return ProviderCallView(
        id=row.id,
        at=row.started_at,
        operation=row.operation,
        subject=row.subject,
        command_id=row.command_id,
        idempotency_key=row.idempotency_key,
        attempt=row.attempt,
        outcome=row.outcome,
        error=row.error,
        duration_ms=row.duration_ms,
    )


def event_view(row: EventRow) -> EventView:
    return EventView(
        id=row.id,
        type=row.type,
        occurred_at=row.occurred_at,
        command_id=row.command_id,
        subject=row.subject_key,
        published_at=row.published_at,
        data=dict(row.document.get("data") or {}),
    )


def _command_cursor(row: CommandRow) -> str:
    raw = f"{row.created_at.isoformat()}|{row.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _command_after(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created, _, command_id = raw.partition("|")
        at = datetime.fromisoformat(created)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise _bad("after", "must be the next_cursor of the page before") from None
    if at.tzinfo is None or not is_id(command_id, max_length=64):
        raise _bad("after", "must be the next_cursor of the page before")
    return at, command_id


def commands(
    session: Session,
    *,
    statuses: Sequence[str],
    command_type: str | None,
    limit: int,
    after: str | None,
    updated_since: datetime | None = None,
) -> CommandPage:
    checked_limit(limit)
    known = {status.value for status in CommandStatus}
    unknown = [status for status in statuses if status not in known]
    if unknown:
        raise _bad("status", f"unknown status {unknown[0]!r} (known: {', '.join(sorted(known))})")
    query = select(CommandRow).where(CommandRow.status.in_(list(statuses or IN_FLIGHT_STATUSES)))
    if command_type is not None:
        query = query.where(CommandRow.type == command_type)
    if updated_since is not None:
        query = query.where(CommandRow.updated_at >= updated_since)
    if after is not None:
        at, command_id = _command_after(after)
        query = query.where(
            or_(
                CommandRow.created_at > at,
                and_(CommandRow.created_at == at, CommandRow.id > command_id),
            )
        )
    rows = session.scalars(
        query.order_by(CommandRow.created_at, CommandRow.id).limit(limit + 1)
    ).all()
    page = list(rows[:limit])
    cursor = _command_cursor(page[-1]) if len(rows) > limit else None
    return CommandPage(items=[command_view(row) for row in page], next_cursor=cursor)


def recent_commands(
    session: Session, *, status: str, updated_since: datetime, shown: int
) -> tuple[int, list[CommandView]]:
    """See ``ConsoleQueries.recent_commands``: both read the index on (status, updated_at)."""
    recent = and_(CommandRow.status == status, CommandRow.updated_at >= updated_since)
    count = int(session.scalar(select(func.count()).select_from(CommandRow).where(recent)) or 0)
    rows = session.scalars(
        select(CommandRow)
        .where(recent)
        .order_by(CommandRow.updated_at.desc(), CommandRow.id.desc())
        .limit(shown)
    ).all()
    return count, [command_view(row) for row in reversed(rows)]

"""The console's search and a command's story (``domain/operations/console.py``).

Every read here goes through an index: primary keys, the unique Stripe ids, the unique
organization handle, ``provider_calls.command_id`` and ``events.subject_key``. Two columns
are matched by equality and want an index of their own to stay cheap on a large table:
``billing_accounts.name`` and ``billing_accounts.email`` (the search matches a whole name or a
whole address, never a part, so a plain index serves both). The command log is never scanned:
a command is found by its id only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from adapters.db.audit import SqlAuditTrail
from adapters.db.listing import call_view, command_view, event_view
from adapters.db.models import (
    BillingAccountRow,
    CommandRow,
    EventRow,
    OrganizationRow,
    ProviderCallRow,
    SubscriptionRow,
)
from domain.messages import is_id
from domain.operations.audit import AuditFilter
from domain.operations.console import (
    CommandStory,
    RetryView,
    SearchHit,
)
from domain.redaction import mask_email, mask_value
from domain.rules import normalized_email

STORY_LIMIT = 200
"""The most Stripe calls and events a command's story shows of each (the newest)."""

SUBJECT_FIELDS = {
    "billing_account_id": "billing_account",
    "subscription_id": "subscription",
    "user_id": "user",
    "org_id": "organization",
}
"""The fields of a payload or result naming a subject its events may be filed under."""


def _account_hit(row: BillingAccountRow, matched: str) -> SearchHit:
    return SearchHit(
        kind="billing_account",
        id=row.id,
        matched=matched,
        label=f"{mask_value(row.name)} {mask_email(row.email)}",
        org_id=row.org_id,
        state=row.state,
    )


def _organization_hit(row: OrganizationRow, matched: str) -> SearchHit:
    return SearchHit(
        kind="organization",
        id=row.id,
        matched=matched,
        label=f"{row.name} {row.title}".strip(),
        org_id=row.id,
        state=row.state,
    )


def email_candidates(query: str) -> list[str]:
    """The stored forms ``query`` may have as a whole address: as stored (normalized: the
    domain lower-cased) and, since people rarely mean case in a local part, lower-cased."""
    if "@" not in query:
        return []
    try:
        normalized = normalized_email(query)
    except ValueError:  # not an address (pydantic's error is a ValueError)
        return []
    return sorted({normalized, normalized.lower()})


def search(session: Session, query: str, limit: int) -> list[SearchHit]:
    """What ``query`` names (see :meth:`ConsoleQueries.search`), ids first."""
    wanted = query.strip()
    if not wanted or len(wanted) > 320:
        return []
    hits: list[SearchHit] = []
    if is_id(wanted):
        hits += _by_id(session, wanted)
        handles = sorted({wanted, wanted.lower()})
        hits += [
            _organization_hit(row, "handle")
            for row in session.scalars(
                select(OrganizationRow).where(OrganizationRow.name.in_(handles))
            )
        ]
    emails = email_candidates(wanted)
    if emails:
        hits += [
            _account_hit(row, "email")
            for row in session.scalars(
                select(BillingAccountRow)
                .where(BillingAccountRow.email.in_(emails))
                .order_by(BillingAccountRow.id)
                .limit(limit)
            )
        ]
    else:
        hits += [
            _account_hit(row, "name")
            for row in session.scalars(
                select(BillingAccountRow)
                .where(BillingAccountRow.name == wanted)
                .order_by(BillingAccountRow.id)
                .limit(limit)
            )
        ]
    seen: set[tuple[str, str]] = set()
    unique = []
    for hit in hits:
        if (hit.kind, hit.id) not in seen:
            seen.add((hit.kind, hit.id))
            unique.append(hit)
    return unique[:limit]


def _by_id(session: Session, wanted: str) -> list[SearchHit]:
    hits: list[SearchHit] = []
    account = session.get(BillingAccountRow, wanted)
    if account is not None:
        hits.append(_account_hit(account, "id"))
    organization = session.get(OrganizationRow, wanted)
    if organization is not None:
        hits.append(_organization_hit(organization, "id"))
    if len(wanted) <= 64:
        command = session.get(CommandRow, wanted)
        if command is not None:
            hits.append(
                SearchHit(
                    kind="command",
                    id=command.id,
                    matched="id",
                    label=command.type,
                    state=command.status,
                )
            )
    subscriptions = session.scalars(
        select(SubscriptionRow).where(
            or_(SubscriptionRow.id == wanted, SubscriptionRow.provider_id == wanted)
        )
    )
    hits += [
        SearchHit(
            kind="subscription",
            id=row.id,
            matched="id" if row.id == wanted else "stripe id",
            label=row.plan_id,
            state=row.state,
        )
        for row in subscriptions
    ]
    customer = session.scalars(
        select(BillingAccountRow).where(BillingAccountRow.provider_id == wanted)
    ).first()
    if customer is not None:
        hits.append(_account_hit(customer, "stripe id"))
    return hits


def _subjects(command_id: str, *documents: dict[str, Any] | None) -> list[str]:
    """The subjects a command's events may be filed under: its own, and those its payload
    or result names."""
    subjects = {f"command:{command_id}"}
    for document in documents:
        for field, subject_type in SUBJECT_FIELDS.items():
            value = (document or {}).get(field)
            if isinstance(value, str) and value:
                subjects.add(f"{subject_type}:{value}")
    return sorted(subjects)


def _retries(entries: Iterable[dict[str, Any]]) -> list[RetryView]:
    views = []
    for entry in entries:
        attempt, delay = entry.get("attempt"), entry.get("delay_seconds")
        views.append(
            RetryView(
                attempt=attempt if isinstance(attempt, int) else None,
                at=entry.get("at") or None,
                reason=str(entry["reason"]) if entry.get("reason") else None,
                delay_seconds=float(delay) if isinstance(delay, int | float) else None,
            )
        )
    return views


def command_story(session: Session, command_id: str) -> CommandStory | None:
    """The command's story: its row by id, its Stripe calls by ``command_id`` and its
    events among those of the subjects it names (``events.subject_key``), by ``command_id``;
    the operators' actions that targeted it (the audit trail)."""
    if not is_id(command_id, max_length=64):
        return None
    row = session.get(CommandRow, command_id)
    if row is None:
        return None
    calls = session.scalars(
        select(ProviderCallRow)
        .where(ProviderCallRow.command_id == command_id)
        .order_by(ProviderCallRow.started_at.desc(), ProviderCallRow.id.desc())
        .limit(STORY_LIMIT)
    ).all()
    own = f"command:{command_id}"
    events = session.scalars(
        select(EventRow)
        .where(
            EventRow.subject_key.in_(_subjects(command_id, row.payload, row.result)),
            or_(EventRow.command_id == command_id, EventRow.subject_key == own),
        )
        .order_by(EventRow.sequence.desc())
        .limit(STORY_LIMIT)
    ).all()
    return CommandStory(
        command=command_view(row),
        payload=dict(row.payload),
        result=None if row.result is None else dict(row.result),
        error=None if row.error is None else dict(row.error),
        client_id=row.client_id,
        idempotency_key=row.idempotency_key,
        published_at=row.published_at,
        retry_history=_retries(row.retries or []),
        provider_calls=[call_view(call) for call in reversed(calls)],
        events=[event_view(event) for event in reversed(events)],
        audit=SqlAuditTrail(session).find(AuditFilter(target=command_id), STORY_LIMIT),
    )

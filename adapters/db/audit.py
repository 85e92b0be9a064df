"""The operators' audit trail in SQL (``domain.operations.audit``): the ``audit_entries``
table, written in the unit of work of the action it records."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from adapters.db.models import AuditEntryRow
from domain.operations.audit import AuditEntry, AuditFilter


def target_ids(entry: AuditEntry) -> str:
    """The targets' ``type:id`` forms, their bare ids and the account, between spaces: what a
    filter on one target matches (``LIKE '% id %'``)."""
    names = [*entry.targets, *(target.partition(":")[2] for target in entry.targets)]
    if entry.billing_account_id:
        names.append(entry.billing_account_id)
    return f" {' '.join(dict.fromkeys(name for name in names if name))} "


def entry_of(row: AuditEntryRow) -> AuditEntry:
    return AuditEntry(
        id=row.id,
        action=row.action,
        operator=row.operator,
        surface=row.surface,
        at=row.at,
        reason=row.reason,
        targets=list(row.targets),
        billing_account_id=row.billing_account_id,
        changes=list(row.changes),
    )


class SqlAuditTrail:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, entry: AuditEntry) -> None:
        self._session.add(
            AuditEntryRow(
                id=entry.id,
                action=entry.action,
                operator=entry.operator,
                surface=entry.surface,
                at=entry.at,
                reason=entry.reason,
                targets=list(entry.targets),
                target_ids=target_ids(entry),
                billing_account_id=entry.billing_account_id,
                changes=list(entry.changes),
            )
        )

    def find(self, wanted: AuditFilter, limit: int) -> list[AuditEntry]:
        query = select(AuditEntryRow)
        if wanted.target:
            # An id of ours never holds a space, % or _ is escaped: a plain containment test.
            escaped = wanted.target.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            query = query.where(AuditEntryRow.target_ids.like(f"% {escaped} %", escape="\\"))
        if wanted.operator:
            query = query.where(AuditEntryRow.operator == wanted.operator)
        if wanted.action:
            query = query.where(AuditEntryRow.action == wanted.action)
        if wanted.since is not None:
            query = query.where(AuditEntryRow.at >= wanted.since)
        query = query.order_by(AuditEntryRow.at.desc(), AuditEntryRow.id.desc()).limit(limit)
        return [entry_of(row) for row in self._session.scalars(query)]

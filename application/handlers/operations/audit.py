"""The audit trail's read: the entries an operator looks for (``billing-worker audit``, the
console's audit page). Entries are written by ``application/operator_actions.py`` only."""

from __future__ import annotations

from dataclasses import dataclass

from domain.operations.audit import AuditEntry, AuditFilter
from domain.ports.application import HandlerContext


@dataclass(frozen=True)
class ListAudit:
    """Up to ``limit`` entries that ``wanted`` keeps, newest first (a read: nothing changes)."""

    wanted: AuditFilter
    limit: int


def audit_entries(query: ListAudit, ctx: HandlerContext) -> list[AuditEntry]:
    with ctx.unit_of_work() as uow:
        return uow.audit.find(query.wanted, query.limit)

"""The audit trail of the :class:`~tests.support.fakes.database.FakeDatabase`, as
``adapters/db/audit.py`` keeps it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from domain.operations.audit import AuditEntry, AuditFilter

if TYPE_CHECKING:
    from tests.support.fakes.database import Transaction


def _matches(entry: AuditEntry, wanted: AuditFilter) -> bool:
    names = {*entry.targets, *(target.partition(":")[2] for target in entry.targets)}
    if entry.billing_account_id:
        names.add(entry.billing_account_id)
    return (
        (wanted.target is None or wanted.target in names)
        and (wanted.operator is None or entry.operator == wanted.operator)
        and (wanted.action is None or entry.action == wanted.action)
        and (wanted.since is None or entry.at >= wanted.since)
    )


class FakeAuditTrail:
    table = "audit_entries"

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    def add(self, entry: AuditEntry) -> None:
        self._tx.write(self.table, entry, insert=True)

    def find(self, wanted: AuditFilter, limit: int) -> list[AuditEntry]:
        found = [entry for entry in self._tx.scan(self.table) if _matches(entry, wanted)]
        return sorted(found, key=lambda entry: (entry.at, entry.id), reverse=True)[:limit]

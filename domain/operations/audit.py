"""The audit trail: one entry for every action an operator took, whichever surface it came
from (the console, the operations API, the command line), written in the transaction of what
the action changed (``application/operator_actions.py`` writes it, nothing else does).

An entry says who took the action (an API client's id, or the command line's operator name),
when (the application's clock), why (the operator's reason), what it targeted (``type:id``
each) and what it changed (one line each: the events it wrote, or what it did outside the
database). Entries are never changed or removed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from pydantic import AwareDatetime, Field

from domain.messages import Message

AUDIT_PAGE_SIZE = 50
AUDIT_MAX_PAGE_SIZE = 500


class AuditEntry(Message):
    """One operator action, as the audit trail keeps it."""

    id: str = Field(description="The action's id (``op-<kind>-…``); its events carry it.")
    action: str = Field(description="The action's kind: ``replay-command``, ``mark-offline``…")
    operator: str = Field(description="Who: the API client's id, or the CLI's operator name.")
    surface: str = Field(description="Where it was taken: ``api``, ``console`` or ``cli``.")
    at: AwareDatetime = Field(description="When, on the application's clock.")
    reason: str = Field(description="Why, as the operator said it.")
    targets: list[str] = Field(description="What it acted on, ``type:id`` each.")
    billing_account_id: str | None = Field(
        default=None, description="The billing account whose timeline shows it, if any."
    )
    changes: list[str] = Field(description="What it changed, one line each.")


class AuditFilter(Message):
    """Which entries to list: each given field narrows the list (all of them, together)."""

    target: str | None = Field(
        default=None,
        description="A billing account's id (its entries), or a target's id or ``type:id``.",
    )
    operator: str | None = None
    action: str | None = None
    since: datetime | None = Field(default=None, description="Taken at or after.")


class AuditTrail(Protocol):
    """The audit trail's table, in the unit of work (``UnitOfWork.audit``)."""

    def add(self, entry: AuditEntry) -> None: ...

    def find(self, wanted: AuditFilter, limit: int) -> list[AuditEntry]:
        """Up to ``limit`` entries matching ``wanted``, newest first."""
        ...

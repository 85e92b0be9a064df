"""The event of the audit trail: an operator took an action (``domain.operations.audit``).
The catalog (``domain.events.catalog``) knows it by name."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field

from domain.events.base import Event, Subject
from domain.messages import Message
from domain.operations.audit import AuditEntry
from domain.redaction import mask_text


class OperatorActionData(Message):
    action: str = Field(description="The action's kind: ``replay-command``, ``mark-offline``…")
    operator: str = Field(description="Who: the API client's id, or the CLI's operator name.")
    surface: str = Field(description="Where: ``api``, ``console`` or ``cli``.")
    reason: str = Field(
        description="Why, as the operator said it (an email or phone number in it masked)."
    )
    targets: list[str] = Field(description="What it acted on, ``type:id`` each.")
    billing_account_id: str | None = Field(description="The billing account it concerns, if any.")
    changes: list[str] = Field(description="What it changed, one line each.")


class OperatorActionTaken(Event):
    """An operator took an action (replayed a command, marked an account offline, skipped a
    change, rotated a secret, moved the clock…): its entry of the audit trail, written in the
    transaction of what it changed. Its ``command_id`` is the action's id; its subject is the
    action (``operator_action:<id>``)."""

    TYPE = "operator.action_taken"
    type: Literal["operator.action_taken"] = "operator.action_taken"
    data: OperatorActionData

    @classmethod
    def of(cls, entry: AuditEntry) -> Self:
        return cls(
            occurred_at=entry.at,
            command_id=entry.id,
            subject=Subject(type="operator_action", id=entry.id),
            data=OperatorActionData(
                action=entry.action,
                operator=entry.operator,
                surface=entry.surface,
                reason=mask_text(entry.reason),
                targets=entry.targets,
                billing_account_id=entry.billing_account_id,
                changes=entry.changes,
            ),
        )

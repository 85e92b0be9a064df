"""Events of commands, whatever their aggregate: one that ended without doing its work
(failed or rejected), and an operator's request to run one again now. The catalog
(``domain.events.catalog``) knows them by name.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal, Self

from pydantic import Field

from domain.events.base import Event, Subject
from domain.messages import Message
from domain.redaction import redact


class CommandFailedData(Message):
    command_id: str
    command_type: str = Field(description="The command's task name.")
    error: dict[str, Any] = Field(description="The error body (personal data masked).")


class CommandRejectedData(CommandFailedData):
    """The same fields as a failure's."""


class _CommandEndedEvent(Event):
    """A command ended without doing its work (``domain.operations.outcomes`` says which way)."""

    DATA: ClassVar[type[CommandFailedData]]

    @classmethod
    def of(
        cls, command_id: str, command_type: str, error: dict[str, Any], *, now: datetime
    ) -> Self:
        return cls(
            type=cls.TYPE,
            occurred_at=now,
            command_id=command_id,
            subject=Subject(type="command", id=command_id),
            data=cls.DATA(command_id=command_id, command_type=command_type, error=redact(error)),
        )


class CommandRetryRequestedData(Message):
    command_id: str
    command_type: str = Field(description="The command's task name.")
    status: str = Field(description="Its status when the retry was asked for.")


class CommandRetryRequested(Event):
    """An operator sent a command waiting for its retry (or its turn) again now, under its
    own id: it runs once, whichever delivery comes first."""

    TYPE = "command.retry_requested"
    type: Literal["command.retry_requested"] = "command.retry_requested"
    data: CommandRetryRequestedData

    @classmethod
    def of(cls, command_id: str, command_type: str, status: str, *, by: str, now: datetime) -> Self:
        return cls(
            occurred_at=now,
            command_id=by,
            subject=Subject(type="command", id=command_id),
            data=CommandRetryRequestedData(
                command_id=command_id, command_type=command_type, status=status
            ),
        )


class CommandFailedEvent(_CommandEndedEvent):
    """A command failed for a reason an operator acts on (its retry budget exhausted on a
    dependency that stayed down, an internal error); any command, whoever sent it. A
    caller's mistake is ``command.rejected`` instead."""

    TYPE = "command.failed"
    DATA = CommandFailedData
    type: Literal["command.failed"] = "command.failed"
    data: CommandFailedData


class CommandRejectedEvent(_CommandEndedEvent):
    """A command was rejected: the caller got it wrong (invalid, not found, a conflict, not
    permitted, refused by the provider for its data); any command, whoever sent it. The
    caller sends a corrected command; nobody replays this one."""

    TYPE = "command.rejected"
    DATA = CommandRejectedData
    type: Literal["command.rejected"] = "command.rejected"
    data: CommandRejectedData

"""The base of every command and result message.

Messages are the public, versioned contract of the queue: frozen pydantic models that carry
ids and values only. Unknown fields are rejected so that a typo in a publisher never passes
silently.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints

from domain.rate_budget import Priority

ResourceId = Annotated[
    str,
    StringConstraints(
        strip_whitespace=False,
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]*$",
    ),
]
"""An identifier as it appears in a path: letters, digits and ``_ . : -``, at most 128."""

CommandId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]*$"),
]

CONTRACT_VERSION = 1


class Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Command(Message):
    """A request to change the system, imperative by name.

    ``command_id`` is the idempotency key of the command: delivering the same command twice
    does the work once. Publishers that omit it get the Celery task id.
    """

    TASK_NAME: ClassVar[str]
    QUEUE: ClassVar[str]
    PRIORITY: ClassVar[Priority] = Priority.INTERACTIVE
    """Bulk commands (beat's due changes) yield the queue and the provider's rate budget to
    interactive ones."""

    version: Literal[1] = 1
    command_id: CommandId


class Result(Message):
    """What a handler reports once the command has done its work (past tense by name)."""


class CommandStatus(StrEnum):
    """Where a command is in its life (``GET /v1beta1/commands/{id}``)."""

    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    WAITING = "waiting"
    """Re-queued until the provider's rate budget has a token for it: not a failure."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"

    @property
    def is_terminal(self) -> bool:
        return self in (CommandStatus.SUCCEEDED, CommandStatus.FAILED)

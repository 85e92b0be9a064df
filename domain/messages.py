"""The base of every command and result message.

Messages are the public, versioned contract of the queue: frozen pydantic models that carry
ids and values only. Unknown fields are rejected so that a typo in a publisher never passes
silently.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from datetime import datetime
from enum import Enum, StrEnum
from typing import Annotated, Any, ClassVar, Literal, TypeGuard

from pydantic import BaseModel, ConfigDict, StringConstraints

from domain.provider.rate_budget import Priority

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:\-]*$"
"""Every identifier: letters, digits and ``_ . : -``, starting with a letter or digit."""


def is_id(value: object, max_length: int = 128) -> TypeGuard[str]:
    """Whether ``value`` is an identifier of at most ``max_length`` characters."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= max_length
        and re.fullmatch(ID_PATTERN, value) is not None
    )


ResourceId = Annotated[
    str,
    StringConstraints(strip_whitespace=False, min_length=1, max_length=128, pattern=ID_PATTERN),
]
"""An identifier as it appears in a path: letters, digits and ``_ . : -``, at most 128."""

CommandId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=64, pattern=ID_PATTERN),
]


def json_value(value: Any) -> Any:
    """A field's value as JSON writes it: enums by value, models as their JSON form,
    timestamps in RFC 3339; lists and dicts item by item."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [json_value(item) for item in value]
    if isinstance(value, dict):
        return {key: json_value(item) for key, item in value.items()}
    return value


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

    IN_ONE_TRANSACTION: ClassVar[bool] = False
    """Its handler changes the database only (it calls no provider: no intent to persist
    first), so the runner records the command's start, its change and its outcome in one
    transaction (``CommandJournal.run_in_one_transaction``) rather than three."""

    OMITTABLE: ClassVar[frozenset[str]] = frozenset({"command_id"})
    """Fields a publisher may leave out of the message although the model requires them: they
    are filled in before validation (``command_id`` with the Celery task id, by the runner).
    The JSON Schema of the message as published does not require them."""

    version: Literal[1] = 1
    command_id: CommandId


class Result(Message):
    """What a handler reports once the command has done its work (past tense by name)."""


def command_fingerprint(command_type: str, payload: Mapping[str, Any]) -> str:
    """What makes a command the one its id names: its type and its payload. A redelivered
    message has the same fingerprint; another message reusing the id has another."""
    canonical = json.dumps(
        {"type": command_type, "payload": payload},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
        ensure_ascii=True,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _unstorable_text(text: str) -> str | None:
    if "\x00" in text:
        return "holds a NUL character (U+0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate: not UTF-8 text"
    return None


def unstorable_values(value: Any, path: str = "") -> list[tuple[str, str]]:
    """Values of a decoded message that no database can keep as JSON: NUL characters and
    lone surrogates (PostgreSQL's JSONB refuses both), ``NaN`` and infinities (not JSON).
    Each is named by its path (``account.name``) and why, so that such a message is still
    journalled, as a failed command naming the field."""
    problems: list[tuple[str, str]] = []
    if isinstance(value, str):
        why = _unstorable_text(value)
        if why:
            problems.append((path or "(message)", why))
    elif isinstance(value, float) and not math.isfinite(value):
        problems.append((path or "(message)", f"{value} is not a JSON number"))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            name = str(key)
            why = _unstorable_text(name)
            if why:
                problems.append((f"{path}.{name!r}" if path else repr(name), f"field name {why}"))
            problems.extend(unstorable_values(item, f"{path}.{name}" if path else name))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            problems.extend(unstorable_values(item, f"{path}[{index}]"))
    return problems


def storable(value: Any) -> Any:
    """``value`` with what :func:`unstorable_values` finds replaced by a printable escape."""
    if isinstance(value, str):
        return value.replace("\x00", "\\u0000").encode("utf-8", "backslashreplace").decode()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {storable(str(key)): storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [storable(item) for item in value]
    return value


class CommandStatus(StrEnum):
    """Where a command is in its life (``GET /v1beta1/commands/{id}``)."""

    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    WAITING = "waiting"
    """Re-queued until the provider's rate budget has a token for it: not a failure."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    """Ended without doing its work for a reason an operator acts on (a dependency down for
    the whole retry budget, our own fault), then replays (``domain.operations.outcomes``)."""
    REJECTED = "rejected"
    """Ended without doing its work because the caller got it wrong (invalid, not found, a
    conflict, not permitted, refused by the provider for its data): the caller sends a
    corrected command; nobody replays it (``domain.operations.outcomes``)."""

    @property
    def is_terminal(self) -> bool:
        return self in (CommandStatus.SUCCEEDED, CommandStatus.FAILED, CommandStatus.REJECTED)


AWAITING_DELIVERY = (CommandStatus.QUEUED, CommandStatus.RETRYING, CommandStatus.WAITING)
"""A command in these is not running and waits for its next message: the first (``queued``),
or the one its last attempt sent for later (``retrying``, ``waiting``). If that message was
lost, nothing else runs the command: the failover sweep sends it again after a failover, the
stalled-command sweep a queued or retrying one whose message is long overdue."""
AWAITING_RETRY = (CommandStatus.RETRYING, CommandStatus.WAITING)
"""Of :data:`AWAITING_DELIVERY`, those whose next message a worker sent (a later attempt)."""

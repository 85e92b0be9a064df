"""The envelope every domain event shares (``Event``: its id, type and version, when it
happened, the command that caused it, its subject and its data) and the resource an event
belongs to (``Subject``): what each aggregate's events are built on, apart from the catalog
(``domain.events.catalog``), which must know every one of them.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar, Literal

from pydantic import AwareDatetime, Field

from domain.messages import Message

EVENT_ID_PREFIX = "evt_"


def new_event_id() -> str:
    """A fresh event id, such as ``evt_0b6e…`` (also the ``webhook-id`` of its deliveries)."""
    return EVENT_ID_PREFIX + uuid.uuid4().hex


class Subject(Message):
    """The resource an event belongs to: its events are delivered in order."""

    type: Literal["billing_account", "user", "subscription", "command", "operator_action"]
    id: str


class Event(Message):
    """The envelope every event shares. ``type`` and ``version`` name its schema."""

    TYPE: ClassVar[str]
    VERSION: ClassVar[int] = 1

    id: str = Field(
        default_factory=new_event_id,
        pattern=r"^evt_[0-9a-f]{32}$",
        description="Unique; the webhook-id of its deliveries.",
    )
    type: str
    version: Literal[1] = 1
    occurred_at: AwareDatetime
    command_id: str | None = Field(
        description="The command that caused it (beat's apply commands for due changes)."
    )
    subject: Subject
    data: Any

    @property
    def subject_key(self) -> str:
        """``type:id`` of the subject: the order key of the outbox."""
        return f"{self.subject.type}:{self.subject.id}"

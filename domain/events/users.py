"""Events of users: one enabled. The catalog (``domain.events.catalog``) knows them by name."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Self

from domain.events.base import Event, Subject
from domain.messages import Message
from domain.users import User


class UserData(Message):
    user_id: str
    state: str


class UserEnabledEvent(Event):
    """A disabled user was enabled (enabling an enabled user emits nothing)."""

    TYPE = "user.enabled"
    type: Literal["user.enabled"] = "user.enabled"
    data: UserData

    @classmethod
    def of(cls, user: User, *, command_id: str | None, now: datetime) -> Self:
        return cls(
            occurred_at=now,
            command_id=command_id,
            subject=Subject(type="user", id=user.id),
            data=UserData(user_id=user.id, state=user.state.value),
        )

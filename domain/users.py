"""Users: the enable operation (spec section 3)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import Field, StringConstraints

from domain.messages import Command, Message, ResourceId, Result
from domain.rules import EmailAddress


class UserState(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"


class NewUser(Message):
    """A user as an operator describes it (``billing-worker users create``)."""

    email: EmailAddress
    name: Annotated[str, StringConstraints(strip_whitespace=True, max_length=255)] = ""
    id: ResourceId | None = Field(default=None, description="Default: a new usr_… id.")
    disabled: bool = False


@dataclass
class User:
    id: str
    email: str
    name: str
    state: UserState
    created_at: datetime
    updated_at: datetime

    @classmethod
    def new(cls, user_id: str, spec: NewUser, now: datetime) -> User:
        return cls(
            id=user_id,
            email=spec.email,
            name=spec.name,
            state=UserState.DISABLED if spec.disabled else UserState.ENABLED,
            created_at=now,
            updated_at=now,
        )

    def to_view(self) -> dict[str, Any]:
        """The user as the admin commands print it."""
        return {"id": self.id, "email": self.email, "name": self.name, "state": self.state.value}

    def enable(self, now: datetime) -> bool:
        """Make the user able to log in. Returns whether anything changed."""
        if self.state is UserState.ENABLED:
            return False
        self.state = UserState.ENABLED
        self.updated_at = now
        return True


class EnableUser(Command):
    """Set a user to the enabled state (``POST /v1beta1/users/{id}/enable``)."""

    TASK_NAME: ClassVar[str] = "users.enable"
    QUEUE: ClassVar[str] = "users"
    IN_ONE_TRANSACTION: ClassVar[bool] = True

    user_id: ResourceId


class UserEnabled(Result):
    user_id: str
    was_already_enabled: bool

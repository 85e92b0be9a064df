"""Users: the enable operation (spec section 3)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import ClassVar

from domain.messages import Command, ResourceId, Result


class UserState(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"


@dataclass
class User:
    id: str
    email: str
    name: str
    state: UserState
    created_at: datetime
    updated_at: datetime

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

    user_id: ResourceId


class UserEnabled(Result):
    user_id: str
    was_already_enabled: bool

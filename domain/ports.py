"""Ports: what the handlers need from the outside world, as Protocols.

Adapters in ``worker/`` implement them (SQLAlchemy, Stripe); the handlers in ``tasks/`` only
see these.
"""

from __future__ import annotations

from datetime import datetime
from types import TracebackType
from typing import Protocol, Self

from domain.users import User


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...


class UserRepository(Protocol):
    def get(self, user_id: str, *, for_update: bool = False) -> User | None: ...

    def save(self, user: User) -> None: ...


class UnitOfWork(Protocol):
    """One database transaction. Leaving the block without ``commit()`` rolls back."""

    @property
    def users(self) -> UserRepository: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...


class HandlerContext(Protocol):
    """What a command handler is given to work with."""

    @property
    def clock(self) -> Clock: ...

    def unit_of_work(self) -> UnitOfWork: ...


class CommandJournal(Protocol):
    """The command log as the task runner sees it.

    Each method is its own short transaction, so the log is right even when the handler's
    transaction rolled back.
    """

    def begin(
        self, command_id: str, command_type: str, payload: dict[str, object], *, source: str
    ) -> CommandOutcome | None:
        """Mark the command running (creating its entry if a publisher sent it directly).

        Returns the recorded outcome instead when the command already finished: a
        redelivered message must not do the work twice.
        """
        ...

    def succeed(self, command_id: str, result: dict[str, object]) -> None: ...

    def fail(self, command_id: str, error: dict[str, object]) -> None: ...

    def retrying(self, command_id: str, error: dict[str, object]) -> None: ...


class CommandOutcome(Protocol):
    @property
    def status(self) -> str: ...

    @property
    def result(self) -> dict[str, object] | None: ...

    @property
    def error(self) -> dict[str, object] | None: ...

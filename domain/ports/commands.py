"""Ports of the command log, of publishing and of the dead letters: what the task runner and
the sweeps need to run each command once, send commands onto their queues and keep the
messages that are not commands, as Protocols.

The log is what makes a redelivered message harmless: it finds its command's outcome there
and does not do the work twice; so the log is written in short transactions of its own
(or in the command's, for a command that changes only the database), never left to a
handler's that rolled back. Adapters in ``worker/`` implement them (``worker/db/command_log.py``,
``worker/messaging/publisher.py``, ``worker/messaging/dead_letters.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, Protocol

from domain.events.base import Event
from domain.messages import CommandStatus
from domain.ports.repositories import UnitOfWork


class CommandOutcome(Protocol):
    """A finished command's recorded outcome."""

    @property
    def status(self) -> CommandStatus: ...

    @property
    def result(self) -> dict[str, Any] | None: ...

    @property
    def error(self) -> dict[str, Any] | None: ...


class PublishableCommand(Protocol):
    """A command in the log, as it is published: its id, task name and payload."""

    @property
    def id(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def payload(self) -> dict[str, Any]: ...


class JournalRecord(PublishableCommand, Protocol):
    """A command in the log, with where it is in its life."""

    @property
    def status(self) -> CommandStatus: ...


class CannotRunInOneTransaction(Exception):
    """A command cannot be run in one transaction (its handler called the provider, or left
    a change it made uncommitted, or a racing delivery changed its entry): nothing of it was
    recorded, and the runner runs it the usual way."""


class CommandJournal(Protocol):
    """The command log as the task runner and the sweeps see it.

    Each method is its own short transaction, so the log is right even when the handler's
    transaction rolled back.
    """

    def begin(
        self, command_id: str, command_type: str, payload: dict[str, Any], *, source: str
    ) -> CommandOutcome | None:
        """Mark the command running (creating its entry if a publisher sent it directly).

        Returns the recorded outcome instead when the command already finished: a
        redelivered message must not do the work twice. Raises
        :class:`domain.errors.CommandInProgress` while another delivery is running it, and
        :class:`domain.errors.CommandIdReused` when the id names another command.
        """
        ...

    def run_in_one_transaction(
        self,
        command_id: str,
        command_type: str,
        payload: dict[str, Any],
        *,
        source: str,
        work: Callable[[UnitOfWork], dict[str, Any]],
    ) -> CommandOutcome | None:
        """Begin the command, run ``work`` and record what it returns as the command's
        result, in one transaction: for a command whose handler changes the database only
        (``Command.IN_ONE_TRANSACTION``). ``work`` is given a unit of work inside that
        transaction; its ``commit()`` is made with the outcome's.

        Returns the outcome: the one just recorded, or the one recorded before (a
        redelivered message; ``work`` does not run). Returns ``None``, recording nothing,
        when the command is not to run so: another delivery runs it, or its id names another
        command (:meth:`begin` says which). Raises what ``work`` raises, recording nothing,
        and :class:`CannotRunInOneTransaction` when ``work`` left a change uncommitted, or
        the entry changed meanwhile: the caller then runs the command the usual way."""
        ...

    def get(self, command_id: str) -> JournalRecord | None:
        """The command's entry, if the log has it."""
        ...

    def succeed(self, command_id: str, result: dict[str, Any]) -> None: ...

    def fail(self, command_id: str, error: dict[str, Any], events: Sequence[Event] = ()) -> None:
        """Record the failure (``failed``: for an operator), and ``events`` in the same
        transaction."""
        ...

    def reject(self, command_id: str, error: dict[str, Any], events: Sequence[Event] = ()) -> None:
        """Record the rejection (``rejected``: the caller's mistake,
        ``domain.operations.outcomes``), and ``events`` in the same transaction."""
        ...

    def retrying(
        self, command_id: str, error: dict[str, Any], retry: dict[str, Any] | None = None
    ) -> None:
        """Mark the command waiting for a retry; ``retry`` is appended to its history."""
        ...

    def waiting(self, command_id: str, seconds: float) -> None:
        """Mark the command re-queued to wait for the provider's rate budget (not a retry)."""
        ...

    def stalled(self, older_than: timedelta, limit: int = 100) -> Sequence[PublishableCommand]:
        """Commands recorded but not started for ``older_than``: their message was lost."""
        ...

    def mark_published(self, command_id: str) -> None: ...

    def prune_finished(self, status: CommandStatus, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` commands that finished in ``status`` before ``before``,
        oldest first, in one short transaction; returns how many went (fewer than ``limit``:
        none is left). Their idempotency keys and their provider calls go with them. A
        command another transaction holds is skipped, never waited for: a later call takes
        it. Raises ``ValueError`` for a status that is not finished (those are never
        pruned)."""
        ...

    def count_finished(self, status: CommandStatus, before: datetime) -> int:
        """How many commands finished in ``status`` before ``before`` (what pruning would
        delete)."""
        ...


class CommandPublisher(Protocol):
    """Sends commands onto their queues (the message's task id is the command id)."""

    def publish(
        self,
        task_name: str,
        payload: Mapping[str, Any],
        *,
        command_id: str,
        queue: str | None = None,
        priority: int | None = None,
    ) -> None:
        """Publish, retrying a broker hiccup briefly; raises if the message could not go."""
        ...

    def batch(self) -> AbstractContextManager[CommandPublisher]:
        """A publisher whose messages go to the broker together when the block ends: one
        round trip for a sweep's hundreds rather than one each. Inside the block ``publish``
        raises only for a message that cannot be built. The end raises if the batch could
        not go, and then any of its messages may have gone: a command is idempotent by its
        id, so publishing one again is harmless."""
        ...


class DeadLetterStore(Protocol):
    """Where messages that are not commands are kept for an operator."""

    def add(
        self,
        raw: bytes,
        *,
        queue: str,
        reason: str,
        task: str | None = None,
        task_id: str | None = None,
    ) -> str:
        """Keep ``raw`` with why it was refused; returns the dead letter's id."""
        ...

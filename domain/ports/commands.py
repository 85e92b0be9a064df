"""Ports of the command log, of publishing and of the dead letters: what the task runner and
the sweeps need to run each command once, what the API needs to accept one, the one way a
command is sent onto its queue, and where the messages that are not commands are kept, as
Protocols.

The log is what makes a redelivered message harmless: it finds its command's outcome there
and does not do the work twice; so the log is written in short transactions of its own
(or in the command's, for a command that changes only the database), never left to a
handler's that rolled back. Adapters in ``worker/`` implement them (``adapters/db/command_log.py``,
``adapters/messaging/publisher.py``, ``adapters/messaging/dead_letters.py``).

Every command goes onto its queue through :meth:`CommandPublisher.publish`, as a
:class:`CommandMessage`: the API after accepting it, the sweeps, an operator's replay, the
command line (``application/handlers/operations/outbox.py`` holds the steps around it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from domain.events.base import Event
from domain.messages import AWAITING_DELIVERY, AWAITING_RETRY, Command, CommandStatus
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

    @property
    def error(self) -> dict[str, Any] | None: ...

    @property
    def retries(self) -> list[dict[str, Any]]:
        """Its failed attempts' retries, the latest last (``CommandJournal.retrying``)."""
        ...


class LoggedCommand(JournalRecord, Protocol):
    """A command in the log as its client sees it (``GET /v1beta1/commands/{id}``)."""

    @property
    def result(self) -> dict[str, Any] | None: ...

    @property
    def attempts(self) -> int: ...

    @property
    def client_id(self) -> str | None: ...

    @property
    def request_fingerprint(self) -> str | None:
        """What the client's request was, to tell a replay of it from another request that
        reuses its idempotency key."""
        ...

    @property
    def created_at(self) -> datetime: ...

    @property
    def updated_at(self) -> datetime: ...

    @property
    def finished_at(self) -> datetime | None: ...


class DuplicateCommand(Exception):
    """The command log holds this command already: its id, or its client's idempotency key,
    is taken (another request or delivery recorded it first). Nothing was recorded."""

    def __init__(self, command_id: str, idempotency_key: str | None = None) -> None:
        taken = f"idempotency key {idempotency_key!r} or " if idempotency_key else ""
        super().__init__(f"the {taken}command id {command_id!r} is taken")
        self.command_id = command_id
        self.idempotency_key = idempotency_key


class CommandIntake(Protocol):
    """The command log as the API sees it: where a command is accepted, recorded before it
    is published (the outbox), and found again for its client."""

    def accept(
        self,
        *,
        command_id: str,
        command_type: str,
        payload: dict[str, Any],
        client_id: str | None,
        idempotency_key: str | None,
        request_fingerprint: str | None,
    ) -> LoggedCommand:
        """Record a command ``queued``, as published (the caller publishes it at once).
        Raises :class:`DuplicateCommand` when its id, or the client's ``idempotency_key``,
        is taken: two requests raced, and the caller answers with the one recorded."""
        ...

    def get(self, command_id: str) -> LoggedCommand | None:
        """The command's entry, if the log has it."""
        ...

    def find_by_idempotency_key(self, client_id: str, key: str) -> LoggedCommand | None:
        """The command ``client_id`` sent under ``key``, if the log still has it."""
        ...


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
        self,
        command_id: str,
        command_type: str,
        payload: dict[str, Any],
        *,
        source: str,
        at: datetime | None = None,
        resumes: datetime | None = None,
    ) -> CommandOutcome | None:
        """Mark the command running (creating its entry if a publisher sent it directly),
        as of ``at`` (default: now), the run's mark.

        Returns the recorded outcome instead when the command already finished: a
        redelivered message must not do the work twice. Raises
        :class:`domain.errors.CommandInProgress` while another delivery is running it, and
        :class:`domain.errors.CommandIdReused` when the id names another command.

        ``resumes``: the mark of the run an earlier delivery of this message began and could
        not record the end of (the database went away): an entry still running as of that
        mark is this delivery's to take over, at once, not after the running lease.
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
        redelivered message; what ``work`` did is undone). Returns ``None``, recording nothing,
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

    def stalled(
        self,
        older_than: timedelta,
        limit: int = 100,
        running_older_than: timedelta | None = None,
    ) -> Sequence[JournalRecord]:
        """Commands queued or retrying for ``older_than`` and not published again since:
        their message was lost. Queued ones count from when they were recorded, retrying ones
        from when their later attempt was due (:func:`later_attempt_due_at`). Not waiting
        ones: a wait's message sits behind its burst's backlog for as long as the burst drains
        at the provider's pace, and one sent again early would run beside it, each deferring
        itself again until the command is done (the failover sweep sends those a failover
        may have dropped).

        With ``running_older_than``, also commands ``running`` since that long ago (their
        start, or a later delivery's) and not published again since: the broker hands a dead
        worker's message back after its visibility timeout, so a command still running well
        past it lost its message (taken from the queue by a worker killed before the broker
        recorded it as unacknowledged, or with a Redis that lost its last writes)."""
        ...

    def awaiting_delivery_since(
        self,
        since: datetime,
        limit: int,
        statuses: Sequence[CommandStatus] = AWAITING_DELIVERY,
    ) -> Sequence[JournalRecord]:
        """Commands in ``statuses`` (of ``AWAITING_DELIVERY``) that entered them at ``since``
        or later, oldest first: those whose message a broker failover may have dropped."""
        ...

    def mark_published(self, command_id: str) -> None: ...

    def requeue(self, command_id: str) -> JournalRecord | None:
        """Make a finished command ``queued`` again, unpublished (an operator's replay);
        ``None`` when the log does not have it. A rejected command is refused
        (``FailedPrecondition``, reason ``COMMAND_REJECTED``)."""
        ...

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


@dataclass(frozen=True)
class CommandMessage:
    """A command as it goes onto its queue: the task ``type`` names, with ``payload`` as its
    keyword arguments and ``id`` as the message's task id (so that a command published twice
    is run once). ``queue`` and ``priority`` left ``None`` are the task's route's (the
    Celery configuration's)."""

    id: str
    type: str
    payload: Mapping[str, Any]
    queue: str | None = None
    priority: int | None = None
    retries: int = 0
    """The deliveries the command used up already (Celery's ``retries``): its retry budget
    goes on from there."""
    result_kept: bool = True
    """Whether the result backend keeps the run's result for a publisher waiting on it
    (``AsyncResult.get()``): a sweep's own commands have no such publisher, and the command
    log keeps every outcome either way."""

    @classmethod
    def of(
        cls, command: Command, *, priority: int | None = None, result_kept: bool = True
    ) -> CommandMessage:
        """``command`` on its own queue (a command the log does not hold yet: a sweep's or an
        operator's, idempotent by its id)."""
        return cls(
            id=command.command_id,
            type=command.TASK_NAME,
            payload=command.model_dump(mode="json"),
            queue=command.QUEUE,
            priority=priority,
            result_kept=result_kept,
        )

    @classmethod
    def recorded(cls, command: PublishableCommand, *, retries: int = 0) -> CommandMessage:
        """A command the log holds, as it was recorded, on its task's route."""
        return cls(id=command.id, type=command.type, payload=command.payload, retries=retries)


def later_attempt_due_at(
    status: CommandStatus, updated_at: datetime, retries: Sequence[Mapping[str, Any]]
) -> datetime:
    """When a command awaiting a later attempt (``AWAITING_RETRY``) was due to start it: its
    last retry's backoff after it was recorded; a wait for the rate budget, once recorded."""
    if status is CommandStatus.RETRYING and retries:
        delay = retries[-1].get("delay_seconds")
        if isinstance(delay, int | float):
            return updated_at + timedelta(seconds=delay)
    return updated_at


def retries_used(command: JournalRecord) -> int:
    """The deliveries a command awaiting a later attempt (``AWAITING_RETRY``) used up: the
    number of its last failed attempt. A queued command starts afresh (a replay, too)."""
    if command.status not in AWAITING_RETRY or not command.retries:
        return 0
    attempt = command.retries[-1].get("attempt")
    return attempt if isinstance(attempt, int) and attempt > 0 else 0


class CommandPublisher(Protocol):
    """Sends commands onto their queues: the one way a command is published (the message's
    task id is the command id)."""

    def publish(self, message: CommandMessage) -> None:
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

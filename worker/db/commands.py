"""The command log: written by the API when it accepts a command and by tasks as they run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from domain.errors import CommandIdReused, CommandInProgress, FailedPrecondition, error_info
from domain.events.base import Event
from domain.messages import CommandStatus, command_fingerprint
from domain.operations.outcomes import error_code, error_line, error_reason
from domain.operations.retention import PRUNABLE_STATUSES
from domain.ports.application import Clock
from domain.ports.commands import CannotRunInOneTransaction, DuplicateCommand
from domain.ports.repositories import UnitOfWork
from worker.db.events import SqlEventOutbox
from worker.db.models import CommandRow, ProviderCallRow
from worker.db.uow import SharedUnitOfWork, is_unique_violation
from worker.observability import metrics


@dataclass(frozen=True)
class CommandRecord:
    id: str
    type: str
    status: CommandStatus
    source: str
    payload: dict[str, Any]
    attempts: int
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    retries: list[dict[str, Any]]
    client_id: str | None
    idempotency_key: str | None
    request_fingerprint: str | None
    fingerprint: str | None
    created_at: datetime
    updated_at: datetime
    published_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, row: CommandRow) -> CommandRecord:
        return cls(
            id=row.id,
            type=row.type,
            status=CommandStatus(row.status),
            source=row.source,
            payload=dict(row.payload),
            attempts=row.attempts,
            result=row.result,
            error=row.error,
            retries=list(row.retries or []),
            client_id=row.client_id,
            idempotency_key=row.idempotency_key,
            request_fingerprint=row.request_fingerprint,
            fingerprint=row.fingerprint,
            created_at=row.created_at,
            updated_at=row.updated_at,
            published_at=row.published_at,
            finished_at=row.finished_at,
        )


class _LoggedNow:
    """``_begin``'s answer when it made the command's entry (a command first seen here)."""


_LOGGED_NOW = _LoggedNow()

MAX_RETRY_HISTORY = 50
DEFAULT_RUNNING_LEASE = timedelta(minutes=10)


class SqlCommandLog:
    """Each method is one short transaction of its own."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        clock: Clock,
        running_lease: timedelta = DEFAULT_RUNNING_LEASE,
    ) -> None:
        self._sessions = sessions
        self._clock = clock
        self._running_lease = running_lease

    # --- used by the API and the CLI -------------------------------------------------------

    def get(self, command_id: str) -> CommandRecord | None:
        with self._sessions() as session:
            row = session.get(CommandRow, command_id)
            return CommandRecord.of(row) if row else None

    def find_by_idempotency_key(self, client_id: str, key: str) -> CommandRecord | None:
        with self._sessions() as session:
            row = session.scalars(
                select(CommandRow).where(
                    CommandRow.client_id == client_id, CommandRow.idempotency_key == key
                )
            ).one_or_none()
            return CommandRecord.of(row) if row else None

    def accept(
        self,
        *,
        command_id: str,
        command_type: str,
        payload: dict[str, Any],
        client_id: str | None,
        idempotency_key: str | None,
        request_fingerprint: str | None,
    ) -> CommandRecord:
        """Record a command the API accepted, before it is published (the outbox).

        It is recorded as published now: the API publishes it at once, and writing that again
        after the publish would be a second write per command for nothing. A publish that
        failed is caught by the stalled-command sweep all the same: it takes again every
        queued command published (or not) longer than its threshold ago that never started.

        Raises :class:`domain.ports.commands.DuplicateCommand` when the command id or the
        client's idempotency key is taken (``CommandIntake.accept``).
        """
        now = self._clock.now()
        row = CommandRow(
            id=command_id,
            type=command_type,
            status=CommandStatus.QUEUED.value,
            source="api",
            payload=payload,
            attempts=0,
            client_id=client_id,
            idempotency_key=idempotency_key,
            request_fingerprint=request_fingerprint,
            fingerprint=command_fingerprint(command_type, payload),
            created_at=now,
            updated_at=now,
            published_at=now,
        )
        try:
            with self._sessions.begin() as session:
                session.add(row)
        except IntegrityError as error:
            if not is_unique_violation(error):
                raise
            # The primary key or the (client, key) unique index: another request recorded
            # it first.
            raise DuplicateCommand(command_id, idempotency_key) from error
        metrics.command_accepted(command_type, "api")
        return CommandRecord.of(row)

    def mark_published(self, command_id: str) -> None:
        now = self._clock.now()
        with self._sessions.begin() as session:
            session.execute(
                update(CommandRow).where(CommandRow.id == command_id).values(published_at=now)
            )

    def stalled(self, older_than: timedelta, limit: int = 100) -> list[CommandRecord]:
        """Queued commands never published, or published long ago and never started."""
        cutoff = self._clock.now() - older_than
        with self._sessions() as session:
            rows = session.scalars(
                select(CommandRow)
                .where(
                    CommandRow.status == CommandStatus.QUEUED.value,
                    or_(CommandRow.published_at.is_(None), CommandRow.published_at < cutoff),
                    CommandRow.created_at < cutoff,
                )
                .order_by(CommandRow.created_at)
                .limit(limit)
            ).all()
            return [CommandRecord.of(row) for row in rows]

    def requeue(self, command_id: str) -> CommandRecord | None:
        """Make a finished command runnable again (an operator's replay). A rejected command
        is refused (``FailedPrecondition``, reason ``COMMAND_REJECTED``): it was the caller's
        mistake, and running it again gives the same answer."""
        now = self._clock.now()
        with self._sessions.begin() as session:
            row = session.get(CommandRow, command_id, with_for_update=True)
            if row is None:
                return None
            if row.status == CommandStatus.REJECTED.value:
                raise not_replayable(CommandRecord.of(row))
            row.status = CommandStatus.QUEUED.value
            row.error = None
            row.result = None
            row.finished_at = None
            row.published_at = None
            row.updated_at = now
            return CommandRecord.of(row)

    def list_failed(self, limit: int = 50) -> list[CommandRecord]:
        """Failed commands (for an operator), newest first."""
        return self.list_finished(CommandStatus.FAILED, limit)

    def list_rejected(self, limit: int = 50) -> list[CommandRecord]:
        """Rejected commands (the callers' mistakes), newest first."""
        return self.list_finished(CommandStatus.REJECTED, limit)

    def list_finished(self, status: CommandStatus, limit: int = 50) -> list[CommandRecord]:
        with self._sessions() as session:
            rows = session.scalars(
                select(CommandRow)
                .where(CommandRow.status == status.value)
                .order_by(CommandRow.updated_at.desc())
                .limit(limit)
            ).all()
            return [CommandRecord.of(row) for row in rows]

    # --- the CommandJournal port, used by tasks ----------------------------------------------

    def begin(
        self, command_id: str, command_type: str, payload: dict[str, Any], *, source: str
    ) -> CommandRecord | None:
        """Mark the command running (logging it first if it is new), or return its record if
        it finished. Raises :class:`CommandInProgress` while another delivery runs it, and
        :class:`CommandIdReused` when the id names a command of another type or payload."""
        fingerprint = command_fingerprint(command_type, payload)
        try:
            outcome = self._begin(command_id, command_type, payload, fingerprint, source)
        except IntegrityError:
            # Two deliveries of a new command raced to log it; the loser sees the entry now.
            outcome = self._begin(command_id, command_type, payload, fingerprint, source)
        if isinstance(outcome, _LoggedNow):
            metrics.command_accepted(command_type, source)
            return None
        return outcome

    def _begin(
        self,
        command_id: str,
        command_type: str,
        payload: dict[str, Any],
        fingerprint: str,
        source: str,
    ) -> CommandRecord | _LoggedNow | None:
        now = self._clock.now()
        with self._sessions.begin() as session:
            row = session.get(CommandRow, command_id, with_for_update=True)
            if row is None:
                session.add(
                    _new_entry(
                        command_id,
                        command_type,
                        payload,
                        fingerprint,
                        source,
                        now,
                        status=CommandStatus.RUNNING,
                    )
                )
                return _LOGGED_NOW
            if _names_another_command(row, command_type, fingerprint):
                raise CommandIdReused(command_id, row.type)
            if CommandStatus(row.status).is_terminal:
                return CommandRecord.of(row)
            if self._running_elsewhere(row, now):
                raise CommandInProgress(command_id)
            row.status = CommandStatus.RUNNING.value
            row.attempts += 1
            row.updated_at = now
            return None

    def run_in_one_transaction(
        self,
        command_id: str,
        command_type: str,
        payload: dict[str, Any],
        *,
        source: str,
        work: Callable[[UnitOfWork], dict[str, Any]],
    ) -> CommandRecord | None:
        """``CommandJournal.run_in_one_transaction``: the entry is read (locked on
        PostgreSQL), ``work`` runs, and the entry is written succeeded only if it is still as
        read (SQLite takes no row lock: a delivery that raced this one makes it roll back),
        all in one transaction."""
        fingerprint = command_fingerprint(command_type, payload)
        started = self._clock.now()
        with self._sessions() as session:
            row = session.get(CommandRow, command_id, with_for_update=True)
            if row is not None:
                if _names_another_command(row, command_type, fingerprint):
                    return None
                if CommandStatus(row.status).is_terminal:
                    return CommandRecord.of(row)
                if self._running_elsewhere(row, started):
                    return None
            result = work(SharedUnitOfWork(session))
            now = self._clock.now()
            logged_now = row is None
            if row is None:
                row = _new_entry(
                    command_id,
                    command_type,
                    payload,
                    fingerprint,
                    source,
                    started,
                    status=CommandStatus.SUCCEEDED,
                )
                row.result, row.updated_at, row.finished_at = result, now, now
                session.add(row)
                record = None
            else:
                record = replace(
                    CommandRecord.of(row),
                    status=CommandStatus.SUCCEEDED,
                    attempts=row.attempts + 1,
                    result=result,
                    error=None,
                    updated_at=now,
                    finished_at=now,
                )
                finished = session.execute(
                    update(CommandRow)
                    .where(
                        CommandRow.id == command_id,
                        CommandRow.status == row.status,
                        CommandRow.attempts == row.attempts,
                    )
                    .values(
                        status=CommandStatus.SUCCEEDED.value,
                        attempts=row.attempts + 1,
                        result=result,
                        error=None,
                        updated_at=now,
                        finished_at=now,
                    )
                    .execution_options(synchronize_session=False)
                )
                if cast(CursorResult[Any], finished).rowcount != 1:
                    raise CannotRunInOneTransaction("another delivery changed the entry")
            try:
                session.commit()
            except IntegrityError as error:
                # A racing delivery logged the command first.
                raise CannotRunInOneTransaction("another delivery logged the entry") from error
            if record is None:
                record = CommandRecord.of(row)
        if logged_now:
            metrics.command_accepted(command_type, source)
        metrics.command_finished(
            command_type, CommandStatus.SUCCEEDED.value, record.created_at, now, result
        )
        return record

    def _running_elsewhere(self, row: CommandRow, now: datetime) -> bool:
        """Another delivery of this command is running it now (a duplicate message); one whose
        worker died stops counting once the lease is over."""
        return row.status == CommandStatus.RUNNING.value and (
            now - row.updated_at < self._running_lease
        )

    def succeed(self, command_id: str, result: dict[str, Any]) -> None:
        self._finish(command_id, CommandStatus.SUCCEEDED, result=result)

    def fail(self, command_id: str, error: dict[str, Any], events: Sequence[Event] = ()) -> None:
        self._finish(command_id, CommandStatus.FAILED, error=error, events=events)

    def reject(self, command_id: str, error: dict[str, Any], events: Sequence[Event] = ()) -> None:
        self._finish(command_id, CommandStatus.REJECTED, error=error, events=events)

    def retrying(
        self, command_id: str, error: dict[str, Any], retry: dict[str, Any] | None = None
    ) -> None:
        now = self._clock.now()
        with self._sessions.begin() as session:
            row = session.get(CommandRow, command_id, with_for_update=True)
            if row is None:
                return
            row.status = CommandStatus.RETRYING.value
            row.error = error
            row.updated_at = now
            if retry is not None:
                history = [*(row.retries or []), {"at": now.isoformat(), **retry}]
                row.retries = history[-MAX_RETRY_HISTORY:]

    def waiting(self, command_id: str, seconds: float) -> None:
        """The command was re-queued to wait ``seconds`` for the provider's rate budget."""
        now = self._clock.now()
        with self._sessions.begin() as session:
            session.execute(
                update(CommandRow)
                .where(CommandRow.id == command_id)
                .values(status=CommandStatus.WAITING.value, updated_at=now)
            )

    def prune_finished(self, status: CommandStatus, before: datetime, limit: int) -> int:
        """Delete the ``limit`` oldest commands that finished in ``status`` before ``before``
        with the provider calls they made (one short transaction; the index on status and
        finished_at finds them). On PostgreSQL the rows are taken ``FOR UPDATE SKIP LOCKED``:
        a row another transaction holds (a replay under way) is left for a later call, never
        waited on."""
        _refuse_unfinished(status)
        oldest = (
            select(CommandRow.id)
            .where(CommandRow.status == status.value, CommandRow.finished_at < before)
            .order_by(CommandRow.finished_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        with self._sessions.begin() as session:
            pruned = list(session.scalars(oldest))
            if not pruned:
                return 0
            # A command's calls are part of its story (`accounts show`): they go with it.
            session.execute(
                delete(ProviderCallRow)
                .where(ProviderCallRow.command_id.in_(pruned))
                .execution_options(synchronize_session=False)
            )
            deleted = session.execute(
                delete(CommandRow)
                .where(CommandRow.id.in_(pruned))
                .execution_options(synchronize_session=False)
            )
            return cast(CursorResult[Any], deleted).rowcount

    def count_finished(self, status: CommandStatus, before: datetime) -> int:
        _refuse_unfinished(status)
        with self._sessions() as session:
            return (
                session.scalar(
                    select(func.count())
                    .select_from(CommandRow)
                    .where(CommandRow.status == status.value, CommandRow.finished_at < before)
                )
                or 0
            )

    def _finish(
        self,
        command_id: str,
        status: CommandStatus,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        events: Sequence[Event] = (),
    ) -> None:
        """Record the outcome once: a command that finished already (another delivery
        finished it first) is left as it is, and ``events`` are written only with the outcome
        they report, in its transaction."""
        now = self._clock.now()
        with self._sessions.begin() as session:
            finished = session.execute(
                update(CommandRow)
                .where(CommandRow.id == command_id, CommandRow.status.notin_(_FINISHED))
                .values(
                    status=status.value,
                    result=result,
                    error=error,
                    updated_at=now,
                    finished_at=now,
                )
                .returning(CommandRow.type, CommandRow.created_at)
            ).first()
            if finished is not None:
                outbox = SqlEventOutbox(session)
                for event in events:
                    outbox.add(event)
        if finished is not None:
            metrics.command_finished(finished.type, status.value, finished.created_at, now, result)
            if error is not None:
                metrics.command_ended_in_error(
                    finished.type, status.value, error_code(error).name, error_reason(error)
                )


def _new_entry(
    command_id: str,
    command_type: str,
    payload: dict[str, Any],
    fingerprint: str,
    source: str,
    now: datetime,
    *,
    status: CommandStatus,
) -> CommandRow:
    """The entry of a command first seen by a worker (another service published it)."""
    return CommandRow(
        id=command_id,
        type=command_type,
        status=status.value,
        source=source,
        payload=payload,
        fingerprint=fingerprint,
        attempts=1,
        created_at=now,
        updated_at=now,
        published_at=now,
    )


def _names_another_command(row: CommandRow, command_type: str, fingerprint: str) -> bool:
    # Entries logged before fingerprints were kept are taken at their type's word.
    return row.type != command_type or row.fingerprint not in (None, fingerprint)


_FINISHED = tuple(status.value for status in CommandStatus if status.is_terminal)


def not_replayable(record: CommandRecord) -> FailedPrecondition:
    """The refusal to replay a rejected command, naming why it was rejected."""
    why = error_line(record.error or {})
    return FailedPrecondition(
        f"command {record.id} was rejected ({why}): it was the caller's mistake and would be "
        "rejected again; the caller sends a corrected command",
        details=[error_info("COMMAND_REJECTED", command_id=record.id)],
    )


def _refuse_unfinished(status: CommandStatus) -> None:
    if status not in PRUNABLE_STATUSES:
        raise ValueError(f"a {status.value} command has not finished: it is never pruned")

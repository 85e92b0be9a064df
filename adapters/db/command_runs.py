"""A command's runs in the command log: what the tasks write as they run it (the worker's
side of ``domain.ports.commands.CommandJournal``).

A delivery begins the command (logging it first when another service published it straight
onto the queue), or is told it finished (replay), runs elsewhere, or names another command;
it then records the outcome once, with the events that report it, or a retry or a wait.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from sqlalchemy import ColumnElement, Row, Table, and_, bindparam, null, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from adapters.clock import SystemClock
from adapters.db.command_records import CommandRecord
from adapters.db.events import SqlEventOutbox
from adapters.db.models import CommandRow
from adapters.db.uow import SharedUnitOfWork, is_unreachable_or_read_only
from adapters.observability import metrics
from adapters.observability.tracing import COMMAND_ID, COMMAND_TYPE, span
from domain.errors import CommandIdReused, CommandInProgress
from domain.events.base import Event
from domain.messages import AWAITING_DELIVERY, CommandStatus, command_fingerprint
from domain.operations.outcomes import error_code, error_reason
from domain.ports.application import Clock
from domain.ports.commands import CannotRunInOneTransaction
from domain.ports.repositories import UnitOfWork

logger = logging.getLogger(__name__)

T = TypeVar("T")


class _LoggedNow:
    """``_begin``'s answer when it made the command's entry (a command first seen here)."""


_LOGGED_NOW = _LoggedNow()

MAX_RETRY_HISTORY = 50
DEFAULT_RUNNING_LEASE = timedelta(minutes=10)
DEFAULT_RECORD_PATIENCE = timedelta(seconds=20)
"""How long a delivery tries again to record that its command runs, ended or will be retried,
while the database is unreachable or cannot write (a switchover, a restart)."""


class SqlCommandRuns:
    """Each method is one short transaction of its own (``run_in_one_transaction``: with
    the command's own work in it)."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        clock: Clock,
        running_lease: timedelta = DEFAULT_RUNNING_LEASE,
        record_patience: timedelta = DEFAULT_RECORD_PATIENCE,
        wall_clock: Clock | None = None,
    ) -> None:
        self._sessions = sessions
        self._clock = clock
        self._wall_clock = wall_clock or SystemClock()
        """Real time, for how long a run has lasted: the business ``clock`` may be moved."""
        self._running_lease = running_lease
        self._record_patience = record_patience

    def _patiently(self, what: str, command_id: str, record: Callable[[], T]) -> T:
        """``record`` (one short transaction), tried again while the database is unreachable
        or cannot write, for :data:`DEFAULT_RECORD_PATIENCE` at most.

        A record that is not made leaves the command ``running`` under this delivery's lease
        (the broker's visibility timeout, ten minutes): every later delivery is told it runs
        elsewhere until then. During a switchover the connection that met the old primary is
        discarded (``adapters/db/engine.py``) and a new one finds the new primary within
        seconds: waiting for it here ends the command, or hands it to its retry, at once
        (issue 41: 'could not record the retry', and a command left ``running``). A busy
        database (a lock timeout, a deadlock) is not waited for here: the delivery's own
        retry, with its backoff, is the answer to that."""
        deadline = time.monotonic() + self._record_patience.total_seconds()
        pause = 0.1
        while True:
            try:
                return record()
            except Exception as error:
                if not is_unreachable_or_read_only(error) or time.monotonic() + pause > deadline:
                    raise
                logger.warning(
                    "the database cannot take %s of %s yet (%s); trying again in %.1fs",
                    what,
                    command_id,
                    type(error).__name__,
                    pause,
                )
            time.sleep(pause)
            pause = min(pause * 2, 2.0)

    def begin(
        self,
        command_id: str,
        command_type: str,
        payload: dict[str, Any],
        *,
        source: str,
        at: datetime | None = None,
        resumes: datetime | None = None,
    ) -> CommandRecord | None:
        """Mark the command running as of ``at`` (logging it first if it is new), or return
        its record if it finished. Raises :class:`CommandInProgress` while another delivery
        runs it, and :class:`CommandIdReused` when the id names a command of another type or
        payload. An entry running as of ``resumes`` is taken over (``CommandJournal.begin``).
        """
        fingerprint = command_fingerprint(command_type, payload)
        # One instant for every try: a try whose commit went through but whose answer was
        # lost (the connection dropped) left the entry running at it, which a later try of
        # this call recognises as its own, not another delivery's. Only a later try: the
        # first has no earlier one to find.
        now = at or self._clock.now()
        tries = 0

        def begin_once() -> CommandRecord | _LoggedNow | None:
            nonlocal tries
            tries += 1
            mine = now if tries > 1 else None
            # Two deliveries of a new command racing to log it meet in the upsert: the loser
            # finds the winner's entry there, never a uniqueness error.
            return self._begin(
                command_id, command_type, payload, fingerprint, source, now, mine, resumes
            )

        with span("command_log begin", {COMMAND_ID: command_id, COMMAND_TYPE: command_type}):
            outcome = self._patiently("the start", command_id, begin_once)
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
        now: datetime,
        mine: datetime | None,
        resumes: datetime | None,
    ) -> CommandRecord | _LoggedNow | None:
        with self._sessions.begin() as session:
            entry = _new_entry(
                command_id,
                command_type,
                payload,
                fingerprint,
                source,
                now,
                status=CommandStatus.RUNNING,
            )
            entry["running_since_wall_clock"] = self._wall_clock.now()
            start_or_log = _START_OR_LOG[session.get_bind().dialect.name]
            started = session.execute(start_or_log, {**entry, "logged_at": now}).first()
            if started is not None:
                return _LOGGED_NOW if started.logged_now else None
            # The upsert met the entry (or it would have made it), and holds it locked.
            row = session.get(CommandRow, command_id, with_for_update=True)
            assert row is not None
            if _names_another_command(row, command_type, fingerprint):
                raise CommandIdReused(command_id, row.type)
            if CommandStatus(row.status).is_terminal:
                return CommandRecord.of(row)
            running = row.status == CommandStatus.RUNNING.value
            if running and row.updated_at == mine:
                # This delivery's own earlier try, committed but unanswered.
                return _LOGGED_NOW if row.created_at == now else None
            # The run an earlier delivery of this message began and could not record the end
            # of is this one's; any other running delivery is waited for.
            resumed = running and resumes is not None and row.updated_at == resumes
            if not resumed and self._running_elsewhere(row, now):
                raise CommandInProgress(command_id)
            row.status = CommandStatus.RUNNING.value
            row.attempts += 1
            row.updated_at = now
            row.running_since_wall_clock = self._wall_clock.now()
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
        """``CommandJournal.run_in_one_transaction`` (:meth:`_run_in_one_transaction`), in a
        span of the command log."""
        with span(
            "command_log run_in_one_transaction",
            {COMMAND_ID: command_id, COMMAND_TYPE: command_type},
        ):
            return self._run_in_one_transaction(
                command_id, command_type, payload, source=source, work=work
            )

    def _run_in_one_transaction(
        self,
        command_id: str,
        command_type: str,
        payload: dict[str, Any],
        *,
        source: str,
        work: Callable[[UnitOfWork], dict[str, Any]],
    ) -> CommandRecord | None:
        """``CommandJournal.run_in_one_transaction``: ``work`` runs, then one statement
        writes the entry succeeded, logging it if it is new, in the same transaction.

        The write is an insert that, when the entry exists, finishes it only if it is this
        delivery's to finish (the same command, not finished, not running under another
        delivery's lease); otherwise nothing is written, the transaction rolls back with the
        work, and the entry is read: a finished command's outcome is returned (a
        redelivery), else ``None`` sends the delivery the usual way (which waits for the
        running one, or refuses an id naming another command). Reading the entry first cost
        every command a statement (a round trip on PostgreSQL) for what only a redelivery
        needs; a redelivery now runs its work and undoes it.
        A racing delivery's entry makes the insert wait for its transaction (PostgreSQL) or
        for the write lock (SQLite), then find it.

        The entry's statement is SQLAlchemy Core on the table, not the ORM: the hot path of
        every such command, where the ORM's loading and flush cost more than the statements
        (the handler's own statements stay its repositories')."""
        fingerprint = command_fingerprint(command_type, payload)
        started = self._clock.now()
        with self._sessions() as session:
            result = work(SharedUnitOfWork(session))
            now = self._clock.now()
            entry = _new_entry(
                command_id,
                command_type,
                payload,
                fingerprint,
                source,
                started,
                status=CommandStatus.SUCCEEDED,
            )
            entry.update(result=result, error=None, updated_at=now, finished_at=now)
            upsert = _FINISH_OR_LOG[session.get_bind().dialect.name]
            try:
                row = session.execute(
                    upsert,
                    {
                        **entry,
                        "logged_at": started,
                        "lease_began": started - self._running_lease,
                    },
                ).first()
                if row is None:
                    # Not this delivery's to finish: its work is undone, and a finished
                    # command's outcome is replayed (the rare redelivery pays a read).
                    session.rollback()
                    return self._finished_before(session, command_id, command_type, fingerprint)
                session.commit()
            except IntegrityError as error:
                # A racing delivery logged the command first (PostgreSQL may tell at commit).
                raise CannotRunInOneTransaction("another delivery logged the entry") from error
        record = CommandRecord.of(row)
        if row.logged_now:
            metrics.command_accepted(command_type, source)
        metrics.command_finished(
            command_type, CommandStatus.SUCCEEDED.value, record.created_at, now, result
        )
        return record

    @staticmethod
    def _finished_before(
        session: Session, command_id: str, command_type: str, fingerprint: str
    ) -> CommandRecord | None:
        """The outcome a redelivered command recorded before, or ``None`` (another delivery
        runs it, or its id names another command: the usual way says which)."""
        row = session.execute(_READ_ENTRY, {"id": command_id}).first()
        if row is None or _names_another_command(row, command_type, fingerprint):
            return None
        return CommandRecord.of(row) if CommandStatus(row.status).is_terminal else None

    def _running_elsewhere(self, row: CommandRow | Row[Any], now: datetime) -> bool:
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
        with span("command_log retrying", {COMMAND_ID: command_id}):
            self._patiently(
                "the retry", command_id, lambda: self._retrying(command_id, error, retry)
            )

    def _retrying(
        self, command_id: str, error: dict[str, Any], retry: dict[str, Any] | None
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

        def record() -> None:
            now = self._clock.now()
            with self._sessions.begin() as session:
                session.execute(
                    update(CommandRow)
                    .where(CommandRow.id == command_id)
                    .values(status=CommandStatus.WAITING.value, updated_at=now)
                )

        self._patiently("the wait", command_id, record)

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
        they report, in its transaction. Tried again while the database cannot write
        (:meth:`_patiently`): a try that did write finished the command, and the next one
        finds it finished and writes nothing."""
        with span(f"command_log {status.value}", {COMMAND_ID: command_id}):
            now, finished = self._patiently(
                f"the outcome ({status.value})",
                command_id,
                lambda: self._finish_once(command_id, status, result, error, events),
            )
        if finished is not None:
            metrics.command_finished(finished.type, status.value, finished.created_at, now, result)
            if error is not None:
                metrics.command_ended_in_error(
                    finished.type, status.value, error_code(error).name, error_reason(error)
                )

    def _finish_once(
        self,
        command_id: str,
        status: CommandStatus,
        result: dict[str, Any] | None,
        error: dict[str, Any] | None,
        events: Sequence[Event],
    ) -> tuple[datetime, Row[str, datetime] | None]:
        now = self._clock.now()
        with self._sessions.begin() as session:
            finished = session.execute(
                _FINISH_WITH_RESULT if result is not None else _FINISH_WITH_ERROR,
                {
                    "entry_id": command_id,
                    "entry_status": status.value,
                    "entry_outcome": result if result is not None else error,
                    "entry_finished_at": now,
                },
            ).first()
            if finished is not None:
                outbox = SqlEventOutbox(session)
                for event in events:
                    outbox.add(event)
        return now, finished


def _new_entry(
    command_id: str,
    command_type: str,
    payload: dict[str, Any],
    fingerprint: str,
    source: str,
    now: datetime,
    *,
    status: CommandStatus,
) -> dict[str, Any]:
    """The entry of a command first seen by a worker (another service published it): its
    columns' values."""
    return {
        "id": command_id,
        "type": command_type,
        "status": status.value,
        "source": source,
        "payload": payload,
        "fingerprint": fingerprint,
        "attempts": 1,
        "created_at": now,
        "updated_at": now,
        "published_at": now,
    }


_COMMANDS = cast(Table, CommandRow.__table__)


def _log_or_update(
    dialect_insert: Callable[[Table], Any],
    also_set: Callable[[Any], dict[str, Any]],
    only_if: ColumnElement[bool],
) -> Any:
    """A dialect's ``INSERT … ON CONFLICT`` of a command's entry: the new entry; or, for an
    entry of this command already there (its type, its fingerprint) and ``only_if``, its new
    status, one more attempt, its time and ``also_set(excluded)``."""
    statement = dialect_insert(_COMMANDS)
    excluded, commands = statement.excluded, _COMMANDS.c
    return statement.on_conflict_do_update(
        index_elements=[commands.id],
        set_={
            "status": excluded.status,
            "attempts": commands.attempts + 1,
            "updated_at": excluded.updated_at,
            **also_set(excluded),
        },
        where=and_(
            commands.type == excluded.type,
            # Entries logged before fingerprints were kept are taken at their type's word.
            or_(commands.fingerprint.is_(None), commands.fingerprint == excluded.fingerprint),
            only_if,
        ),
    )


_LOGGED_AT = bindparam("logged_at", type_=_COMMANDS.c.created_at.type)
_MADE_NOW = (_COMMANDS.c.created_at == _LOGGED_AT).label("logged_now")
"""Whether the statement made the entry: its creation is this delivery's ``logged_at``."""


def _finish_or_log(dialect_insert: Callable[[Table], Any]) -> Any:
    """``run_in_one_transaction``'s one statement: the new entry, succeeded; or, for an entry
    already there, its outcome, only where it is this delivery's to finish. Returns the entry
    and ``logged_now`` (it is new)."""
    commands = _COMMANDS.c
    lease_began = bindparam("lease_began", type_=commands.updated_at.type)
    return _log_or_update(
        dialect_insert,
        lambda excluded: {
            "result": excluded.result,
            "error": None,
            "finished_at": excluded.finished_at,
        },
        and_(
            commands.status.notin_(_FINISHED),
            or_(commands.status != CommandStatus.RUNNING.value, commands.updated_at <= lease_began),
        ),
    ).returning(*_COMMANDS.columns, _MADE_NOW)


def _start_or_log(dialect_insert: Callable[[Table], Any]) -> Any:
    """``begin``'s usual case in one statement: a new entry, running (another service
    published the command, or beat's sweep did); or an entry waiting for its delivery
    (``queued``, ``retrying``, ``waiting``), of this command, running now. Returns
    ``logged_now`` (it is new), or nothing for every other case (a finished command, another
    delivery's run, this delivery's own earlier try, an id naming another command), which the
    read of the entry tells apart. Reading first cost every command the ORM's load of its
    whole entry (payload and history) and its flush."""
    return _log_or_update(
        dialect_insert,
        lambda excluded: {"running_since_wall_clock": excluded.running_since_wall_clock},
        _COMMANDS.c.status.in_([status.value for status in AWAITING_DELIVERY]),
    ).returning(_MADE_NOW)


def _names_another_command(row: CommandRow | Row[Any], command_type: str, fingerprint: str) -> bool:
    # Entries logged before fingerprints were kept are taken at their type's word.
    return row.type != command_type or row.fingerprint not in (None, fingerprint)


_FINISHED = tuple(status.value for status in CommandStatus if status.is_terminal)
# Built once, executed with their parameters: a statement built for each command costs
# about as much as the ORM's own load and flush (SQLAlchemy builds its cache key each time).
_READ_ENTRY = select(_COMMANDS).where(_COMMANDS.c.id == bindparam("id"))
_FINISH_OR_LOG = {
    "postgresql": _finish_or_log(postgresql.insert),
    "sqlite": _finish_or_log(sqlite.insert),
}


def _finish(outcome: str) -> Any:
    """The outcome, once (``_finish_once``): the ``result`` of a command that succeeded or the
    ``error`` of one that ended otherwise, the other SQL ``NULL``. On the table, not the ORM,
    whose bulk update built and evaluated for every command cost more than its statement."""
    commands = _COMMANDS.c
    finished_at = bindparam("entry_finished_at", type_=commands.finished_at.type)
    return (
        update(_COMMANDS)
        .where(commands.id == bindparam("entry_id"), commands.status.notin_(_FINISHED))
        .values(
            {
                "status": bindparam("entry_status"),
                "result": null(),
                "error": null(),
                outcome: bindparam("entry_outcome", type_=commands[outcome].type),
                "updated_at": finished_at,
                "finished_at": finished_at,
            }
        )
        .returning(commands.type, commands.created_at)
    )


_FINISH_WITH_RESULT = _finish("result")
_FINISH_WITH_ERROR = _finish("error")
_START_OR_LOG = {
    "postgresql": _start_or_log(postgresql.insert),
    "sqlite": _start_or_log(sqlite.insert),
}

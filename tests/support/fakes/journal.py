""":class:`FakeCommandJournal` mirrors ``SqlCommandLog`` (``adapters/db/command_log.py``, with
its runs in ``adapters/db/command_runs.py``)."""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from domain.errors import CommandIdReused, CommandInProgress
from domain.events.base import Event
from domain.messages import (
    AWAITING_DELIVERY,
    CommandStatus,
    command_fingerprint,
)
from domain.operations.outcomes import not_replayable
from domain.operations.retention import PRUNABLE_STATUSES
from domain.ports.commands import later_attempt_due_at
from domain.ports.repositories import UnitOfWork
from tests.support.fakes.clock import FakeClock
from tests.support.fakes.database import FakeDatabase


@dataclass
class JournalEntry:
    """A command as ``SqlCommandLog`` records it (``domain.ports.commands.CommandOutcome``)."""

    id: str
    type: str
    status: CommandStatus
    source: str
    payload: dict[str, Any]
    fingerprint: str | None
    attempts: int
    created_at: datetime
    updated_at: datetime
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    retries: list[dict[str, Any]] = field(default_factory=list)
    published_at: datetime | None = None
    finished_at: datetime | None = None
    running_since_wall_clock: datetime | None = None


class FakeCommandJournal:
    """The command log in memory (``domain.ports.commands.CommandJournal``), as
    ``SqlCommandLog``."""

    def __init__(
        self,
        clock: FakeClock,
        running_lease: timedelta = timedelta(minutes=10),
        wall_clock: FakeClock | None = None,
    ) -> None:
        self._clock = clock
        self._wall_clock = wall_clock or clock
        self._running_lease = running_lease
        self.entries: dict[str, JournalEntry] = {}
        self.waits: list[tuple[str, float]] = []
        self.outbox: FakeDatabase | None = None
        """Where ``fail`` writes its events (the application's database)."""
        self.prunes: list[int] = []
        """How many commands each ``prune_finished`` call deleted (one transaction each)."""
        self._failures: dict[str, list[Exception]] = defaultdict(list)
        self._answers_lost: dict[str, list[Exception]] = defaultdict(list)

    # -- for the tests ----------------------------------------------------------------------

    def fail_next(self, operation: str, error: Exception, *, times: int = 1) -> None:
        """The next ``times`` calls of ``operation`` (a method name) raise ``error``."""
        self._failures[operation].extend([error] * times)

    def lose_next_answer(self, operation: str, error: Exception) -> None:
        """The next call of ``operation`` (``begin``) takes effect, then raises ``error``: its
        commit went through, its answer was lost."""
        self._answers_lost[operation].append(error)

    def accept(self, command_id: str, command_type: str, payload: dict[str, Any]) -> JournalEntry:
        """Record a command as the API does before publishing it (``queued``)."""
        now = self._clock.now()
        entry = JournalEntry(
            id=command_id,
            type=command_type,
            status=CommandStatus.QUEUED,
            source="api",
            payload=payload,
            fingerprint=command_fingerprint(command_type, payload),
            attempts=0,
            created_at=now,
            updated_at=now,
        )
        self.entries[command_id] = entry
        return entry

    def __getitem__(self, command_id: str) -> JournalEntry:
        return self.entries[command_id]

    # -- the port ---------------------------------------------------------------------------

    def get(self, command_id: str) -> JournalEntry | None:
        return self.entries.get(command_id)

    def begin(
        self,
        command_id: str,
        command_type: str,
        payload: dict[str, Any],
        *,
        source: str,
        at: datetime | None = None,
        resumes: datetime | None = None,
    ) -> JournalEntry | None:
        self._maybe_fail("begin")
        begun = self._begin(command_id, command_type, payload, source, at, resumes)
        if self._answers_lost["begin"]:
            raise self._answers_lost["begin"].pop(0)
        return begun

    def _begin(
        self,
        command_id: str,
        command_type: str,
        payload: dict[str, Any],
        source: str,
        at: datetime | None,
        resumes: datetime | None,
    ) -> JournalEntry | None:
        now = at or self._clock.now()
        fingerprint = command_fingerprint(command_type, payload)
        entry = self.entries.get(command_id)
        if entry is None:
            self.entries[command_id] = JournalEntry(
                id=command_id,
                type=command_type,
                status=CommandStatus.RUNNING,
                source=source,
                payload=payload,
                fingerprint=fingerprint,
                attempts=1,
                created_at=now,
                updated_at=now,
                published_at=now,
                running_since_wall_clock=self._wall_clock.now(),
            )
            return None
        if entry.type != command_type or entry.fingerprint not in (None, fingerprint):
            raise CommandIdReused(command_id, entry.type)
        if entry.status.is_terminal:
            return copy.deepcopy(entry)
        running = entry.status is CommandStatus.RUNNING
        resumed = running and resumes is not None and entry.updated_at == resumes
        if running and not resumed and now - entry.updated_at < self._running_lease:
            raise CommandInProgress(command_id)
        entry.status = CommandStatus.RUNNING
        entry.attempts += 1
        entry.updated_at = now
        entry.running_since_wall_clock = self._wall_clock.now()
        return None

    def run_in_one_transaction(
        self,
        command_id: str,
        command_type: str,
        payload: dict[str, Any],
        *,
        source: str,
        work: Callable[[UnitOfWork], dict[str, Any]],
    ) -> JournalEntry | None:
        """The log and the tables are apart here, so no command runs in one transaction: a
        finished command's outcome is returned (a redelivery), ``None`` otherwise (the runner
        runs it the usual way). The one-transaction path itself is proven on SQLite and
        PostgreSQL (tests/integration/test_one_transaction.py)."""
        entry = self.entries.get(command_id)
        fingerprint = command_fingerprint(command_type, payload)
        if (
            entry is not None
            and entry.type == command_type
            and entry.fingerprint in (None, fingerprint)
            and entry.status.is_terminal
        ):
            return copy.deepcopy(entry)
        return None

    def succeed(self, command_id: str, result: dict[str, Any]) -> None:
        self._maybe_fail("succeed")
        self._finish(command_id, CommandStatus.SUCCEEDED, result=result)

    def fail(self, command_id: str, error: dict[str, Any], events: Sequence[Event] = ()) -> None:
        self._maybe_fail("fail")
        self._end_in_error(command_id, CommandStatus.FAILED, error, events)

    def reject(self, command_id: str, error: dict[str, Any], events: Sequence[Event] = ()) -> None:
        self._maybe_fail("reject")
        self._end_in_error(command_id, CommandStatus.REJECTED, error, events)

    def _end_in_error(
        self,
        command_id: str,
        status: CommandStatus,
        error: dict[str, Any],
        events: Sequence[Event],
    ) -> None:
        entry = self.entries.get(command_id)
        if entry is not None and entry.status.is_terminal:
            return  # finished by another delivery first, as SqlCommandLog
        self._finish(command_id, status, error=error)
        if events and self.outbox is not None:
            # The real log writes them in the outcome's transaction.
            with self.outbox.unit_of_work() as uow:
                for event in events:
                    uow.events.add(event)
                uow.commit()

    def retrying(
        self, command_id: str, error: dict[str, Any], retry: dict[str, Any] | None = None
    ) -> None:
        self._maybe_fail("retrying")
        entry = self.entries.get(command_id)
        if entry is None:
            return
        now = self._clock.now()
        entry.status = CommandStatus.RETRYING
        entry.error = error
        entry.updated_at = now
        if retry is not None:
            entry.retries = [*entry.retries, {"at": now.isoformat(), **retry}][-50:]

    def waiting(self, command_id: str, seconds: float) -> None:
        self._maybe_fail("waiting")
        self.waits.append((command_id, seconds))
        entry = self.entries.get(command_id)
        if entry is not None:
            entry.status = CommandStatus.WAITING
            entry.updated_at = self._clock.now()

    def stalled(
        self,
        older_than: timedelta,
        limit: int = 100,
        running_older_than: timedelta | None = None,
    ) -> Sequence[JournalEntry]:
        now = self._clock.now()
        cutoff = now - older_than
        stalled = [
            entry
            for entry in self.entries.values()
            if (
                (entry.status is CommandStatus.QUEUED and entry.created_at < cutoff)
                or (
                    entry.status is CommandStatus.RETRYING
                    and later_attempt_due_at(entry.status, entry.updated_at, entry.retries) < cutoff
                )
                or (
                    running_older_than is not None
                    and entry.status is CommandStatus.RUNNING
                    and entry.running_since_wall_clock is not None
                    and entry.running_since_wall_clock < self._wall_clock.now() - running_older_than
                )
            )
            and (entry.published_at is None or entry.published_at < cutoff)
        ]
        return sorted(stalled, key=lambda entry: entry.updated_at)[:limit]

    def awaiting_delivery_since(
        self,
        since: datetime,
        limit: int,
        statuses: Sequence[CommandStatus] = AWAITING_DELIVERY,
    ) -> Sequence[JournalEntry]:
        awaiting = [
            entry
            for entry in self.entries.values()
            if entry.status in statuses and entry.updated_at >= since
        ]
        return sorted(awaiting, key=lambda entry: entry.updated_at)[:limit]

    def mark_published(self, command_id: str) -> None:
        entry = self.entries.get(command_id)
        if entry is not None:
            entry.published_at = self._clock.now()

    def requeue(self, command_id: str) -> JournalEntry | None:
        entry = self.entries.get(command_id)
        if entry is None:
            return None
        if entry.status is CommandStatus.REJECTED:
            raise not_replayable(entry.id, entry.error)
        entry.status = CommandStatus.QUEUED
        entry.error = entry.result = None
        entry.finished_at = entry.published_at = None
        entry.updated_at = self._clock.now()
        return entry

    def prune_finished(self, status: CommandStatus, before: datetime, limit: int) -> int:
        self._maybe_fail("prune_finished")
        oldest = self._finished(status, before)[:limit]
        for entry in oldest:
            del self.entries[entry.id]
        self.prunes.append(len(oldest))
        return len(oldest)

    def count_finished(self, status: CommandStatus, before: datetime) -> int:
        return len(self._finished(status, before))

    def _finished(self, status: CommandStatus, before: datetime) -> list[JournalEntry]:
        if status not in PRUNABLE_STATUSES:
            raise ValueError(f"a {status.value} command has not finished: it is never pruned")
        finished = [
            entry
            for entry in self.entries.values()
            if entry.status is status
            and entry.finished_at is not None
            and entry.finished_at < before
        ]
        return sorted(finished, key=lambda entry: entry.finished_at or before)

    def _finish(
        self,
        command_id: str,
        status: CommandStatus,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        entry = self.entries.get(command_id)
        if entry is None:
            return
        now = self._clock.now()
        entry.status = status
        entry.result = result
        entry.error = error
        entry.updated_at = now
        entry.finished_at = now

    def _maybe_fail(self, operation: str) -> None:
        if self._failures[operation]:
            raise self._failures[operation].pop(0)

"""A bound on how long a PostgreSQL ``COMMIT`` may wait for its answer.

A commit can wait for ever on a server that is alive: with synchronous replication, a
primary whose synchronous standby has gone (promoted elsewhere in a switchover, the old
primary left up) holds every commit in its ``SyncRep`` wait, the transaction already
committed locally. The network is fine, so neither ``tcp_user_timeout`` nor keepalives end
it (``network_timeouts``), and the task that made the commit hangs with it (issue 41: one
period-end change left ``applying`` for good in about one run in four of the switchover with
the old primary left up read-only).

A commit still unanswered after the bound is cancelled (libpq's cancel request, which
psycopg makes safe to send from another thread), and whatever the server answers then, its
outcome is unknown: PostgreSQL ends a cancelled ``SyncRep`` wait with a warning and a
*successful* commit that its standby may never have, and a cancel that crossed a commit
finishing at that moment proves nothing either. So the commit raises
:class:`CommitOutcomeUnknown`, a lost connection (the connection is discarded with its pool):
the caller treats it as any commit whose answer was lost, and its retry finds out what
happened (``SqlCommandRuns``'s own tries, a claim taken back, an idempotent handler run
again). One watchdog thread per engine (per process) keeps the deadlines; a commit costs a
lock and a heap push, not a timer thread.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from sqlalchemy import Engine, event
from sqlalchemy.engine import ExceptionContext

logger = logging.getLogger(__name__)


class CommitOutcomeUnknown(psycopg.OperationalError):
    """A commit was not answered within its bound and was cancelled: it may or may not have
    been made. A driver's operational error without a SQLSTATE, as a lost connection is:
    transient (``is_transient_db_error``), and the connection is discarded."""


class CommitWatchdog:
    """Cancels what is still running when its deadline passes (one daemon thread)."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._deadlines: list[tuple[float, int]] = []
        self._cancels: dict[int, Callable[[], None]] = {}
        self._fired: set[int] = set()
        self._numbers = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, seconds: float, cancel: Callable[[], None]) -> int:
        """Call ``cancel`` in ``seconds`` unless :meth:`done` comes first; a token."""
        deadline = time.monotonic() + seconds
        with self._lock:
            token = next(self._numbers)
            self._cancels[token] = cancel
            heapq.heappush(self._deadlines, (deadline, token))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="commit-watchdog", daemon=True
                )
                self._thread.start()
            elif self._deadlines[0][1] == token:
                self._lock.notify()
        return token

    def done(self, token: int) -> bool:
        """The watched call returned; whether its deadline had passed (``cancel`` was called)."""
        with self._lock:
            self._cancels.pop(token, None)
            if token in self._fired:
                self._fired.discard(token)
                return True
            return False

    def _run(self) -> None:
        while True:
            with self._lock:
                while self._deadlines and self._deadlines[0][1] not in self._cancels:
                    heapq.heappop(self._deadlines)  # done before its deadline
                if not self._deadlines:
                    self._lock.wait()
                    continue
                deadline, token = self._deadlines[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._lock.wait(wait)
                    continue
                heapq.heappop(self._deadlines)
                cancel = self._cancels.pop(token)
                self._fired.add(token)
            try:
                cancel()
            except Exception:
                # The connection may be gone already; the commit raises all the same.
                logger.warning("could not cancel a commit past its bound", exc_info=True)


def bound_commits(engine: Engine, seconds: float) -> None:
    """Every ``COMMIT`` of ``engine`` (PostgreSQL) answered within ``seconds``, or cancelled
    and raised as :class:`CommitOutcomeUnknown` (the module's docstring)."""
    watchdog = CommitWatchdog()
    commit = engine.dialect.do_commit

    def do_commit(dbapi_connection: Any) -> None:
        token = watchdog.watch(seconds, dbapi_connection.cancel_safe)
        try:
            commit(dbapi_connection)
        finally:
            fired = watchdog.done(token)
        if fired:
            raise CommitOutcomeUnknown(
                f"the commit was not answered within {seconds:g}s and was cancelled; "
                "whether it was made is unknown"
            )

    engine.dialect.do_commit = do_commit  # type: ignore[method-assign]

    @event.listens_for(engine, "handle_error")
    def outcome_unknown_is_a_lost_connection(context: ExceptionContext) -> None:
        if isinstance(context.original_exception, CommitOutcomeUnknown):
            context.is_disconnect = True

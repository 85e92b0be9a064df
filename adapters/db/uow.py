"""The SQLAlchemy unit of work, and which database errors are worth a retry."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session, sessionmaker

from adapters.db.audit import SqlAuditTrail
from adapters.db.engine import NOT_A_WRITABLE_PRIMARY_SQLSTATES
from adapters.db.events import (
    SqlEventOutbox,
    SqlStripeEndpointRepository,
    SqlWebhookDeliveryRepository,
    SqlWebhookEndpointRepository,
)
from adapters.db.repositories import (
    SqlBillingAccountRepository,
    SqlChangePreviewRepository,
    SqlOrganizationRepository,
    SqlPlanRepository,
    SqlProviderWalkRepository,
    SqlRenewalCheckRepository,
    SqlScheduledChangeRepository,
    SqlSubscriptionRepository,
    SqlUserRepository,
)
from domain.errors import UniquenessViolation
from domain.ports.commands import CannotRunInOneTransaction


class SqlUnitOfWork:
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def __enter__(self) -> Self:
        self._bind(self._sessions())
        return self

    def _bind(self, session: Session) -> None:
        self.session = session
        self.users = SqlUserRepository(self.session)
        self.organizations = SqlOrganizationRepository(self.session)
        self.billing_accounts = SqlBillingAccountRepository(self.session)
        self.plans = SqlPlanRepository(self.session)
        self.subscriptions = SqlSubscriptionRepository(self.session)
        self.scheduled_changes = SqlScheduledChangeRepository(self.session)
        self.change_previews = SqlChangePreviewRepository(self.session)
        self.renewal_checks = SqlRenewalCheckRepository(self.session)
        self.events = SqlEventOutbox(self.session)
        self.webhook_endpoints = SqlWebhookEndpointRepository(self.session)
        self.webhook_deliveries = SqlWebhookDeliveryRepository(self.session)
        self.stripe_endpoints = SqlStripeEndpointRepository(self.session)
        self.provider_walks = SqlProviderWalkRepository(self.session)
        self.audit = SqlAuditTrail(self.session)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.rollback()
        self.session.close()

    def commit(self) -> None:
        try:
            self.session.commit()
        except sa_exc.IntegrityError as error:
            self.session.rollback()
            _raise_as_uniqueness_violation(error)
            raise

    def rollback(self) -> None:
        self.session.rollback()


class SharedUnitOfWork(SqlUnitOfWork):
    """A unit of work inside a transaction that its maker commits, with the command's outcome
    (``SqlCommandLog.run_in_one_transaction``). ``commit()`` writes the changes (a flush: a
    uniqueness rule broken shows now), the maker commits them. It may be entered again and
    again. Left with a change written and not committed, it raises
    :class:`CannotRunInOneTransaction`: that change cannot be undone alone, so the maker rolls
    the whole transaction back."""

    def __init__(self, session: Session) -> None:
        # Its maker's session, never one of its own (its ``__enter__`` opens none), so no
        # sessions to make them from: the base's ``__init__`` is not called.
        self._bind(session)
        self._flushes = 0
        self._flushes_committed = 0
        event.listen(session, "after_flush", self._count_flush)

    def _count_flush(self, *_: object) -> None:
        self._flushes += 1

    def __enter__(self) -> Self:
        self._flushes_committed = self._flushes
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            return
        session = self.session
        if (
            session.new
            or session.dirty
            or session.deleted
            or (self._flushes != self._flushes_committed)
        ):
            raise CannotRunInOneTransaction("a change was left uncommitted")

    def commit(self) -> None:
        try:
            self.session.flush()
        except sa_exc.IntegrityError as error:
            _raise_as_uniqueness_violation(error)
            raise
        self._flushes_committed = self._flushes

    def rollback(self) -> None:
        raise CannotRunInOneTransaction("a change cannot be rolled back alone")


def _raise_as_uniqueness_violation(error: sa_exc.IntegrityError) -> None:
    """A broken uniqueness rule is the domain's ``UniquenessViolation``; any other integrity
    error returns, for the caller to raise."""
    if is_unique_violation(error):
        raise UniquenessViolation(str(error.orig)) from error


def is_unique_violation(error: sa_exc.IntegrityError) -> bool:
    sqlstate = getattr(error.orig, "sqlstate", None)
    if sqlstate is not None:
        return str(sqlstate) == "23505"  # unique_violation
    return "UNIQUE constraint failed" in str(error.orig)


_TRANSIENT_SQLSTATES = {
    "40001",  # serialization_failure
    "40P01",  # deadlock_detected
    "55P03",  # lock_not_available
    "57014",  # query_canceled (statement/lock timeout)
    *NOT_A_WRITABLE_PRIMARY_SQLSTATES,  # read-only (25006), shutting down, cannot connect now
}


def _is_transient_sqlstate(sqlstate: object) -> bool:
    # Class 08, connection exceptions: the connection is gone, a new one may reach a server.
    return str(sqlstate) in _TRANSIENT_SQLSTATES or str(sqlstate).startswith("08")


def is_transient_db_error(error: BaseException) -> bool:
    """Lock timeouts, deadlocks, serialization failures, lost connections, and a server that
    cannot write now (a switchover's old primary, read-only: 25006)."""
    if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(error, sa_exc.OperationalError):
        original = error.orig
        sqlstate = getattr(original, "sqlstate", None)
        if sqlstate is not None:
            return _is_transient_sqlstate(sqlstate)
        if type(original).__module__.startswith("sqlite3"):
            message = str(original).lower()
            return "database is locked" in message or "database is busy" in message
        # A server driver's operational error without a SQLSTATE comes from the connection,
        # not from a statement the server ran: refused, reset, or the server starting up or
        # shutting down (a PostgreSQL restart), or no host of a multi-host URL accepting
        # writes yet (a switchover under way) — the database is unreachable for now.
        return True
    if isinstance(error, sa_exc.DBAPIError):
        sqlstate = getattr(error.orig, "sqlstate", None)
        return sqlstate is not None and _is_transient_sqlstate(sqlstate)
    return isinstance(error, sa_exc.TimeoutError)  # connection pool exhausted


def is_unreachable_or_read_only(error: BaseException) -> bool:
    """The transient errors that say no server takes writes on this connection now (lost,
    refused, shutting down, read-only), as opposed to a busy one (locks, deadlocks): what a
    switchover or a restart looks like, over in seconds."""
    if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
        return True
    if not isinstance(error, sa_exc.DBAPIError):
        return False
    sqlstate = getattr(error.orig, "sqlstate", None)
    if sqlstate is not None:
        return str(sqlstate) in NOT_A_WRITABLE_PRIMARY_SQLSTATES or str(sqlstate).startswith("08")
    return isinstance(error, sa_exc.OperationalError) and not type(
        error.orig
    ).__module__.startswith("sqlite3")

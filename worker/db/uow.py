"""The SQLAlchemy unit of work, and which database errors are worth a retry."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session, sessionmaker

from domain.errors import UniquenessViolation
from worker.db.engine import session_factory
from worker.db.events import (
    SqlEventOutbox,
    SqlStripeEndpointRepository,
    SqlWebhookDeliveryRepository,
    SqlWebhookEndpointRepository,
)
from worker.db.repositories import (
    SqlBillingAccountRepository,
    SqlOrganizationRepository,
    SqlPlanRepository,
    SqlScheduledChangeRepository,
    SqlSubscriptionRepository,
    SqlUserRepository,
)


class SqlUnitOfWork:
    def __init__(self, sessions: sessionmaker[Session] | None = None) -> None:
        self._sessions = sessions

    def __enter__(self) -> Self:
        self.session = (self._sessions or session_factory())()
        self.users = SqlUserRepository(self.session)
        self.organizations = SqlOrganizationRepository(self.session)
        self.billing_accounts = SqlBillingAccountRepository(self.session)
        self.plans = SqlPlanRepository(self.session)
        self.subscriptions = SqlSubscriptionRepository(self.session)
        self.scheduled_changes = SqlScheduledChangeRepository(self.session)
        self.events = SqlEventOutbox(self.session)
        self.webhook_endpoints = SqlWebhookEndpointRepository(self.session)
        self.webhook_deliveries = SqlWebhookDeliveryRepository(self.session)
        self.stripe_endpoints = SqlStripeEndpointRepository(self.session)
        return self

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
            if _is_unique_violation(error):
                raise UniquenessViolation(str(error.orig)) from error
            raise

    def rollback(self) -> None:
        self.session.rollback()


def _is_unique_violation(error: sa_exc.IntegrityError) -> bool:
    sqlstate = getattr(error.orig, "sqlstate", None)
    if sqlstate is not None:
        return str(sqlstate) == "23505"  # unique_violation
    return "UNIQUE constraint failed" in str(error.orig)


_TRANSIENT_SQLSTATES = {
    "40001",  # serialization_failure
    "40P01",  # deadlock_detected
    "55P03",  # lock_not_available
    "57014",  # query_canceled (statement/lock timeout)
    "08000",
    "08003",
    "08006",
    "08001",
    "08004",  # connection exceptions
    "57P01",
    "57P02",
    "57P03",  # admin shutdown, crash shutdown, cannot connect now
}


def is_transient_db_error(error: BaseException) -> bool:
    """Lock timeouts, deadlocks, serialization failures and lost connections."""
    if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(error, sa_exc.OperationalError):
        original = error.orig
        sqlstate = getattr(original, "sqlstate", None)
        if sqlstate is not None:
            return str(sqlstate) in _TRANSIENT_SQLSTATES
        message = str(original).lower()
        return "database is locked" in message or "database is busy" in message
    if isinstance(error, sa_exc.DBAPIError):
        sqlstate = getattr(error.orig, "sqlstate", None)
        return sqlstate is not None and str(sqlstate) in _TRANSIENT_SQLSTATES
    return isinstance(error, sa_exc.TimeoutError)  # connection pool exhausted

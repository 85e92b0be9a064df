"""Ports: what the handlers need from the outside world, as Protocols.

Adapters in ``worker/`` implement them (SQLAlchemy, Stripe); the handlers in ``tasks/`` only
see these.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from types import TracebackType
from typing import Protocol, Self

from domain.billing import BillingAccount, ProviderCustomer
from domain.organizations import Organization
from domain.users import User


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...


class UserRepository(Protocol):
    def get(self, user_id: str, *, for_update: bool = False) -> User | None: ...

    def save(self, user: User) -> None: ...


class OrganizationRepository(Protocol):
    def get(self, org_id: str) -> Organization | None: ...


class BillingAccountRepository(Protocol):
    def get(self, account_id: str, *, for_update: bool = False) -> BillingAccount | None: ...

    def current_for_organization(self, org_id: str) -> BillingAccount | None:
        """The organization's account that is not disabled, if any."""
        ...

    def add(self, account: BillingAccount) -> None: ...

    def save(self, account: BillingAccount) -> None: ...

    def remove(self, account_id: str) -> None: ...


class UnitOfWork(Protocol):
    """One database transaction. Leaving the block without ``commit()`` rolls back.

    ``commit()`` raises :class:`domain.errors.UniquenessViolation` when the transaction would
    break a uniqueness rule (a racing transaction got there first).
    """

    @property
    def users(self) -> UserRepository: ...

    @property
    def organizations(self) -> OrganizationRepository: ...

    @property
    def billing_accounts(self) -> BillingAccountRepository: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...


class BillingProvider(Protocol):
    """The external billing provider (Stripe).

    Failures are raised as domain errors: :class:`domain.errors.TransientError` for what is
    worth retrying (connection errors, 429, 5xx, lock timeouts), a
    :class:`domain.errors.CommandError` for what is not (a 4xx: the request itself is wrong).
    """

    @property
    def name(self) -> str: ...

    def create_customer(self, customer: ProviderCustomer, *, idempotency_key: str) -> str:
        """Create the customer; returns the provider's id. One customer per key."""
        ...

    def find_customer(self, billing_account_id: str) -> str | None:
        """The id of a customer created earlier for this billing account, if any."""
        ...


class BillingPolicy(Protocol):
    @property
    def default_currency(self) -> str: ...

    @property
    def provider_idempotency_window(self) -> timedelta:
        """How long the provider remembers an idempotency key (Stripe: 24 hours), less a
        safety margin; a registration older than this searches before creating."""
        ...


class HandlerContext(Protocol):
    """What a command handler is given to work with."""

    @property
    def clock(self) -> Clock: ...

    @property
    def billing(self) -> BillingPolicy: ...

    def unit_of_work(self) -> UnitOfWork: ...

    def billing_provider(self) -> BillingProvider:
        """The provider client (built on first use); a ``CommandError`` if none is set up."""
        ...


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

    def retrying(
        self, command_id: str, error: dict[str, object], retry: dict[str, object] | None = None
    ) -> None:
        """Mark the command waiting for a retry; ``retry`` is appended to its history."""
        ...


class CommandOutcome(Protocol):
    @property
    def status(self) -> str: ...

    @property
    def result(self) -> dict[str, object] | None: ...

    @property
    def error(self) -> dict[str, object] | None: ...

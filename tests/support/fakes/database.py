""":class:`FakeDatabase` and :class:`FakeUnitOfWork` mirror ``adapters/db/uow.py`` and
``adapters/db/repositories.py``: a repository hands out copies (changing an entity changes
nothing until it is saved), writes become visible to other units of work only on
``commit()`` (a transaction reads what others committed, as PostgreSQL's read committed
does), leaving the block without a commit rolls back, and a commit that would break
one of the schema's uniqueness rules (``adapters/db/models.py``) raises
:class:`UniquenessViolation` and rolls the transaction back. Row locks (``for_update``) are
not modelled: a test runs one transaction at a time, and plays a racing transaction with
:meth:`FakeDatabase.before_next_commit`. Foreign keys are not checked.
"""

from __future__ import annotations

import copy
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from domain.billing.accounts import BillingAccount, BillingAccountState
from domain.billing.organizations import Organization
from domain.errors import UniquenessViolation
from domain.operations.audit import AuditEntry
from domain.provider.pages import ProviderWalk
from domain.subscriptions.change_previews import IssuedPreview
from domain.subscriptions.plans import Plan
from domain.subscriptions.renewal_checks import RenewalCheck
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import Subscription
from domain.users import User
from domain.webhooks import WebhookDelivery, WebhookEndpoint
from tests.support.fakes.audit import FakeAuditTrail
from tests.support.fakes.events import (
    FakeEventOutbox,
    FakeStripeEndpointRepository,
    FakeWebhookDeliveryRepository,
    FakeWebhookEndpointRepository,
)
from tests.support.fakes.repositories import (
    FakeBillingAccountRepository,
    FakeChangePreviewRepository,
    FakeOrganizationRepository,
    FakePlanRepository,
    FakeProviderWalkRepository,
    FakeRenewalCheckRepository,
    FakeScheduledChangeRepository,
    FakeSubscriptionRepository,
    FakeUserRepository,
)


class DatabaseUnavailable(Exception):
    """What the fake database raises when told to fail: the application classifies it as
    transient, as the real one classifies a lock timeout or a lost connection."""


_DELETED = object()


@dataclass(frozen=True)
class _UniqueRule:
    """A unique column (or a partial unique index): ``key`` is the value that must not
    repeat among the rows it returns a value for (``None``: the row is not covered)."""

    name: str
    key: Callable[[Any], object | None]


def _live_account_org(account: BillingAccount) -> object | None:
    live = account.state in (BillingAccountState.PENDING, BillingAccountState.ACTIVE)
    return account.org_id if live else None


def _pending_change_subscription(change: ScheduledChange) -> object | None:
    return change.subscription_id if change.state.is_pending else None


# The uniqueness rules of adapters/db/models.py, besides every table's primary key.
UNIQUE_RULES: dict[str, tuple[_UniqueRule, ...]] = {
    "users": (_UniqueRule("users.email", lambda user: user.email),),
    "organizations": (_UniqueRule("organizations.name", lambda org: org.name),),
    "billing_accounts": (
        _UniqueRule("billing_accounts.provider_id", lambda account: account.provider_id),
        _UniqueRule("uq_billing_accounts_live_org_id", _live_account_org),
    ),
    "plans": (
        _UniqueRule("plans.name", lambda plan: plan.name),
        _UniqueRule("plans.provider_price_id", lambda plan: plan.provider_price_id),
    ),
    "subscriptions": (_UniqueRule("subscriptions.provider_id", lambda sub: sub.provider_id),),
    "scheduled_changes": (
        _UniqueRule("uq_scheduled_changes_pending_subscription_id", _pending_change_subscription),
    ),
    "change_previews": (),
    "provider_walks": (),
    "renewal_checks": (),
    "audit_entries": (),
    "events": (),
    "webhook_endpoints": (),
    "webhook_deliveries": (
        _UniqueRule(
            "uq_webhook_deliveries_event_endpoint",
            lambda delivery: (delivery.event_id, delivery.endpoint_id),
        ),
    ),
}
TABLES = tuple(UNIQUE_RULES)


class FakeDatabase:
    """The committed rows, one dict per table, shared by every unit of work."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, Any]] = {table: {} for table in TABLES}
        self.commits = 0
        self.sequence = itertools.count(1)
        """The outbox's sequence (taken at insert, as PostgreSQL's)."""
        self.events_written = 0
        """Events added to the outbox, committed or not (``Application.events_written``)."""
        self._commit_failures: list[BaseException] = []
        self._before_commit: list[Callable[[], None]] = []
        self._answers_lost = 0

    # -- for the tests ----------------------------------------------------------------------

    def unit_of_work(self) -> FakeUnitOfWork:
        return FakeUnitOfWork(self)

    def seed(self, *entities: Any) -> None:
        """Store entities as committed rows, unchecked (test data)."""
        for entity in entities:
            self.tables[_table_of(entity)][entity.id] = copy.deepcopy(entity)

    def row(self, table: str, entity_id: str) -> Any:
        """A copy of the committed row, or ``None``."""
        found = self.tables[table].get(entity_id)
        return copy.deepcopy(found)

    def rows(self, table: str) -> list[Any]:
        return [copy.deepcopy(row) for row in self.tables[table].values()]

    def fail_next_commits(self, times: int, error: BaseException | None = None) -> None:
        """The next ``times`` commits fail (and roll back) with ``error``."""
        self._commit_failures.extend([error or DatabaseUnavailable("database is locked")] * times)

    def before_next_commit(self, race: Callable[[], None]) -> None:
        """Run ``race`` (a racing transaction, committed on its own) just before the next
        commit is checked: the commit then sees what the race committed."""
        self._before_commit.append(race)

    def lose_next_commit_answers(self, times: int) -> None:
        """The next ``times`` commits go through, then raise :class:`DatabaseUnavailable`:
        the connection dropped before their answer came back (a switchover)."""
        self._answers_lost += times

    # -- for the unit of work ---------------------------------------------------------------

    def commit_transaction(
        self, staged: Mapping[str, Mapping[str, Any]], inserted: set[str]
    ) -> None:
        if self._before_commit:
            self._before_commit.pop(0)()
        if self._commit_failures:
            raise self._commit_failures.pop(0)
        merged = {table: dict(rows) for table, rows in self.tables.items()}
        for table, rows in staged.items():
            for entity_id, row in rows.items():
                if row is _DELETED:
                    merged[table].pop(entity_id, None)
                    continue
                if f"{table}:{entity_id}" in inserted and entity_id in self.tables[table]:
                    raise UniquenessViolation(f"UNIQUE constraint failed: {table}.id")
                merged[table][entity_id] = row
        for table in staged:
            _check_unique(table, merged[table])
        self.tables = merged
        self.commits += 1
        if self._answers_lost:
            self._answers_lost -= 1
            raise DatabaseUnavailable("server closed the connection unexpectedly")


def _check_unique(table: str, rows: Mapping[str, Any]) -> None:
    for rule in UNIQUE_RULES[table]:
        seen: set[object] = set()
        for row in rows.values():
            value = rule.key(row)
            if value is None:
                continue
            if value in seen:
                raise UniquenessViolation(f"UNIQUE constraint failed: {rule.name}")
            seen.add(value)


def _table_of(entity: Any) -> str:
    tables = {
        User: "users",
        Organization: "organizations",
        BillingAccount: "billing_accounts",
        Plan: "plans",
        Subscription: "subscriptions",
        ScheduledChange: "scheduled_changes",
        IssuedPreview: "change_previews",
        RenewalCheck: "renewal_checks",
        WebhookEndpoint: "webhook_endpoints",
        WebhookDelivery: "webhook_deliveries",
        AuditEntry: "audit_entries",
        ProviderWalk: "provider_walks",
    }
    return tables[type(entity)]


class Transaction:
    """The writes of one unit of work, not yet committed."""

    def __init__(self, db: FakeDatabase) -> None:
        self.db = db
        self.staged: dict[str, dict[str, Any]] = defaultdict(dict)
        self.inserted: set[str] = set()

    def read(self, table: str, entity_id: str) -> Any:
        staged = self.staged[table].get(entity_id)
        if staged is _DELETED:
            return None
        row = staged if staged is not None else self.db.tables[table].get(entity_id)
        return copy.deepcopy(row)

    def scan(self, table: str) -> Iterator[Any]:
        """Every row this transaction sees (copies)."""
        ids = dict.fromkeys([*self.db.tables[table], *self.staged[table]])
        for entity_id in ids:
            row = self.read(table, entity_id)
            if row is not None:
                yield row

    def write(self, table: str, entity: Any, *, insert: bool = False) -> None:
        # A row deleted and added again in one transaction takes its id back.
        if insert and self.staged[table].get(entity.id) is not _DELETED:
            self.inserted.add(f"{table}:{entity.id}")
        self.staged[table][entity.id] = copy.deepcopy(entity)

    def delete(self, table: str, entity_id: str) -> None:
        self.staged[table][entity_id] = _DELETED

    def commit(self) -> None:
        try:
            self.db.commit_transaction(self.staged, self.inserted)
        finally:
            # Committed, or rolled back as SqlUnitOfWork.commit rolls back an IntegrityError.
            self.rollback()

    def rollback(self) -> None:
        self.staged = defaultdict(dict)
        self.inserted = set()


class FakeUnitOfWork:
    """One transaction of the :class:`FakeDatabase` (``domain.ports.repositories.UnitOfWork``)."""

    def __init__(self, db: FakeDatabase) -> None:
        self._db = db
        self._tx = Transaction(db)
        self.users = FakeUserRepository(self._tx)
        self.organizations = FakeOrganizationRepository(self._tx)
        self.billing_accounts = FakeBillingAccountRepository(self._tx)
        self.plans = FakePlanRepository(self._tx)
        self.subscriptions = FakeSubscriptionRepository(self._tx)
        self.scheduled_changes = FakeScheduledChangeRepository(self._tx)
        self.change_previews = FakeChangePreviewRepository(self._tx)
        self.renewal_checks = FakeRenewalCheckRepository(self._tx)
        self.events = FakeEventOutbox(self._tx)
        self.webhook_endpoints = FakeWebhookEndpointRepository(self._tx)
        self.webhook_deliveries = FakeWebhookDeliveryRepository(self._tx)
        self.stripe_endpoints = FakeStripeEndpointRepository(self._tx)
        self.provider_walks = FakeProviderWalkRepository(self._tx)
        self.audit = FakeAuditTrail(self._tx)

    def __enter__(self) -> Self:
        self._tx.rollback()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.rollback()

    def commit(self) -> None:
        self._tx.commit()

    def rollback(self) -> None:
        self._tx.rollback()

"""In-memory fakes of the ports (``domain/ports.py``), for fast tests of the real handlers and
of the real task runner.

Each fake keeps the contract of its real adapter, as far as the handlers can tell:

* :class:`FakeDatabase` and :class:`FakeUnitOfWork` mirror ``worker/db/uow.py`` and
  ``worker/db/repositories.py``: a repository hands out copies (changing an entity changes
  nothing until it is saved), writes become visible to other units of work only on
  ``commit()`` (a transaction reads what others committed, as PostgreSQL's read committed
  does), leaving the block without a commit rolls back, and a commit that would break
  one of the schema's uniqueness rules (``worker/db/models.py``) raises
  :class:`UniquenessViolation` and rolls the transaction back. Row locks (``for_update``) are
  not modelled: a test runs one transaction at a time, and plays a racing transaction with
  :meth:`FakeDatabase.before_next_commit`. Foreign keys are not checked.
* :class:`FakeBillingProvider` mirrors Stripe as ``worker/provider/stripe_adapter.py`` sees it: one
  object per idempotency key (a repeated key replays the first answer, a refusal included;
  the same key with other parameters or for another operation is an ``Internal`` error,
  Stripe's ``IdempotencyError``), keys forgotten after 24 hours on the fake clock, customers
  searchable by their billing account, and failures scripted per operation: before the call
  runs (nothing is remembered under the key) or after it took effect (the answer is lost on
  the way, and a retry with the key gets it replayed).
* :class:`FakeCommandJournal` mirrors ``worker/db/commands.py`` (``SqlCommandLog``).

Nothing here imports ``worker``: the fakes stand where the adapters stand.
"""

from __future__ import annotations

import copy
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar

from domain.billing import BillingAccount, BillingAccountState, BillingDetails, ProviderCustomer
from domain.change_previews import ChangePreview, PreviewLine
from domain.console import InvoiceView
from domain.drift import (
    RemoteCustomer,
    RemoteSubscription,
    existing_subscription,
    oldest_customer,
)
from domain.errors import (
    CommandError,
    CommandIdReused,
    CommandInProgress,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    PaymentFailed,
    UniquenessViolation,
    error_info,
    field_violations,
)
from domain.event_ports import EventStream, RelayLock, WebhookSender
from domain.events import Event
from domain.messages import CommandStatus, command_fingerprint
from domain.organizations import Organization, OrganizationState
from domain.plans import Plan, PlanInterval, ProviderPlan, ProviderPrice
from domain.ports import (
    Application,
    BillingProvider,
    Claim,
    Clock,
    CommandJournal,
    RunnerPolicy,
    UnitOfWork,
)
from domain.provider_sync import ProviderCustomerState, RegisteredEndpoint
from domain.rate_budget import BudgetUsage, CallKind, Priority, RateBudget
from domain.retention import PRUNABLE_STATUSES, CommandRetention
from domain.scheduled_changes import (
    ChangeState,
    PaymentBehavior,
    ProrationBehavior,
    ScheduledChange,
)
from domain.subscriptions import ProviderSubscription, Subscription, SubscriptionTerms
from domain.users import User, UserState
from domain.webhooks import DeliveryPolicy, WebhookDelivery, WebhookEndpoint
from tests.support.fake_events import (
    FakeEventOutbox,
    FakeEventStream,
    FakeRelayLock,
    FakeStripeEndpointRepository,
    FakeWebhookDeliveryRepository,
    FakeWebhookEndpointRepository,
    FakeWebhookSender,
)

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
"""Where every fake clock starts."""

STRIPE_KEY_MEMORY = timedelta(hours=24)


# --- the clock --------------------------------------------------------------------------------


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime = T0) -> None:
        self._now = start

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> None:
        self._now += delta


# --- the database -----------------------------------------------------------------------------


class DatabaseUnavailable(Exception):
    """What the fake database raises when told to fail: the application classifies it as
    transient, as the real one classifies a lock timeout or a lost connection."""


class _Entity(Protocol):
    @property
    def id(self) -> str: ...


E = TypeVar("E", bound=_Entity)
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


# The uniqueness rules of worker/db/models.py, besides every table's primary key.
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
        self._commit_failures: list[BaseException] = []
        self._before_commit: list[Callable[[], None]] = []

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
        WebhookEndpoint: "webhook_endpoints",
        WebhookDelivery: "webhook_deliveries",
    }
    return tables[type(entity)]


class _Transaction:
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


class _Repository(Generic[E]):
    table: str

    def __init__(self, tx: _Transaction) -> None:
        self._tx = tx

    def _get(self, entity_id: str) -> E | None:
        found: E | None = self._tx.read(self.table, entity_id)
        return found

    def _all(self) -> list[E]:
        return list(self._tx.scan(self.table))

    def add(self, entity: E) -> None:
        self._tx.write(self.table, entity, insert=True)

    def save(self, entity: E) -> None:
        exists = self._tx.read(self.table, entity.id) is not None
        self._tx.write(self.table, entity, insert=not exists)


class FakeUserRepository(_Repository[User]):
    table = "users"

    def get(self, user_id: str, *, for_update: bool = False) -> User | None:
        return self._get(user_id)

    def by_email(self, email: str) -> User | None:
        return next((user for user in self._all() if user.email == email), None)


class FakeOrganizationRepository(_Repository[Organization]):
    table = "organizations"

    def get(self, org_id: str) -> Organization | None:
        return self._get(org_id)

    def by_name(self, name: str) -> Organization | None:
        return next((org for org in self._all() if org.name == name), None)


class FakeBillingAccountRepository(_Repository[BillingAccount]):
    table = "billing_accounts"

    def get(self, account_id: str, *, for_update: bool = False) -> BillingAccount | None:
        return self._get(account_id)

    def current_for_organization(self, org_id: str) -> BillingAccount | None:
        return next(
            (
                account
                for account in self._all()
                if account.org_id == org_id and account.state is not BillingAccountState.DISABLED
            ),
            None,
        )

    def remove(self, account_id: str) -> None:
        self._tx.delete(self.table, account_id)

    def by_provider_id(
        self, provider_id: str, *, for_update: bool = False
    ) -> BillingAccount | None:
        return next((a for a in self._all() if a.provider_id == provider_id), None)

    def least_recently_synced(self, limit: int) -> list[str]:
        candidates = [
            account
            for account in self._all()
            if account.provider_id is not None and account.customer_deleted_at is None
        ]
        return [account.id for account in _oldest_synced_first(candidates)[:limit]]

    def list_all(self) -> list[BillingAccount]:
        return sorted(self._all(), key=lambda account: account.id)

    def pending_created_before(self, before: datetime, limit: int) -> list[BillingAccount]:
        pending = [
            account
            for account in self._all()
            if account.state is BillingAccountState.PENDING and account.created_at <= before
        ]
        return sorted(pending, key=lambda account: (account.created_at, account.id))[:limit]


class FakePlanRepository(_Repository[Plan]):
    table = "plans"

    def get(self, plan_id: str) -> Plan | None:
        return self._get(plan_id)

    def by_name(self, name: str) -> Plan | None:
        return next((plan for plan in self._all() if plan.name == name), None)

    def find(self, id_or_name: str) -> Plan | None:
        return self.get(id_or_name) or self.by_name(id_or_name.lower())

    def list(self) -> list[Plan]:
        return sorted(self._all(), key=lambda plan: plan.name)

    def by_provider_price(self, price_id: str) -> Plan | None:
        return next((plan for plan in self._all() if plan.provider_price_id == price_id), None)


class FakeSubscriptionRepository(_Repository[Subscription]):
    table = "subscriptions"

    def get(self, subscription_id: str, *, for_update: bool = False) -> Subscription | None:
        return self._get(subscription_id)

    def by_provider_id(self, provider_id: str, *, for_update: bool = False) -> Subscription | None:
        return next((s for s in self._all() if s.provider_id == provider_id), None)

    def of_account(self, billing_account_id: str) -> list[Subscription]:
        mine = [s for s in self._all() if s.billing_account_id == billing_account_id]
        return sorted(mine, key=lambda subscription: subscription.id)

    def least_recently_synced(self, limit: int) -> list[str]:
        live = [s for s in self._all() if not s.state.is_over]
        return [subscription.id for subscription in _oldest_synced_first(live)[:limit]]

    def list_all(self) -> list[Subscription]:
        return sorted(self._all(), key=lambda subscription: subscription.id)


class _Synced(Protocol):
    id: str
    synced_at: datetime | None


S = TypeVar("S", bound=_Synced)


def _oldest_synced_first(rows: list[S]) -> list[S]:
    """Never synced first, then the oldest sync, then by id (as the SQL repositories order)."""
    return sorted(
        rows,
        key=lambda row: (row.synced_at is not None, row.synced_at or datetime.min, row.id),
    )


def _claimable(change: ScheduledChange, now: datetime, lead: timedelta) -> bool:
    """Due and scheduled (a change at the period's end ``lead`` ahead of its boundary), or
    being applied by a worker whose lease ran out."""
    if change.state is ChangeState.SCHEDULED:
        return change.is_due(now, lead)
    return (
        change.state is ChangeState.APPLYING
        and change.lease_until is not None
        and change.lease_until < now
    )


class FakeScheduledChangeRepository(_Repository[ScheduledChange]):
    table = "scheduled_changes"

    def get(self, change_id: str, *, for_update: bool = False) -> ScheduledChange | None:
        return self._get(change_id)

    def pending_for(
        self, subscription_id: str, *, for_update: bool = False
    ) -> ScheduledChange | None:
        pending = [
            change
            for change in self._all()
            if change.subscription_id == subscription_id and change.state.is_pending
        ]
        if len(pending) > 1:  # SQLAlchemy's one_or_none() raises as well
            raise LookupError(f"{len(pending)} pending changes of {subscription_id}")
        return pending[0] if pending else None

    def for_subscription(self, subscription_id: str) -> list[ScheduledChange]:
        mine = [change for change in self._all() if change.subscription_id == subscription_id]
        mine.sort(key=lambda change: change.id)
        mine.sort(key=lambda change: change.created_at, reverse=True)
        return mine

    def claim_due(
        self, now: datetime, lease_until: datetime, limit: int, *, lead: timedelta
    ) -> list[Claim]:
        candidates = sorted(
            (change for change in self._all() if _claimable(change, now, lead)),
            key=lambda change: (change.effective_at, change.id),
        )[:limit]
        claims = []
        for change in candidates:
            change.state = ChangeState.APPLYING
            change.claims += 1
            change.lease_until = lease_until
            change.updated_at = now
            self._tx.write(self.table, change)
            claims.append(Claim(change.id, change.claims))
        return claims

    def staged_due(self, now: datetime, limit: int) -> list[str]:
        due = sorted(
            (
                change
                for change in self._all()
                if change.state is ChangeState.STAGED and change.effective_at <= now
            ),
            key=lambda change: (change.effective_at, change.id),
        )
        return [change.id for change in due[:limit]]

    def release(self, claim: Claim, now: datetime) -> None:
        change = self._get(claim.change_id)
        if (
            change is not None
            and change.claims == claim.number
            and change.state is ChangeState.APPLYING
        ):
            change.lease_until = now
            change.updated_at = now
            self._tx.write(self.table, change)

    def count_in_flight(self, now: datetime) -> int:
        return sum(
            1
            for change in self._all()
            if change.state is ChangeState.APPLYING
            and change.lease_until is not None
            and change.lease_until >= now
        )

    def all_pending(self) -> list[ScheduledChange]:
        return sorted(
            (change for change in self._all() if change.state.is_pending),
            key=lambda change: change.id,
        )


class FakeUnitOfWork:
    """One transaction of the :class:`FakeDatabase` (``domain.ports.UnitOfWork``)."""

    def __init__(self, db: FakeDatabase) -> None:
        self._db = db
        self._tx = _Transaction(db)
        self.users = FakeUserRepository(self._tx)
        self.organizations = FakeOrganizationRepository(self._tx)
        self.billing_accounts = FakeBillingAccountRepository(self._tx)
        self.plans = FakePlanRepository(self._tx)
        self.subscriptions = FakeSubscriptionRepository(self._tx)
        self.scheduled_changes = FakeScheduledChangeRepository(self._tx)
        self.events = FakeEventOutbox(self._tx)
        self.webhook_endpoints = FakeWebhookEndpointRepository(self._tx)
        self.webhook_deliveries = FakeWebhookDeliveryRepository(self._tx)
        self.stripe_endpoints = FakeStripeEndpointRepository(self._tx)

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


# --- the billing provider ---------------------------------------------------------------------


@dataclass(frozen=True)
class ProviderCall:
    """One request the fake provider received (a replay or a failure included)."""

    operation: str
    idempotency_key: str | None
    arguments: tuple[Any, ...]
    outcome: str
    """``executed``, ``replayed`` (the key's first answer, again) or ``failed``."""


@dataclass
class _ScriptedFailure:
    error: Exception
    after_execution: bool


@dataclass
class _Remembered:
    request: tuple[Any, ...]
    result: Any
    at: datetime


class FakeBillingProvider:
    """An in-memory Stripe (``domain.ports.BillingProvider``)."""

    def __init__(self, clock: FakeClock, *, name: str = "fake") -> None:
        self._clock = clock
        self._name = name
        self.calls: list[ProviderCall] = []
        self.customers: dict[str, ProviderCustomer] = {}
        self.prices: dict[str, ProviderPlan] = {}
        self.inactive_prices: set[str] = set()
        self.subscriptions: dict[str, ProviderSubscription] = {}
        self._keys: dict[str, _Remembered] = {}
        self._failures: dict[str, list[_ScriptedFailure]] = defaultdict(list)
        self._ids = itertools.count(1)
        self.declining: set[str] = set()
        self.deleted_customers: set[str] = set()
        self.webhook_endpoints: dict[str, tuple[str, tuple[str, ...]]] = {}
        """Endpoint id → its URL and event types."""
        self.customers_created: dict[str, datetime] = {}
        self.subscription_owners: dict[str, _Owner] = {}
        self.invoices: dict[str, list[InvoiceView]] = {}
        """Provider subscription id → its invoices, newest first."""

    @property
    def name(self) -> str:
        return self._name

    # -- for the tests ----------------------------------------------------------------------

    def fail_next(
        self, operation: str, error: Exception, *, times: int = 1, after_execution: bool = False
    ) -> None:
        """The next ``times`` calls of ``operation`` (a method name) raise ``error``; with
        ``after_execution`` the call takes effect first (the answer is lost on the way)."""
        self._failures[operation].extend([_ScriptedFailure(error, after_execution)] * times)

    def calls_of(self, operation: str, outcome: str | None = None) -> list[ProviderCall]:
        return [
            call
            for call in self.calls
            if call.operation == operation and outcome in (None, call.outcome)
        ]

    def add_price(self, price_id: str, *, currency: str = "usd", amount: int = 1000) -> None:
        self.prices[price_id] = ProviderPlan(
            price_id, price_id, price_id, amount, currency, "month"
        )

    def deactivate_price(self, price_id: str) -> None:
        self.inactive_prices.add(price_id)

    def add_subscription(
        self,
        subscription: ProviderSubscription,
        *,
        customer_id: str = "",
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self.subscriptions[subscription.id] = subscription
        self.subscription_owners[subscription.id] = _Owner(
            customer_id, dict(metadata or {}), self._clock.now()
        )

    def cancel_subscription(self, provider_id: str) -> None:
        self._replace(provider_id, status="canceled")

    def renew(self, provider_id: str) -> ProviderSubscription:
        """The provider's period ends: the next one starts, on the item's price."""
        current = self._existing(provider_id)
        length = current.current_period_end - current.current_period_start
        return self._replace(
            provider_id,
            current_period_start=current.current_period_end,
            current_period_end=current.current_period_end + length,
        )

    def decline_payments(self, provider_id: str) -> None:
        """Invoices of this subscription's changes are never paid from now on."""
        self.declining.add(provider_id)

    def delete_subscription(self, provider_id: str) -> None:
        del self.subscriptions[provider_id]

    # -- the port ---------------------------------------------------------------------------

    def create_customer(self, customer: ProviderCustomer, *, idempotency_key: str) -> str:
        def create() -> str:
            customer_id = f"cus_{next(self._ids)}"
            self.customers[customer_id] = customer
            self.customers_created[customer_id] = self._clock.now()
            return customer_id

        result: str = self._call("create_customer", idempotency_key, (customer,), create)
        return result

    def find_customer(self, billing_account_id: str) -> str | None:
        def search() -> str | None:
            # Every customer naming the account is seen; the oldest is taken (as Stripe's).
            naming = [
                customer
                for customer in self._listed_customers()
                if customer.billing_account_id == billing_account_id
            ]
            chosen = oldest_customer(naming)
            return chosen.id if chosen is not None else None

        found: str | None = self._call("find_customer", None, (billing_account_id,), search)
        return found

    def get_customer(self, customer_id: str) -> ProviderCustomerState:
        def read() -> ProviderCustomerState:
            if customer_id in self.deleted_customers:
                return ProviderCustomerState(customer_id, deleted=True, billing_account_id=None)
            customer = self.customers.get(customer_id)
            if customer is None:
                raise _rejected("account", f"No such customer: '{customer_id}'")
            return ProviderCustomerState(
                customer_id, deleted=False, billing_account_id=customer.billing_account_id
            )

        found: ProviderCustomerState = self._call("get_customer", None, (customer_id,), read)
        return found

    def delete_customer(self, customer_id: str) -> None:
        """Deleted at the provider (its subscriptions are canceled, as Stripe does)."""
        self.customers.pop(customer_id, None)
        self.deleted_customers.add(customer_id)
        for subscription_id, owner in self.subscription_owners.items():
            if owner.customer_id == customer_id and subscription_id in self.subscriptions:
                self._replace(subscription_id, status="canceled")

    def register_webhook_endpoint(
        self, url: str, event_types: Sequence[str], known_ids: set[str]
    ) -> RegisteredEndpoint:
        def register() -> RegisteredEndpoint:
            existing = [id_ for id_, (at, _) in self.webhook_endpoints.items() if at == url]
            known = [id_ for id_ in existing if id_ in known_ids]
            if known:
                self.webhook_endpoints[known[0]] = (url, tuple(event_types))
                return RegisteredEndpoint(known[0], None)
            endpoint_id = f"we_{next(self._ids)}"
            self.webhook_endpoints[endpoint_id] = (url, tuple(event_types))
            for old in existing:
                del self.webhook_endpoints[old]
            return RegisteredEndpoint(endpoint_id, f"whsec_{endpoint_id}", tuple(existing))

        arguments = (url, tuple(event_types), frozenset(known_ids))
        registered: RegisteredEndpoint = self._call(
            "register_webhook_endpoint", None, arguments, register
        )
        return registered

    def create_plan_price(self, plan: ProviderPlan, *, idempotency_key: str) -> ProviderPrice:
        def create() -> ProviderPrice:
            number = next(self._ids)
            price = ProviderPrice(product_id=f"prod_{number}", price_id=f"price_{number}")
            self.prices[price.price_id] = plan
            return price

        price: ProviderPrice = self._call("create_plan_price", idempotency_key, (plan,), create)
        return price

    def create_subscription(
        self,
        customer_id: str,
        price_id: str,
        terms: SubscriptionTerms,
        *,
        metadata: dict[str, str],
        idempotency_key: str,
    ) -> ProviderSubscription:
        def create() -> ProviderSubscription:
            if customer_id not in self.customers:
                raise _rejected("customer", f"No such customer: '{customer_id}'")
            self._ensure_price(price_id)
            number = next(self._ids)
            start = self._clock.now()
            subscription = ProviderSubscription(
                id=f"sub_{number}",
                status="trialing" if terms.trial_days else "active",
                item_id=f"si_{number}",
                price_id=price_id,
                current_period_start=start,
                current_period_end=start + timedelta(days=30),
            )
            self.subscriptions[subscription.id] = subscription
            self.subscription_owners[subscription.id] = _Owner(customer_id, dict(metadata), start)
            return subscription

        arguments = (customer_id, price_id, terms, dict(metadata))
        created: ProviderSubscription = self._call(
            "create_subscription", idempotency_key, arguments, create
        )
        return created

    def get_subscription(self, provider_id: str) -> ProviderSubscription:
        def read() -> ProviderSubscription:
            return self._existing(provider_id)

        found: ProviderSubscription = self._call("get_subscription", None, (provider_id,), read)
        return found

    def change_subscription_price(
        self,
        provider_id: str,
        item_id: str,
        price_id: str,
        *,
        proration_behavior: ProrationBehavior,
        idempotency_key: str,
        proration_date: datetime | None = None,
        payment_behavior: PaymentBehavior | None = None,
    ) -> ProviderSubscription:
        def change() -> ProviderSubscription:
            current = self._existing(provider_id)
            if current.status == "canceled":
                raise _rejected(
                    "plan", "A canceled subscription can only update its cancellation_details."
                )
            if current.item_id != item_id:
                raise _rejected("plan", f"No such subscription item: '{item_id}'")
            self._ensure_price(price_id)
            invoiced_now = proration_behavior == "always_invoice"
            if invoiced_now and provider_id in self.declining:
                if payment_behavior == "error_if_incomplete":
                    raise PaymentFailed(
                        "the billing provider could not collect the change's invoice: "
                        "Your card was declined.",
                        details=[error_info("PAYMENT_FAILED", decline_code="generic_decline")],
                    )
                return self._replace(provider_id, price_id=price_id, status="past_due")
            return self._replace(provider_id, price_id=price_id)

        arguments = (
            provider_id,
            item_id,
            price_id,
            proration_behavior,
            proration_date,
            payment_behavior,
        )
        changed: ProviderSubscription = self._call(
            "change_subscription_price", idempotency_key, arguments, change
        )
        return changed

    def preview_change(
        self,
        provider_id: str,
        item_id: str,
        price_id: str,
        *,
        proration_behavior: ProrationBehavior,
        proration_date: datetime,
    ) -> ChangePreview:
        def preview() -> ChangePreview:
            current = self._existing(provider_id)
            self._ensure_price(price_id)
            start, end = current.current_period_start, current.current_period_end
            share = (end - proration_date) / (end - start)
            old, new = self.prices[current.price_id], self.prices[price_id]
            lines = (
                PreviewLine(
                    f"Unused time on {old.title}", -round(old.amount * share), True,
                    proration_date, end, old.plan_id,
                ),
                PreviewLine(
                    f"Remaining time on {new.title}", round(new.amount * share), True,
                    proration_date, end, new.plan_id,
                ),
            )  # fmt: skip
            total = sum(line.amount for line in lines)
            return ChangePreview(new.currency, max(total, 0), total, total, lines)

        arguments = (provider_id, item_id, price_id, proration_behavior, proration_date)
        previewed: ChangePreview = self._call("preview_change", None, arguments, preview)
        return previewed

    # -- inside -----------------------------------------------------------------------------

    def _call(
        self,
        operation: str,
        key: str | None,
        arguments: tuple[Any, ...],
        execute: Callable[[], Any],
    ) -> Any:
        failure = self._failures[operation].pop(0) if self._failures[operation] else None
        if failure is not None and not failure.after_execution:
            self.calls.append(ProviderCall(operation, key, arguments, "failed"))
            raise failure.error
        now = self._clock.now()
        remembered = self._keys.get(key) if key is not None else None
        if remembered is not None and now - remembered.at >= STRIPE_KEY_MEMORY:
            remembered = None  # Stripe keeps a key for 24 hours
        if remembered is not None:
            if remembered.request != (operation, *arguments):
                self.calls.append(ProviderCall(operation, key, arguments, "failed"))
                raise Internal(
                    "the billing provider saw one idempotency key with two different requests",
                    details=[error_info("PROVIDER_IDEMPOTENCY", operation=operation)],
                )
            self.calls.append(ProviderCall(operation, key, arguments, "replayed"))
            result = remembered.result
        else:
            try:
                result = execute()
            except CommandError as refusal:
                # Stripe remembers a 4xx under its key too, and answers it again.
                if key is not None:
                    self._keys[key] = _Remembered((operation, *arguments), refusal, now)
                self.calls.append(ProviderCall(operation, key, arguments, "failed"))
                raise
            if key is not None:
                self._keys[key] = _Remembered((operation, *arguments), result, now)
            self.calls.append(ProviderCall(operation, key, arguments, "executed"))
        if isinstance(result, InvalidArgument):
            raise result
        if failure is not None:  # it took effect; the answer was lost
            raise failure.error
        return result

    def _existing(self, provider_id: str) -> ProviderSubscription:
        found = self.subscriptions.get(provider_id)
        if found is None:
            raise _rejected("plan", f"No such subscription: '{provider_id}'")
        return self._renewed(found)

    def _renewed(self, found: ProviderSubscription) -> ProviderSubscription:
        """The subscription as the provider has it now: its periods roll over with the clock
        (periods of one length), and it ends at ``cancel_at``."""
        now = self._clock.now()
        if found.state.is_over or found.current_period_end > now:
            return found
        start, end = found.current_period_start, found.current_period_end
        while end <= now and (found.cancel_at is None or end < found.cancel_at):
            start, end = end, end + (end - start)
        ended = found.cancel_at is not None and found.cancel_at <= now
        return self._replace(
            found.id,
            current_period_start=start,
            current_period_end=end,
            status="canceled"
            if ended
            else ("active" if found.status == "trialing" else found.status),
        )

    def _ensure_price(self, price_id: str) -> None:
        if price_id not in self.prices:
            raise _rejected("plan", f"No such price: '{price_id}'")
        if price_id in self.inactive_prices:
            raise _rejected("plan", f"The price specified is inactive: '{price_id}'")

    def _replace(self, provider_id: str, **changes: Any) -> ProviderSubscription:
        current = self.subscriptions.get(provider_id)
        if current is None:
            raise _rejected("plan", f"No such subscription: '{provider_id}'")
        values = {**current.__dict__, **changes}
        updated = ProviderSubscription(**values)
        self.subscriptions[provider_id] = updated
        return updated

    # -- drift (issue 21): the provider's lists ---------------------------------------------

    def list_customers(self) -> list[RemoteCustomer]:
        listed: list[RemoteCustomer] = self._call(
            "list_customers", None, (), self._listed_customers
        )
        return listed

    def list_subscriptions(self, customer_id: str | None = None) -> list[RemoteSubscription]:
        def listed() -> list[RemoteSubscription]:
            return self._listed_subscriptions(customer_id)

        found: list[RemoteSubscription] = self._call(
            "list_subscriptions", None, (customer_id,), listed
        )
        return found

    def find_subscription(
        self, customer_id: str, subscription_id: str
    ) -> ProviderSubscription | None:
        def find() -> ProviderSubscription | None:
            found = existing_subscription(self._listed_subscriptions(customer_id), subscription_id)
            return found.subscription if found is not None else None

        arguments = (customer_id, subscription_id)
        result: ProviderSubscription | None = self._call("find_subscription", None, arguments, find)
        return result

    def list_invoices(self, provider_subscription_id: str, limit: int) -> list[InvoiceView]:
        found: list[InvoiceView] = self._call(
            "list_invoices",
            None,
            (provider_subscription_id, limit),
            lambda: list(self.invoices.get(provider_subscription_id, []))[:limit],
        )
        return found

    def add_customer(self, customer: ProviderCustomer, *, created: datetime | None = None) -> str:
        """A customer made at the provider directly (by another attempt, or by hand)."""
        customer_id = f"cus_{next(self._ids)}"
        self.customers[customer_id] = customer
        self.customers_created[customer_id] = created or self._clock.now()
        return customer_id

    def _listed_customers(self) -> list[RemoteCustomer]:
        """Newest first, as Stripe lists them."""
        listed = [
            RemoteCustomer(
                customer_id,
                self.customers_created.get(customer_id, T0),
                dict(customer.metadata),
            )
            for customer_id, customer in self.customers.items()
        ]
        return sorted(listed, key=lambda customer: customer.created, reverse=True)

    def _listed_subscriptions(self, customer_id: str | None) -> list[RemoteSubscription]:
        listed = []
        for provider_id in self.subscriptions:
            owner = self.subscription_owners.get(provider_id, _Owner("", {}, T0))
            if customer_id is None or owner.customer_id == customer_id:
                listed.append(
                    RemoteSubscription(
                        self._existing(provider_id),
                        owner.customer_id,
                        owner.created,
                        dict(owner.metadata),
                    )
                )
        return sorted(listed, key=lambda remote: remote.created, reverse=True)


@dataclass(frozen=True)
class _Owner:
    """What the fake keeps of a subscription beside our view of it."""

    customer_id: str
    metadata: dict[str, str]
    created: datetime


def _rejected(field_name: str, message: str) -> InvalidArgument:
    """A 4xx as ``worker.provider.stripe_adapter.translate`` makes it."""
    return InvalidArgument(
        f"the billing provider rejected the request: {message}",
        details=[
            field_violations([(field_name, message)]),
            error_info("PROVIDER_REJECTED", status="400"),
        ],
    )


# --- the command journal ----------------------------------------------------------------------


@dataclass
class JournalEntry:
    """A command as ``SqlCommandLog`` records it (``domain.ports.CommandOutcome``)."""

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


class FakeCommandJournal:
    """The command log in memory (``domain.ports.CommandJournal``), as ``SqlCommandLog``."""

    def __init__(self, clock: FakeClock, running_lease: timedelta = timedelta(minutes=10)) -> None:
        self._clock = clock
        self._running_lease = running_lease
        self.entries: dict[str, JournalEntry] = {}
        self.waits: list[tuple[str, float]] = []
        self.outbox: FakeDatabase | None = None
        """Where ``fail`` writes its events (the application's database)."""
        self.prunes: list[int] = []
        """How many commands each ``prune_finished`` call deleted (one transaction each)."""
        self._failures: dict[str, list[Exception]] = defaultdict(list)

    # -- for the tests ----------------------------------------------------------------------

    def fail_next(self, operation: str, error: Exception, *, times: int = 1) -> None:
        """The next ``times`` calls of ``operation`` (a method name) raise ``error``."""
        self._failures[operation].extend([error] * times)

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
        self, command_id: str, command_type: str, payload: dict[str, Any], *, source: str
    ) -> JournalEntry | None:
        self._maybe_fail("begin")
        now = self._clock.now()
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
            )
            return None
        if entry.type != command_type or entry.fingerprint not in (None, fingerprint):
            raise CommandIdReused(command_id, entry.type)
        if entry.status.is_terminal:
            return copy.deepcopy(entry)
        if entry.status is CommandStatus.RUNNING and now - entry.updated_at < self._running_lease:
            raise CommandInProgress(command_id)
        entry.status = CommandStatus.RUNNING
        entry.attempts += 1
        entry.updated_at = now
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

    def stalled(self, older_than: timedelta, limit: int = 100) -> Sequence[JournalEntry]:
        cutoff = self._clock.now() - older_than
        stalled = [
            entry
            for entry in self.entries.values()
            if entry.status is CommandStatus.QUEUED
            and (entry.published_at is None or entry.published_at < cutoff)
            and entry.created_at < cutoff
        ]
        return sorted(stalled, key=lambda entry: entry.created_at)[:limit]

    def mark_published(self, command_id: str) -> None:
        entry = self.entries.get(command_id)
        if entry is not None:
            entry.published_at = self._clock.now()

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


# --- the rest of the application --------------------------------------------------------------


@dataclass(frozen=True)
class Published:
    task_name: str
    payload: dict[str, Any]
    command_id: str
    queue: str | None
    priority: int | None


class FakePublisher:
    """Records what would go onto the queues (``domain.ports.CommandPublisher``)."""

    def __init__(self) -> None:
        self.published: list[Published] = []
        self._failures: list[Exception] = []

    def fail_next(self, error: Exception, *, times: int = 1) -> None:
        self._failures.extend([error] * times)

    def publish(
        self,
        task_name: str,
        payload: Mapping[str, Any],
        *,
        command_id: str,
        queue: str | None = None,
        priority: int | None = None,
    ) -> None:
        if self._failures:
            raise self._failures.pop(0)
        self.published.append(Published(task_name, dict(payload), command_id, queue, priority))


@dataclass(frozen=True)
class DeadLetter:
    raw: bytes
    queue: str
    reason: str
    task: str | None
    task_id: str | None


class FakeDeadLetters:
    """Keeps refused messages in a list (``domain.ports.DeadLetterStore``)."""

    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []
        self._failures: list[Exception] = []

    def fail_next(self, error: Exception, *, times: int = 1) -> None:
        self._failures.extend([error] * times)

    def add(
        self,
        raw: bytes,
        *,
        queue: str,
        reason: str,
        task: str | None = None,
        task_id: str | None = None,
    ) -> str:
        if self._failures:
            raise self._failures.pop(0)
        self.letters.append(DeadLetter(raw, queue, reason, task, task_id))
        return f"dl_{len(self.letters)}"


class UnmeteredRateBudget:
    """A budget that never makes a call wait (``domain.rate_budget.RateBudget``), as the real
    one is when no Stripe key is set."""

    enabled = False

    def acquire(self, kind: CallKind, priority: Priority) -> float:
        return 0.0

    def rate_limited(self, kind: CallKind, retry_after: float | None) -> None:
        return None

    def effective_rate(self, kind: CallKind) -> float:
        return float("inf")

    def usage(self) -> BudgetUsage:
        return BudgetUsage(account="", mode="", burst=0, max_wait_seconds=0.0, kinds={})


@dataclass(frozen=True)
class FakeBillingPolicy:
    """``domain.ports.BillingPolicy`` with the settings' defaults (Stripe's key window less
    an hour)."""

    default_currency: str = "usd"
    provider_idempotency_window: timedelta = timedelta(hours=23)
    proration_behavior: ProrationBehavior = "create_prorations"
    change_lease: timedelta = timedelta(minutes=15)
    period_end_lead: timedelta = timedelta(hours=1)


DEFAULT_RUNNER_POLICY = RunnerPolicy(
    retry_max_attempts=4,
    retry_base_delay_seconds=0.2,
    retry_max_delay_seconds=5.0,
    stalled_after=timedelta(seconds=60),
    due_changes_batch_size=100,
    due_changes_interval_seconds=1.0,
    command_retention=CommandRetention(
        succeeded_for=timedelta(days=30),
        failed_for=timedelta(days=90),
        batch_size=1000,
        max_batches_per_sweep=100,
    ),
)

DEFAULT_DELIVERY_POLICY = DeliveryPolicy(
    base_delay=timedelta(seconds=5),
    max_delay=timedelta(hours=1),
    budget=timedelta(days=1),
    lease=timedelta(seconds=60),
    timeout=timedelta(seconds=10),
)


class FakeApplication:
    """Every port in memory: a ``domain.ports.Application`` (and so a ``HandlerContext``).

    Each part is an attribute a test reads and scripts: ``db``, ``provider``, ``commands``,
    ``published``, ``dead``. ``is_transient`` says yes to :class:`DatabaseUnavailable`, the
    fake database's own failure, as the real application says yes to a lock timeout.
    """

    def __init__(
        self,
        *,
        clock: FakeClock | None = None,
        billing: FakeBillingPolicy | None = None,
        policy: RunnerPolicy = DEFAULT_RUNNER_POLICY,
        with_provider: bool = True,
        deliveries: DeliveryPolicy = DEFAULT_DELIVERY_POLICY,
    ) -> None:
        self.clock = clock or FakeClock()
        self.billing = billing or FakeBillingPolicy()
        self.policy = policy
        self.db = FakeDatabase()
        self.provider = FakeBillingProvider(self.clock)
        self.commands = FakeCommandJournal(self.clock)
        self.published = FakePublisher()
        self.dead = FakeDeadLetters()
        self.budget = UnmeteredRateBudget()
        self.commands.outbox = self.db
        self.stream = FakeEventStream()
        self.webhooks = FakeWebhookSender()
        self.lock = FakeRelayLock()
        self.deliveries = deliveries
        self._with_provider = with_provider

    def unit_of_work(self) -> FakeUnitOfWork:
        return self.db.unit_of_work()

    def billing_provider(self) -> FakeBillingProvider:
        if not self._with_provider:
            # As worker.provider.stripe_adapter.build_provider without an API key.
            raise FailedPrecondition(
                "no billing provider is configured",
                details=[error_info("PROVIDER_NOT_CONFIGURED")],
            )
        return self.provider

    def publisher(self) -> FakePublisher:
        return self.published

    def dead_letters(self) -> FakeDeadLetters:
        return self.dead

    def rate_budget(self) -> UnmeteredRateBudget:
        return self.budget

    def event_stream(self) -> FakeEventStream:
        return self.stream

    def webhook_sender(self) -> FakeWebhookSender:
        return self.webhooks

    def relay_lock(self) -> FakeRelayLock:
        return self.lock

    def is_transient(self, error: BaseException) -> bool:
        return isinstance(error, DatabaseUnavailable)


def _conforms_to_the_ports(app: FakeApplication) -> None:
    """Never called: mypy checks here that each fake is what its port asks for."""
    application: Application = app
    unit_of_work: UnitOfWork = app.unit_of_work()
    provider: BillingProvider = app.provider
    journal: CommandJournal = app.commands
    clock: Clock = app.clock
    budget: RateBudget = app.budget
    stream: EventStream = app.stream
    sender: WebhookSender = app.webhooks
    lock: RelayLock = app.lock
    del application, unit_of_work, provider, journal, clock, budget, stream, sender, lock


# --- test data --------------------------------------------------------------------------------


def an_organization(
    org_id: str = "org_1", *, enabled: bool = True, now: datetime = T0
) -> Organization:
    return Organization(
        id=org_id,
        name=f"name-{org_id}",
        title="Acme",
        state=OrganizationState.ENABLED if enabled else OrganizationState.DISABLED,
        created_at=now,
        updated_at=now,
    )


def a_user(user_id: str = "usr_1", *, enabled: bool = False, now: datetime = T0) -> User:
    return User(
        id=user_id,
        email=f"{user_id}@example.com",
        name="Ada",
        state=UserState.ENABLED if enabled else UserState.DISABLED,
        created_at=now,
        updated_at=now,
    )


@dataclass(frozen=True)
class Subscribed:
    """A subscription seeded on both sides (the fake database and the fake provider), on
    plan ``starter``, with ``team`` and ``scale`` to change to (same currency)."""

    org_id: str
    account_id: str
    subscription_id: str
    provider_id: str
    starter: Plan
    team: Plan
    scale: Plan


def a_plan(name: str, price_id: str, *, currency: str = "usd", now: datetime = T0) -> Plan:
    return Plan(
        id=f"plan_{name}",
        name=name,
        title=name.title(),
        interval=PlanInterval.MONTH,
        amount=1000,
        currency=currency,
        active=True,
        created_at=now,
        updated_at=now,
        provider="fake",
        provider_product_id=f"prod_{name}",
        provider_price_id=price_id,
    )


def subscribed(app: FakeApplication, *, period_days: int = 30) -> Subscribed:
    """An enabled organization, its registered account and an active subscription."""
    now = app.clock.now()
    org = an_organization(now=now)
    account = BillingAccount.open(
        "ba_1",
        org,
        BillingDetails(name="Acme", email="billing@acme.example"),
        offline=True,
        default_currency="usd",
        now=now,
    )
    account.registered("fake", "cus_seeded", now)
    starter, team, scale = (
        a_plan(name, f"price_{name}", now=now) for name in ("starter", "team", "scale")
    )
    for plan in (starter, team, scale):
        assert plan.provider_price_id is not None
        app.provider.add_price(plan.provider_price_id)
    remote = ProviderSubscription(
        id="sub_remote_1",
        status="active",
        item_id="si_1",
        price_id="price_starter",
        current_period_start=now,
        current_period_end=now + timedelta(days=period_days),
        interval="day",
        interval_count=period_days,
    )
    app.provider.customers["cus_seeded"] = account.provider_customer()
    app.provider.add_subscription(remote, customer_id="cus_seeded")
    subscription = Subscription.started("sub_1", account.id, starter, "fake", remote, now)
    app.db.seed(org, account, starter, team, scale, subscription)
    return Subscribed(org.id, account.id, subscription.id, remote.id, starter, team, scale)

"""The repositories of the fake database's tables (``adapters/db/repositories.py``): each
reads and writes through the :class:`~tests.support.fakes.database.Transaction` of its unit of work,
and hands out copies."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from domain.billing.accounts import BillingAccount, BillingAccountState
from domain.billing.organizations import Organization
from domain.ports.repositories import Claim
from domain.provider.pages import ProviderWalk, WalkedList
from domain.subscriptions.change_previews import IssuedPreview
from domain.subscriptions.change_states import ChangeState
from domain.subscriptions.plans import Plan
from domain.subscriptions.renewal_checks import RenewalCheck, RenewalCheckState
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import Subscription
from domain.users import User

if TYPE_CHECKING:
    from tests.support.fakes.database import Transaction


class _Entity(Protocol):
    @property
    def id(self) -> str: ...


E = TypeVar("E", bound=_Entity)


class _Repository(Generic[E]):
    table: str

    def __init__(self, tx: Transaction) -> None:
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
                if account.org_id == org_id and account.state.is_live
            ),
            None,
        )

    def remove(self, account_id: str) -> None:
        self._tx.delete(self.table, account_id)

    def by_provider_id(
        self, provider_id: str, *, for_update: bool = False
    ) -> BillingAccount | None:
        return next((a for a in self._all() if a.provider_id == provider_id), None)

    def by_provider_ids(self, provider_ids: Collection[str]) -> list[BillingAccount]:
        wanted = set(provider_ids)
        return [account for account in self._all() if account.provider_id in wanted]

    def mark_synced(self, account_ids: Collection[str], read_at: datetime) -> None:
        for account_id in account_ids:
            _mark_synced(self, self._get(account_id), read_at)

    def not_read_since(self, since: datetime, limit: int) -> list[str]:
        candidates = [
            account
            for account in self._all()
            if account.provider_id is not None
            and account.customer_deleted_at is None
            and account.created_at <= since
            and (account.synced_at is None or account.synced_at < since)
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

    def by_provider_ids(self, provider_ids: Collection[str]) -> list[Subscription]:
        wanted = set(provider_ids)
        return [s for s in self._all() if s.provider_id in wanted]

    def mark_synced(self, subscription_ids: Collection[str], read_at: datetime) -> None:
        for subscription_id in subscription_ids:
            _mark_synced(self, self._get(subscription_id), read_at)

    def list_all(self) -> list[Subscription]:
        return sorted(self._all(), key=lambda subscription: subscription.id)

    def not_read_since(self, since: datetime, limit: int) -> list[str]:
        unseen = [
            s
            for s in self._all()
            if not s.state.is_over
            and s.created_at <= since
            and (s.synced_at is None or s.synced_at < since)
        ]
        return [subscription.id for subscription in _oldest_synced_first(unseen)[:limit]]


class FakeProviderWalkRepository(_Repository[ProviderWalk]):
    table = "provider_walks"

    def get(self, walk_id: WalkedList, *, for_update: bool = False) -> ProviderWalk | None:
        return self._get(walk_id)


class _Synced(Protocol):
    id: str
    synced_at: datetime | None


S = TypeVar("S", bound=_Synced)


def _mark_synced(repository: _Repository[S], row: S | None, read_at: datetime) -> None:
    """``synced_at`` moves to ``read_at`` unless a later read is recorded (as the SQL
    repositories' one statement)."""
    if row is not None and (row.synced_at is None or row.synced_at < read_at):
        row.synced_at = read_at
        repository.save(row)


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


class FakeChangePreviewRepository(_Repository[IssuedPreview]):
    table = "change_previews"

    def get(self, preview_id: str) -> IssuedPreview | None:
        return self._get(preview_id)

    def prune(self, subscription_id: str, before: datetime) -> None:
        for preview in self._all():
            if preview.subscription_id == subscription_id and preview.proration_date < before:
                self._tx.delete(self.table, preview.id)


class FakeRenewalCheckRepository(_Repository[RenewalCheck]):
    table = "renewal_checks"

    def get(self, change_id: str, *, for_update: bool = False) -> RenewalCheck | None:
        return self._get(change_id)

    def due(self, now: datetime, limit: int) -> list[RenewalCheck]:
        again = (RenewalCheckState.DUE, RenewalCheckState.BILLED_WRONG)
        due = [check for check in self._all() if check.state in again and check.due_at <= now]
        return sorted(due, key=lambda check: (check.due_at, check.id))[:limit]


class FakeScheduledChangeRepository(_Repository[ScheduledChange]):
    table = "scheduled_changes"

    def get(self, change_id: str, *, for_update: bool = False) -> ScheduledChange | None:
        return self._get(change_id)

    def subscription_of(self, change_id: str) -> str | None:
        change = self._get(change_id)
        return change.subscription_id if change is not None else None

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
                if change.state is ChangeState.STAGED
                and change.effective_at <= now
                and change.lease_until is None
            ),
            key=lambda change: (change.effective_at, change.id),
        )
        return [change.id for change in due[:limit]]

    def withdrawals_given_up(self, now: datetime, limit: int) -> list[ScheduledChange]:
        given_up = sorted(
            (change for change in self._all() if change.withdrawal_given_up(now)),
            key=lambda change: (change.effective_at, change.id),
        )
        return given_up[:limit]

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

    def claimed_since(self, since: datetime, lease: timedelta, limit: int) -> list[Claim]:
        claimed = sorted(
            (
                change
                for change in self._all()
                if change.state is ChangeState.APPLYING
                and change.lease_until is not None
                and change.lease_until >= since + lease
            ),
            key=lambda change: (change.lease_until, change.id),
        )
        return [Claim(change.id, change.claims) for change in claimed[:limit]]

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

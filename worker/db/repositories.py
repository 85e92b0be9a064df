"""Repositories: translate between rows and domain entities."""

from __future__ import annotations

from datetime import datetime
from typing import Generic, Protocol, TypeVar, cast

from sqlalchemy import ColumnElement, Select, and_, delete, func, or_, select, update
from sqlalchemy.orm import Session

from domain.billing import Address, BillingAccount, BillingAccountState, TaxEntry
from domain.organizations import Organization, OrganizationState
from domain.ports import Claim
from domain.subscriptions import (
    ChangeKind,
    ChangeState,
    Plan,
    PlanInterval,
    ProrationBehavior,
    ScheduledChange,
    Subscription,
    SubscriptionState,
)
from domain.users import User, UserState
from worker.db.models import (
    Base,
    BillingAccountRow,
    OrganizationRow,
    PlanRow,
    ScheduledChangeRow,
    SubscriptionRow,
    UserRow,
)


class _Stored(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def created_at(self) -> datetime: ...


E = TypeVar("E", bound=_Stored)
R = TypeVar("R", bound=Base)


class _RowRepository(Generic[E, R]):
    """What every repository does alike: read a row (locked if asked) as an entity, and write
    an entity back to its row, inserting the row the first time."""

    row_type: type[R]

    def __init__(self, session: Session) -> None:
        self._session = session

    def _entity(self, row: R) -> E:
        raise NotImplementedError

    def _copy(self, entity: E, row: R) -> None:
        """Every column but ``id`` and ``created_at``, which never change."""
        raise NotImplementedError

    def _one(self, query: Select[R], *, for_update: bool = False) -> E | None:
        if for_update:
            query = query.with_for_update()
        row = self._session.scalars(query).one_or_none()
        return self._entity(row) if row is not None else None

    def _by_id(self, entity_id: str, *, for_update: bool = False) -> E | None:
        column = self.row_type.id  # type: ignore[attr-defined]
        return self._one(select(self.row_type).where(column == entity_id), for_update=for_update)

    def add(self, entity: E) -> None:
        row = self.row_type(id=entity.id, created_at=entity.created_at)
        self._copy(entity, row)
        self._session.add(row)

    def save(self, entity: E) -> None:
        row = self._session.get(self.row_type, entity.id)
        if row is None:
            self.add(entity)
            return
        self._copy(entity, row)


class SqlUserRepository(_RowRepository[User, UserRow]):
    row_type = UserRow

    def get(self, user_id: str, *, for_update: bool = False) -> User | None:
        return self._by_id(user_id, for_update=for_update)

    def by_email(self, email: str) -> User | None:
        return self._one(select(UserRow).where(UserRow.email == email))

    def _entity(self, row: UserRow) -> User:
        return User(
            id=row.id,
            email=row.email,
            name=row.name,
            state=UserState(row.state),
            created_at=row.created_at,
            updated_at=row.updated_at,
        )

    def _copy(self, user: User, row: UserRow) -> None:
        row.email = user.email
        row.name = user.name
        row.state = user.state.value
        row.updated_at = user.updated_at


def organization_of(row: OrganizationRow) -> Organization:
    return Organization(
        id=row.id,
        name=row.name,
        title=row.title,
        state=OrganizationState(row.state),
        created_at=row.created_at,
        updated_at=row.updated_at,
        metadata=dict(row.metadata_ or {}),
        avatar=row.avatar,
    )


class SqlOrganizationRepository(_RowRepository[Organization, OrganizationRow]):
    row_type = OrganizationRow

    def get(self, org_id: str) -> Organization | None:
        row = self._session.get(OrganizationRow, org_id)
        return organization_of(row) if row is not None else None

    def by_name(self, name: str) -> Organization | None:
        return self._one(select(OrganizationRow).where(OrganizationRow.name == name))

    def _entity(self, row: OrganizationRow) -> Organization:
        return organization_of(row)

    def _copy(self, organization: Organization, row: OrganizationRow) -> None:
        row.name = organization.name
        row.title = organization.title
        row.metadata_ = dict(organization.metadata)
        row.state = organization.state.value
        row.avatar = organization.avatar
        row.updated_at = organization.updated_at


def billing_account_of(row: BillingAccountRow) -> BillingAccount:
    return BillingAccount(
        id=row.id,
        org_id=row.org_id,
        name=row.name,
        email=row.email,
        phone=row.phone,
        address=Address.model_validate(row.address or {}),
        currency=row.currency,
        tax_data=[TaxEntry.model_validate(entry) for entry in row.tax_data or []],
        metadata=dict(row.metadata_ or {}),
        state=BillingAccountState(row.state),
        created_at=row.created_at,
        updated_at=row.updated_at,
        provider=row.provider,
        provider_id=row.provider_id,
        registration_key=row.registration_key,
        registration_started_at=row.registration_started_at,
    )


class SqlBillingAccountRepository(_RowRepository[BillingAccount, BillingAccountRow]):
    row_type = BillingAccountRow

    def get(self, account_id: str, *, for_update: bool = False) -> BillingAccount | None:
        return self._by_id(account_id, for_update=for_update)

    def current_for_organization(self, org_id: str) -> BillingAccount | None:
        return self._one(
            select(BillingAccountRow)
            .where(BillingAccountRow.org_id == org_id)
            .where(BillingAccountRow.state != BillingAccountState.DISABLED.value)
            .limit(1)
        )

    def remove(self, account_id: str) -> None:
        self._session.execute(delete(BillingAccountRow).where(BillingAccountRow.id == account_id))

    def _entity(self, row: BillingAccountRow) -> BillingAccount:
        return billing_account_of(row)

    def _copy(self, account: BillingAccount, row: BillingAccountRow) -> None:
        row.org_id = account.org_id
        row.name = account.name
        row.email = account.email
        row.phone = account.phone
        row.address = account.address.model_dump()
        row.currency = account.currency
        row.tax_data = [entry.model_dump() for entry in account.tax_data]
        row.metadata_ = dict(account.metadata)
        row.state = account.state.value
        row.provider = account.provider
        row.provider_id = account.provider_id
        row.registration_key = account.registration_key
        row.registration_started_at = account.registration_started_at
        row.updated_at = account.updated_at


def plan_of(row: PlanRow) -> Plan:
    return Plan(
        id=row.id,
        name=row.name,
        title=row.title,
        interval=PlanInterval(row.interval),
        amount=row.amount,
        currency=row.currency,
        active=row.active,
        created_at=row.created_at,
        updated_at=row.updated_at,
        provider=row.provider,
        provider_product_id=row.provider_product_id,
        provider_price_id=row.provider_price_id,
    )


class SqlPlanRepository(_RowRepository[Plan, PlanRow]):
    row_type = PlanRow

    def get(self, plan_id: str) -> Plan | None:
        return self._by_id(plan_id)

    def by_name(self, name: str) -> Plan | None:
        return self._one(select(PlanRow).where(PlanRow.name == name))

    def find(self, id_or_name: str) -> Plan | None:
        return self.get(id_or_name) or self.by_name(id_or_name.lower())

    def list(self) -> list[Plan]:
        rows = self._session.scalars(select(PlanRow).order_by(PlanRow.name)).all()
        return [plan_of(row) for row in rows]

    def _entity(self, row: PlanRow) -> Plan:
        return plan_of(row)

    def _copy(self, plan: Plan, row: PlanRow) -> None:
        row.name = plan.name
        row.title = plan.title
        row.interval = plan.interval.value
        row.amount = plan.amount
        row.currency = plan.currency
        row.active = plan.active
        row.provider = plan.provider
        row.provider_product_id = plan.provider_product_id
        row.provider_price_id = plan.provider_price_id
        row.updated_at = plan.updated_at


def subscription_of(row: SubscriptionRow) -> Subscription:
    return Subscription(
        id=row.id,
        billing_account_id=row.billing_account_id,
        plan_id=row.plan_id,
        state=SubscriptionState(row.state),
        provider=row.provider,
        provider_id=row.provider_id,
        current_period_start=row.current_period_start,
        current_period_end=row.current_period_end,
        created_at=row.created_at,
        updated_at=row.updated_at,
        provider_item_id=row.provider_item_id,
    )


class SqlSubscriptionRepository(_RowRepository[Subscription, SubscriptionRow]):
    row_type = SubscriptionRow

    def get(self, subscription_id: str, *, for_update: bool = False) -> Subscription | None:
        return self._by_id(subscription_id, for_update=for_update)

    def _entity(self, row: SubscriptionRow) -> Subscription:
        return subscription_of(row)

    def _copy(self, subscription: Subscription, row: SubscriptionRow) -> None:
        row.billing_account_id = subscription.billing_account_id
        row.plan_id = subscription.plan_id
        row.state = subscription.state.value
        row.provider = subscription.provider
        row.provider_id = subscription.provider_id
        row.current_period_start = subscription.current_period_start
        row.current_period_end = subscription.current_period_end
        row.updated_at = subscription.updated_at
        row.provider_item_id = subscription.provider_item_id


def scheduled_change_of(row: ScheduledChangeRow) -> ScheduledChange:
    return ScheduledChange(
        id=row.id,
        subscription_id=row.subscription_id,
        from_plan_id=row.from_plan_id,
        target_plan_id=row.target_plan_id,
        kind=ChangeKind(row.kind),
        effective_at=row.effective_at,
        state=ChangeState(row.state),
        proration_behavior=cast(ProrationBehavior, row.proration_behavior),
        created_at=row.created_at,
        updated_at=row.updated_at,
        command_id=row.command_id,
        reason=row.reason,
        claims=row.claims,
        lease_until=row.lease_until,
        applied_at=row.applied_at,
        apply_lag_seconds=row.apply_lag_seconds,
        first_sent_at=row.first_sent_at,
    )


_PENDING = (ChangeState.SCHEDULED.value, ChangeState.APPLYING.value)


def _claimable(now: datetime) -> ColumnElement[bool]:
    """Due and scheduled, or being applied by a worker whose lease ran out."""
    row = ScheduledChangeRow
    return or_(
        and_(row.state == ChangeState.SCHEDULED.value, row.effective_at <= now),
        and_(row.state == ChangeState.APPLYING.value, row.lease_until < now),
    )


class SqlScheduledChangeRepository(_RowRepository[ScheduledChange, ScheduledChangeRow]):
    row_type = ScheduledChangeRow

    def get(self, change_id: str, *, for_update: bool = False) -> ScheduledChange | None:
        return self._by_id(change_id, for_update=for_update)

    def pending_for(
        self, subscription_id: str, *, for_update: bool = False
    ) -> ScheduledChange | None:
        query = select(ScheduledChangeRow).where(
            ScheduledChangeRow.subscription_id == subscription_id,
            ScheduledChangeRow.state.in_(_PENDING),
        )
        return self._one(query, for_update=for_update)

    def for_subscription(self, subscription_id: str) -> list[ScheduledChange]:
        rows = self._session.scalars(
            select(ScheduledChangeRow)
            .where(ScheduledChangeRow.subscription_id == subscription_id)
            .order_by(ScheduledChangeRow.created_at.desc(), ScheduledChangeRow.id)
        ).all()
        return [scheduled_change_of(row) for row in rows]

    def claim_due(self, now: datetime, lease_until: datetime, limit: int) -> list[Claim]:
        row = ScheduledChangeRow
        claimable = _claimable(now)
        # PostgreSQL: lock the candidates, skipping rows a concurrent sweep holds. SQLite has
        # no row locks: this is a plain read, and two sweeps may pick the same candidates.
        candidates = self._session.scalars(
            select(row.id)
            .where(claimable)
            .order_by(row.effective_at, row.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        ).all()
        if not candidates:
            return []
        # Either way the update checks the claimable condition again, row by row, under the
        # write lock: a candidate another sweep claimed meanwhile is not updated, and
        # RETURNING says which rows this sweep got.
        claimed = self._session.execute(
            update(row)
            .where(row.id.in_(candidates), claimable)
            .values(
                state=ChangeState.APPLYING.value,
                claims=row.claims + 1,
                lease_until=lease_until,
                updated_at=now,
            )
            .returning(row.id, row.claims)
            .execution_options(synchronize_session=False)
        ).all()
        return [Claim(change_id, number) for change_id, number in claimed]

    def release(self, claim: Claim, now: datetime) -> None:
        row = ScheduledChangeRow
        self._session.execute(
            update(row)
            .where(
                row.id == claim.change_id,
                row.claims == claim.number,
                row.state == ChangeState.APPLYING.value,
            )
            .values(lease_until=now, updated_at=now)
            .execution_options(synchronize_session=False)
        )

    def count_in_flight(self, now: datetime) -> int:
        row = ScheduledChangeRow
        return int(
            self._session.scalar(
                select(func.count())
                .select_from(row)
                .where(row.state == ChangeState.APPLYING.value, row.lease_until >= now)
            )
            or 0
        )

    def _entity(self, row: ScheduledChangeRow) -> ScheduledChange:
        return scheduled_change_of(row)

    def _copy(self, change: ScheduledChange, row: ScheduledChangeRow) -> None:
        row.subscription_id = change.subscription_id
        row.from_plan_id = change.from_plan_id
        row.target_plan_id = change.target_plan_id
        row.kind = change.kind.value
        row.effective_at = change.effective_at
        row.state = change.state.value
        row.reason = change.reason
        row.proration_behavior = change.proration_behavior
        row.command_id = change.command_id
        row.claims = change.claims
        row.lease_until = change.lease_until
        row.applied_at = change.applied_at
        row.apply_lag_seconds = change.apply_lag_seconds
        row.first_sent_at = change.first_sent_at
        row.updated_at = change.updated_at

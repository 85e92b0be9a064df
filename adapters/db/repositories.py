"""Repositories: translate between rows and domain entities."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    bindparam,
    delete,
    func,
    inspect,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session, sessionmaker

from adapters.db.claims import claim_due_rows
from adapters.db.mapping import RowMapping
from adapters.db.models import (
    Base,
    BillingAccountRow,
    ChangePreviewRow,
    OrganizationRow,
    PlanRow,
    ProviderWalkRow,
    RenewalCheckRow,
    ScheduledChangeRow,
    SubscriptionRow,
    UserRow,
)
from domain.billing.accounts import BillingAccount, BillingAccountState
from domain.billing.organizations import Organization
from domain.ports.repositories import Claim
from domain.provider.pages import ProviderWalk, WalkedList
from domain.subscriptions.change_previews import IssuedPreview
from domain.subscriptions.change_states import ChangeKind, ChangeState
from domain.subscriptions.plans import Plan
from domain.subscriptions.renewal_checks import RenewalCheck, RenewalCheckState
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import Subscription, SubscriptionState
from domain.users import User


class _Stored(Protocol):
    @property
    def id(self) -> str: ...


E = TypeVar("E", bound=_Stored)
R = TypeVar("R", bound=Base)


class _RowRepository(Generic[E, R]):
    """What every repository does alike: read a row (locked if asked) as an entity, and write
    an entity back to its row, inserting the row the first time."""

    mapping: RowMapping[E, R]
    _by_id_queries: Any = None

    def __init__(self, session: Session) -> None:
        self._session = session
        # The rows read one at a time, kept alive for the unit of work: the session's
        # identity map holds its rows weakly, and without this the row a handler read (and
        # locked) is gone when it saves the entity, which read it again (one more statement,
        # and on PostgreSQL one more round trip, for every load-change-save).
        self._read: dict[object, R] = {}

    def _one(
        self,
        query: Select[R],
        *,
        for_update: bool = False,
        parameters: dict[str, object] | None = None,
    ) -> E | None:
        if for_update:
            query = query.with_for_update()
        row = self._session.scalars(query, parameters).one_or_none()
        if row is None:
            return None
        self._read[row.id] = row  # type: ignore[attr-defined]
        return self.mapping.entity(row)

    def _all(self, query: Select[R]) -> list[E]:
        return [self.mapping.entity(row) for row in self._session.scalars(query).all()]

    def _by_id(self, entity_id: str, *, for_update: bool = False) -> E | None:
        # A row this unit of work read already is the one a new read would hand back (the
        # session's identity map keeps its attributes; nothing is expired on commit, only on a
        # rollback): a read that locks nothing need not ask the database again (a due
        # change's run reads each of its two plans twice).
        if not for_update and (row := self._read.get(entity_id)) is not None:
            state = inspect(row)
            if state.persistent and not state.expired:
                return self.mapping.entity(row)
        return self._one(self._read_by_id(for_update), parameters={"id": entity_id})

    @classmethod
    def _read_by_id(cls, for_update: bool) -> Select[R]:
        """The read of one row by its id (locked or not), built once per repository: a
        statement built for every read costs about as much as running it (SQLAlchemy builds
        and keeps its cache key with the statement)."""
        queries: dict[bool, Select[R]] | None = cls.__dict__.get("_by_id_queries")
        if queries is None:
            row_type = cls.mapping.row_type
            column = row_type.id  # type: ignore[attr-defined]
            query = select(row_type).where(column == bindparam("id"))
            queries = {False: query, True: query.with_for_update()}
            cls._by_id_queries = queries
        return queries[for_update]

    def add(self, entity: E) -> None:
        self._session.add(self.mapping.new_row(entity))

    def save(self, entity: E) -> None:
        row = self._session.get(self.mapping.row_type, entity.id)
        if row is None:
            self.add(entity)
            return
        self.mapping.copy(entity, row)


class SqlUserRepository(_RowRepository[User, UserRow]):
    mapping = RowMapping(User, UserRow)

    def get(self, user_id: str, *, for_update: bool = False) -> User | None:
        return self._by_id(user_id, for_update=for_update)

    def by_email(self, email: str) -> User | None:
        return self._one(select(UserRow).where(UserRow.email == email))


class SqlOrganizationRepository(_RowRepository[Organization, OrganizationRow]):
    mapping = RowMapping(Organization, OrganizationRow)

    def get(self, org_id: str) -> Organization | None:
        return self._by_id(org_id)

    def by_name(self, name: str) -> Organization | None:
        return self._one(select(OrganizationRow).where(OrganizationRow.name == name))


class SqlOrganizationDirectory:
    """Whether an organization exists: one primary-key read of its id alone (never the row,
    whose avatar may weigh 2 MB), in a short session of its own."""

    _EXISTS = select(OrganizationRow.id).where(OrganizationRow.id == bindparam("id"))

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self._sessions = sessions

    def exists(self, org_id: str) -> bool:
        with self._sessions() as session:
            return session.scalar(self._EXISTS, {"id": org_id}) is not None


class SqlBillingAccountRepository(_RowRepository[BillingAccount, BillingAccountRow]):
    mapping = RowMapping(BillingAccount, BillingAccountRow)

    def get(self, account_id: str, *, for_update: bool = False) -> BillingAccount | None:
        return self._by_id(account_id, for_update=for_update)

    def current_for_organization(self, org_id: str) -> BillingAccount | None:
        return self._one(
            select(BillingAccountRow)
            .where(BillingAccountRow.org_id == org_id)
            .where(
                BillingAccountRow.state.in_(
                    [state.value for state in BillingAccountState if state.is_live]
                )
            )
            .limit(1)
        )

    def remove(self, account_id: str) -> None:
        self._read.pop(account_id, None)
        self._session.execute(delete(BillingAccountRow).where(BillingAccountRow.id == account_id))

    def by_provider_id(
        self, provider_id: str, *, for_update: bool = False
    ) -> BillingAccount | None:
        return self._one(
            select(BillingAccountRow).where(BillingAccountRow.provider_id == provider_id),
            for_update=for_update,
        )

    def by_provider_ids(self, provider_ids: Collection[str]) -> list[BillingAccount]:
        if not provider_ids:
            return []
        row = BillingAccountRow
        return self._all(select(row).where(row.provider_id.in_(list(provider_ids))))

    def mark_synced(self, account_ids: Collection[str], read_at: datetime) -> None:
        _mark_synced(self._session, BillingAccountRow, account_ids, read_at)

    def not_read_since(self, since: datetime, limit: int) -> list[str]:
        row = BillingAccountRow
        return list(
            self._session.scalars(
                select(row.id)
                .where(
                    row.provider_id.is_not(None),
                    row.customer_deleted_at.is_(None),
                    row.created_at <= since,
                    or_(row.synced_at.is_(None), row.synced_at < since),
                )
                .order_by(row.synced_at.is_not(None), row.synced_at, row.id)
                .limit(limit)
            ).all()
        )

    def list_all(self) -> list[BillingAccount]:
        return self._all(select(BillingAccountRow).order_by(BillingAccountRow.id))

    def pending_created_before(self, before: datetime, limit: int) -> list[BillingAccount]:
        row = BillingAccountRow
        return self._all(
            select(row)
            .where(row.state == BillingAccountState.PENDING.value, row.created_at <= before)
            .order_by(row.created_at, row.id)
            .limit(limit)
        )


class SqlPlanRepository(_RowRepository[Plan, PlanRow]):
    mapping = RowMapping(Plan, PlanRow)

    def get(self, plan_id: str) -> Plan | None:
        return self._by_id(plan_id)

    def by_name(self, name: str) -> Plan | None:
        return self._one(select(PlanRow).where(PlanRow.name == name))

    def find(self, id_or_name: str) -> Plan | None:
        return self.get(id_or_name) or self.by_name(id_or_name.lower())

    def list(self) -> list[Plan]:
        return self._all(select(PlanRow).order_by(PlanRow.name))

    def by_provider_price(self, price_id: str) -> Plan | None:
        return self._one(select(PlanRow).where(PlanRow.provider_price_id == price_id).limit(1))


class SqlSubscriptionRepository(_RowRepository[Subscription, SubscriptionRow]):
    mapping = RowMapping(Subscription, SubscriptionRow)

    def get(self, subscription_id: str, *, for_update: bool = False) -> Subscription | None:
        return self._by_id(subscription_id, for_update=for_update)

    def by_provider_id(self, provider_id: str, *, for_update: bool = False) -> Subscription | None:
        return self._one(
            select(SubscriptionRow).where(SubscriptionRow.provider_id == provider_id),
            for_update=for_update,
        )

    def of_account(self, billing_account_id: str) -> list[Subscription]:
        return self._all(
            select(SubscriptionRow)
            .where(SubscriptionRow.billing_account_id == billing_account_id)
            .order_by(SubscriptionRow.id)
        )

    def by_provider_ids(self, provider_ids: Collection[str]) -> list[Subscription]:
        if not provider_ids:
            return []
        row = SubscriptionRow
        return self._all(select(row).where(row.provider_id.in_(list(provider_ids))))

    def mark_synced(self, subscription_ids: Collection[str], read_at: datetime) -> None:
        _mark_synced(self._session, SubscriptionRow, subscription_ids, read_at)

    def list_all(self) -> list[Subscription]:
        return self._all(select(SubscriptionRow).order_by(SubscriptionRow.id))

    def not_read_since(self, since: datetime, limit: int) -> list[str]:
        row = SubscriptionRow
        return list(
            self._session.scalars(
                select(row.id)
                .where(
                    row.state.not_in(_OVER),
                    row.created_at <= since,
                    or_(row.synced_at.is_(None), row.synced_at < since),
                )
                .order_by(row.synced_at.is_not(None), row.synced_at, row.id)
                .limit(limit)
            ).all()
        )


def _mark_synced(
    session: Session,
    table: type[BillingAccountRow] | type[SubscriptionRow],
    ids: Collection[str],
    read_at: datetime,
) -> None:
    """One statement: ``synced_at`` moves to ``read_at`` on the rows read no later (a
    webhook's sync that began after this page's read keeps its own)."""
    if not ids:
        return
    session.execute(
        update(table)
        .where(
            table.id.in_(list(ids)),
            or_(table.synced_at.is_(None), table.synced_at < read_at),
        )
        .values(synced_at=read_at)
        .execution_options(synchronize_session=False)
    )


class SqlProviderWalkRepository(_RowRepository[ProviderWalk, ProviderWalkRow]):
    mapping = RowMapping(ProviderWalk, ProviderWalkRow)

    def get(self, walk_id: WalkedList, *, for_update: bool = False) -> ProviderWalk | None:
        return self._by_id(walk_id.value, for_update=for_update)


_PENDING = tuple(state.value for state in ChangeState if state.is_pending)
_OVER = tuple(state.value for state in SubscriptionState if state.is_over)


def _claimable(now: datetime, lead: timedelta) -> ColumnElement[bool]:
    """Due and scheduled (a change at the period's end ``lead`` ahead of its boundary), or
    being applied by a worker whose lease ran out."""
    row = ScheduledChangeRow
    return or_(
        and_(
            row.state == ChangeState.SCHEDULED.value,
            or_(
                row.effective_at <= now,
                and_(
                    row.kind == ChangeKind.END_OF_PERIOD.value,
                    row.effective_at <= now + lead,
                ),
            ),
        ),
        and_(row.state == ChangeState.APPLYING.value, row.lease_until < now),
    )


class SqlChangePreviewRepository(_RowRepository[IssuedPreview, ChangePreviewRow]):
    mapping = RowMapping(IssuedPreview, ChangePreviewRow)

    def get(self, preview_id: str) -> IssuedPreview | None:
        return self._by_id(preview_id)

    def prune(self, subscription_id: str, before: datetime) -> None:
        self._session.execute(
            delete(ChangePreviewRow).where(
                ChangePreviewRow.subscription_id == subscription_id,
                ChangePreviewRow.proration_date < before,
            )
        )


class SqlRenewalCheckRepository(_RowRepository[RenewalCheck, RenewalCheckRow]):
    mapping = RowMapping(RenewalCheck, RenewalCheckRow)

    def get(self, change_id: str, *, for_update: bool = False) -> RenewalCheck | None:
        return self._by_id(change_id, for_update=for_update)

    def due(self, now: datetime, limit: int) -> list[RenewalCheck]:
        row = RenewalCheckRow
        return self._all(
            select(row)
            .where(row.state.in_(_CHECKED_AGAIN), row.due_at <= now)
            .order_by(row.due_at, row.id)
            .limit(limit)
        )


_CHECKED_AGAIN = (RenewalCheckState.DUE.value, RenewalCheckState.BILLED_WRONG.value)


_SUBSCRIPTION_OF_CHANGE = select(ScheduledChangeRow.subscription_id).where(
    ScheduledChangeRow.id == bindparam("id")
)


class SqlScheduledChangeRepository(_RowRepository[ScheduledChange, ScheduledChangeRow]):
    mapping = RowMapping(ScheduledChange, ScheduledChangeRow)

    def get(self, change_id: str, *, for_update: bool = False) -> ScheduledChange | None:
        return self._by_id(change_id, for_update=for_update)

    def subscription_of(self, change_id: str) -> str | None:
        subscription_id: str | None = self._session.execute(
            _SUBSCRIPTION_OF_CHANGE, {"id": change_id}
        ).scalar_one_or_none()
        return subscription_id

    def pending_for(
        self, subscription_id: str, *, for_update: bool = False
    ) -> ScheduledChange | None:
        query = select(ScheduledChangeRow).where(
            ScheduledChangeRow.subscription_id == subscription_id,
            ScheduledChangeRow.state.in_(_PENDING),
        )
        return self._one(query, for_update=for_update)

    def for_subscription(self, subscription_id: str) -> list[ScheduledChange]:
        return self._all(
            select(ScheduledChangeRow)
            .where(ScheduledChangeRow.subscription_id == subscription_id)
            .order_by(ScheduledChangeRow.created_at.desc(), ScheduledChangeRow.id)
        )

    def claim_due(
        self, now: datetime, lease_until: datetime, limit: int, *, lead: timedelta
    ) -> list[Claim]:
        row = ScheduledChangeRow
        claimable = _claimable(now, lead)
        claimed = claim_due_rows(
            self._session,
            row,
            claimable=claimable,
            order_by=(row.effective_at, row.id),
            limit=limit,
            state=ChangeState.APPLYING.value,
            lease_until=lease_until,
            now=now,
        )
        return [Claim(change_id, number) for change_id, number in claimed]

    def staged_due(self, now: datetime, limit: int) -> list[str]:
        row = ScheduledChangeRow
        return list(
            self._session.scalars(
                select(row.id)
                .where(
                    row.state == ChangeState.STAGED.value,
                    row.effective_at <= now,
                    # never while it is withdrawn, nor once its withdrawal was given up
                    # (finished by ``withdrawals_given_up``'s commands instead)
                    row.lease_until.is_(None),
                )
                .order_by(row.effective_at, row.id)
                .limit(limit)
            ).all()
        )

    def withdrawals_given_up(self, now: datetime, limit: int) -> list[ScheduledChange]:
        row = ScheduledChangeRow
        return self._all(
            select(row)
            .where(row.state == ChangeState.STAGED.value, row.lease_until < now)
            .order_by(row.effective_at, row.id)
            .limit(limit)
        )

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

    def claimed_since(self, since: datetime, lease: timedelta, limit: int) -> list[Claim]:
        row = ScheduledChangeRow
        claimed = self._session.execute(
            select(row.id, row.claims)
            .where(
                row.state == ChangeState.APPLYING.value,
                row.lease_until >= since + lease,  # claimed at lease_until - lease
            )
            .order_by(row.lease_until, row.id)
            .limit(limit)
        ).all()
        return [Claim(str(change_id), int(number)) for change_id, number in claimed]

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

    def all_pending(self) -> list[ScheduledChange]:
        row = ScheduledChangeRow
        return self._all(select(row).where(row.state.in_(_PENDING)).order_by(row.id))

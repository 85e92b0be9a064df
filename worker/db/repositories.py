"""Repositories: translate between rows and domain entities."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from domain.billing import Address, BillingAccount, BillingAccountState, TaxEntry
from domain.organizations import Organization, OrganizationState
from domain.users import User, UserState
from worker.db.models import BillingAccountRow, OrganizationRow, UserRow


class SqlUserRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def get(self, user_id: str, *, for_update: bool = False) -> User | None:
        query = select(UserRow).where(UserRow.id == user_id)
        if for_update:
            query = query.with_for_update()
        row = self._session.scalars(query).one_or_none()
        if row is None:
            return None
        return User(
            id=row.id,
            email=row.email,
            name=row.name,
            state=UserState(row.state),
            created_at=row.created_at,
            updated_at=row.updated_at,
        )

    def save(self, user: User) -> None:
        row = self._session.get(UserRow, user.id)
        if row is None:
            row = UserRow(id=user.id, created_at=user.created_at)
            self._session.add(row)
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


class SqlOrganizationRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def get(self, org_id: str) -> Organization | None:
        row = self._session.get(OrganizationRow, org_id)
        return organization_of(row) if row is not None else None


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


class SqlBillingAccountRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def get(self, account_id: str, *, for_update: bool = False) -> BillingAccount | None:
        query = select(BillingAccountRow).where(BillingAccountRow.id == account_id)
        if for_update:
            query = query.with_for_update()
        row = self._session.scalars(query).one_or_none()
        return billing_account_of(row) if row is not None else None

    def current_for_organization(self, org_id: str) -> BillingAccount | None:
        row = self._session.scalars(
            select(BillingAccountRow)
            .where(BillingAccountRow.org_id == org_id)
            .where(BillingAccountRow.state != BillingAccountState.DISABLED.value)
            .limit(1)
        ).one_or_none()
        return billing_account_of(row) if row is not None else None

    def add(self, account: BillingAccount) -> None:
        row = BillingAccountRow(id=account.id, created_at=account.created_at)
        self._copy(account, row)
        self._session.add(row)

    def save(self, account: BillingAccount) -> None:
        row = self._session.get(BillingAccountRow, account.id)
        if row is None:
            self.add(account)
            return
        self._copy(account, row)

    def remove(self, account_id: str) -> None:
        self._session.execute(delete(BillingAccountRow).where(BillingAccountRow.id == account_id))

    @staticmethod
    def _copy(account: BillingAccount, row: BillingAccountRow) -> None:
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

"""Rows mapped once: every entity is written and read back unchanged through a real database,
and a field without a column (or a column without a field) is refused when the mapping is
built."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from adapters.db.engine import session_factory
from adapters.db.mapping import RowMapping
from adapters.db.models import Base
from adapters.db.uow import SqlUnitOfWork
from domain.billing.account_details import Address, TaxEntry
from domain.billing.accounts import BillingAccount, BillingAccountState
from domain.billing.organizations import Organization, OrganizationState
from domain.subscriptions.change_states import ChangeKind, ChangeState
from domain.subscriptions.plans import Plan, PlanInterval
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import Subscription, SubscriptionState
from domain.users import User, UserState

NOW = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def entities(tag: str) -> list[Any]:
    """One of each entity, every optional field set, so that no column goes untested (ids and
    unique names end in ``tag``: tests share a database)."""
    organization = Organization(
        id=f"org_{tag}",
        name=f"mapped-{tag}",
        title="Mapped Ltd",
        state=OrganizationState.ENABLED,
        created_at=NOW,
        updated_at=NOW,
        metadata={"tier": "gold", "seats": 5},
        avatar="data:image/png;base64,AAAA",
    )
    account = BillingAccount(
        id=f"ba_{tag}",
        org_id=organization.id,
        name="Mapped Ltd",
        email="billing@mapped.example",
        phone="+442079460958",
        address=Address(line1="1 High Street", city="London", country="GB"),
        currency="gbp",
        tax_data=[TaxEntry(type="gb_vat", id="GB123456789")],
        metadata={"plan": "team", "trial": True},
        state=BillingAccountState.ACTIVE,
        created_at=NOW,
        updated_at=NOW + timedelta(seconds=1),
        provider="stripe",
        provider_id=f"cus_{tag}",
        registration_key="ba_map:register",
        registration_started_at=NOW,
    )
    starter, team = (
        Plan(
            id=f"plan_{name}_{tag}",
            name=f"{name}-{tag}",
            title=name.title(),
            interval=PlanInterval.MONTH,
            amount=amount,
            currency="usd",
            active=True,
            created_at=NOW,
            updated_at=NOW,
            provider="stripe",
            provider_product_id=f"prod_{name}",
            provider_price_id=f"price_{name}_{tag}",
        )
        for name, amount in (("starter", 900), ("team", 4900))
    )
    subscription = Subscription(
        id=f"sub_{tag}",
        billing_account_id=account.id,
        plan_id=starter.id,
        state=SubscriptionState.ACTIVE,
        provider="stripe",
        provider_id=f"sub_provider_{tag}",
        current_period_start=NOW,
        current_period_end=NOW + timedelta(days=30),
        created_at=NOW,
        updated_at=NOW,
        provider_item_id="si_map",
    )
    change = ScheduledChange(
        id=f"chg_{tag}",
        subscription_id=subscription.id,
        from_plan_id=starter.id,
        target_plan_id=team.id,
        kind=ChangeKind.END_OF_PERIOD,
        effective_at=subscription.current_period_end,
        state=ChangeState.APPLYING,
        proration_behavior="none",
        created_at=NOW,
        updated_at=NOW,
        command_id="cmd_map",
        reason="a reason",
        claims=2,
        lease_until=NOW + timedelta(minutes=5),
        applied_at=NOW + timedelta(days=30),
        apply_lag_seconds=1.5,
        first_sent_at=NOW + timedelta(days=30),
    )
    user = User(
        id=f"usr_{tag}",
        email=f"someone-{tag}@mapped.example",
        name="Some One",
        state=UserState.DISABLED,
        created_at=NOW,
        updated_at=NOW,
    )
    return [organization, account, starter, team, subscription, change, user]


def repository_of(uow: SqlUnitOfWork, entity: Any) -> Any:
    return {
        Organization: uow.organizations,
        BillingAccount: uow.billing_accounts,
        Plan: uow.plans,
        Subscription: uow.subscriptions,
        ScheduledChange: uow.scheduled_changes,
        User: uow.users,
    }[type(entity)]


def test_every_entity_is_read_back_as_it_was_written(fresh_database: str) -> None:
    written = entities("read")
    for entity in written:  # one at a time: rows reach the database in foreign-key order
        with SqlUnitOfWork(session_factory(fresh_database)) as uow:
            repository_of(uow, entity).add(entity)
            uow.commit()

    with SqlUnitOfWork(session_factory(fresh_database)) as uow:
        read = [repository_of(uow, entity).get(entity.id) for entity in written]

    assert read == written


def test_saving_changes_every_column_but_the_id_and_creation_time(fresh_database: str) -> None:
    organization, account = entities("save")[:2]
    for entity in (organization, account):
        with SqlUnitOfWork(session_factory(fresh_database)) as uow:
            repository_of(uow, entity).add(entity)
            uow.commit()
    changed = dataclasses.replace(
        account,
        name="Renamed",
        address=Address(line1="2 Low Road", country="FR"),
        tax_data=[],
        metadata={},
        state=BillingAccountState.DISABLED,
        provider_id=None,
        created_at=NOW + timedelta(days=1),
        updated_at=NOW + timedelta(days=1),
    )

    with SqlUnitOfWork(session_factory(fresh_database)) as uow:
        uow.billing_accounts.save(changed)
        uow.commit()
    with SqlUnitOfWork(session_factory(fresh_database)) as uow:
        stored = uow.billing_accounts.get(account.id)

    assert stored == dataclasses.replace(changed, created_at=account.created_at)


class _OneColumnRow(Base):
    __tablename__ = "row_mapping_probe"

    id: Mapped[str] = mapped_column(String(8), primary_key=True)
    label: Mapped[str] = mapped_column(String(8))


Base.metadata.remove(_OneColumnRow.__table__)  # type: ignore[arg-type]


@dataclasses.dataclass
class _WithExtraField:
    id: str
    label: str
    colour: str


@dataclasses.dataclass
class _WithMissingField:
    id: str


def test_an_entity_field_without_a_column_is_refused_when_the_mapping_is_built() -> None:
    with pytest.raises(TypeError, match="no column for 'colour'"):
        RowMapping(_WithExtraField, _OneColumnRow)


def test_a_column_without_an_entity_field_is_refused_when_the_mapping_is_built() -> None:
    with pytest.raises(TypeError, match=r"no field for \['label'\]"):
        RowMapping(_WithMissingField, _OneColumnRow)

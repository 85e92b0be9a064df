"""The unit of work's contract, checked on the real one (SQLite, PostgreSQL) and on the fake
the unit tests use (``tests/support/fakes/``): what the handlers rely on holds for both."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest

from adapters.clock import SystemClock
from adapters.db.engine import session_factory
from adapters.db.uow import SqlUnitOfWork
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount, BillingAccountState
from domain.billing.organizations import Organization
from domain.errors import UniquenessViolation
from domain.ports.repositories import UnitOfWork
from domain.subscriptions.change_previews import IssuedPreview
from domain.subscriptions.change_states import ChangeReason, ChangeState
from domain.subscriptions.plans import Plan
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import Subscription, SubscriptionState
from tests.support.fakes.clock import T0
from tests.support.fakes.data import a_plan, an_organization
from tests.support.fakes.database import FakeDatabase
from tests.support.records import create_organization


@dataclass
class Store:
    """A database behind the port, and how a test adds what the port cannot add."""

    uow: Callable[[], UnitOfWork]
    organization: Callable[[], Organization]


@pytest.fixture(params=["real", "fake"])
def store(
    request: pytest.FixtureRequest, backend: str, make_database: Callable[[str], str]
) -> Store:
    if request.param == "fake":
        if backend != "sqlite":
            pytest.skip("the fake has no backends: it runs once")
        db = FakeDatabase()

        def fake_organization() -> Organization:
            org = an_organization(f"org_{uuid.uuid4().hex[:8]}")
            db.seed(org)
            return org

        return Store(db.unit_of_work, fake_organization)
    sessions = session_factory(make_database(f"uow_{uuid.uuid4().hex[:8]}"))

    def real_organization() -> Organization:
        return create_organization(sessions, SystemClock(), name=f"org-{uuid.uuid4().hex[:8]}")

    return Store(lambda: SqlUnitOfWork(sessions), real_organization)


def account(org: Organization, account_id: str | None = None) -> BillingAccount:
    return BillingAccount.open(
        account_id or f"ba_{uuid.uuid4().hex[:8]}",
        org,
        BillingDetails(name="Acme", email="billing@acme.example"),
        offline=True,
        default_currency="usd",
        now=T0,
    )


def plan(name: str | None = None) -> Plan:
    suffix = uuid.uuid4().hex[:8]
    made = a_plan(name or f"plan-{suffix}", f"price_{suffix}")
    made.id = f"plan_{suffix}"
    return made


def stored_account(store: Store, account_id: str) -> BillingAccount | None:
    with store.uow() as uow:
        return uow.billing_accounts.get(account_id)


def test_a_write_is_seen_by_others_only_once_committed(store: Store) -> None:
    opened = account(store.organization())
    with store.uow() as uow:
        uow.billing_accounts.add(opened)
        assert uow.billing_accounts.get(opened.id) is not None  # its own writes
        assert stored_account(store, opened.id) is None
        uow.commit()

    assert stored_account(store, opened.id) == opened


def test_leaving_the_block_without_a_commit_rolls_back(store: Store) -> None:
    opened = account(store.organization())

    with store.uow() as uow:
        uow.billing_accounts.add(opened)

    assert stored_account(store, opened.id) is None


def test_an_entity_changed_but_not_saved_changes_nothing(store: Store) -> None:
    opened = account(store.organization())
    with store.uow() as uow:
        uow.billing_accounts.add(opened)
        uow.commit()

    with store.uow() as uow:
        loaded = uow.billing_accounts.get(opened.id)
        assert loaded is not None
        loaded.name = "Changed"
        uow.commit()

    assert stored_account(store, opened.id) == opened


def test_writes_after_a_commit_are_rolled_back_with_the_block(store: Store) -> None:
    opened = account(store.organization())
    with store.uow() as uow:
        uow.billing_accounts.add(opened)
        uow.commit()
        opened.name = "Changed"
        uow.billing_accounts.save(opened)

    stored = stored_account(store, opened.id)
    assert stored is not None
    assert stored.name == "Acme"


def test_a_second_live_account_of_an_organization_is_a_uniqueness_violation(
    store: Store,
) -> None:
    org = store.organization()
    with store.uow() as uow:
        uow.billing_accounts.add(account(org))
        uow.commit()
    second = account(org)

    with store.uow() as uow:
        uow.billing_accounts.add(second)
        with pytest.raises(UniquenessViolation):
            uow.commit()

    assert stored_account(store, second.id) is None


def test_a_disabled_account_leaves_its_organization_free(store: Store) -> None:
    org = store.organization()
    first = account(org)
    first.state = BillingAccountState.DISABLED
    with store.uow() as uow:
        uow.billing_accounts.add(first)
        uow.billing_accounts.add(account(org))
        uow.commit()
        assert uow.billing_accounts.current_for_organization(org.id) is not None


def test_a_removed_account_is_gone_and_its_organization_free(store: Store) -> None:
    org = store.organization()
    first = account(org)
    with store.uow() as uow:
        uow.billing_accounts.add(first)
        uow.commit()

    with store.uow() as uow:
        uow.billing_accounts.remove(first.id)
        uow.billing_accounts.add(account(org))
        uow.commit()

    assert stored_account(store, first.id) is None


def test_adding_a_taken_id_is_a_uniqueness_violation(store: Store) -> None:
    opened = account(store.organization())
    with store.uow() as uow:
        uow.billing_accounts.add(opened)
        uow.commit()
    other_org = store.organization()

    with store.uow() as uow:
        uow.billing_accounts.add(account(other_org, opened.id))
        with pytest.raises(UniquenessViolation):
            uow.commit()


def test_a_row_read_again_is_the_same_and_after_a_rollback_is_what_the_database_holds(
    store: Store,
) -> None:
    starter = plan()
    with store.uow() as uow:
        uow.plans.add(starter)
        uow.commit()
    with store.uow() as reader:
        first = reader.plans.get(starter.id)
        assert first is not None
        assert first.provider_price_id == starter.provider_price_id
        again = reader.plans.get(starter.id)
        assert again is not None
        assert again.provider_price_id == starter.provider_price_id
        reader.rollback()
        with store.uow() as writer:
            changed = writer.plans.get(starter.id)
            assert changed is not None
            changed.provider_price_id = "price_moved"
            writer.plans.save(changed)
            writer.commit()
        after = reader.plans.get(starter.id)
        undone = plan()
        reader.plans.add(undone)
        assert reader.plans.get(undone.id) is not None
        reader.rollback()
        assert reader.plans.get(undone.id) is None
    assert after is not None
    assert after.provider_price_id == "price_moved"


def test_a_taken_plan_name_is_a_uniqueness_violation(store: Store) -> None:
    first = plan()
    with store.uow() as uow:
        uow.plans.add(first)
        uow.commit()

    with store.uow() as uow:
        uow.plans.add(plan(first.name))
        with pytest.raises(UniquenessViolation):
            uow.commit()


def test_a_unit_of_work_goes_on_after_a_uniqueness_violation(store: Store) -> None:
    first = plan()
    second = plan()
    with store.uow() as uow:
        uow.plans.add(first)
        uow.commit()
        uow.plans.add(plan(first.name))
        with pytest.raises(UniquenessViolation):
            uow.commit()
        uow.plans.add(second)
        uow.commit()

    with store.uow() as uow:
        assert uow.plans.find(second.name) == second
        assert uow.plans.find(second.id) == second


def test_a_subscription_has_at_most_one_pending_change_and_its_changes_name_it_newest_first(
    store: Store,
) -> None:
    opened = account(store.organization())
    starter, team = plan(), plan()
    subscription = Subscription(
        id=f"sub_{uuid.uuid4().hex[:8]}",
        billing_account_id=opened.id,
        plan_id=starter.id,
        state=SubscriptionState.ACTIVE,
        provider="fake",
        provider_id=f"sub_remote_{uuid.uuid4().hex[:8]}",
        current_period_start=T0,
        current_period_end=T0 + timedelta(days=30),
        created_at=T0,
        updated_at=T0,
    )
    first = ScheduledChange.at_period_end("chg_1" + opened.id, subscription, team, now=T0)
    later = T0 + timedelta(seconds=1)
    second = ScheduledChange.at_period_end("chg_2" + opened.id, subscription, team, now=later)
    with store.uow() as uow:
        uow.billing_accounts.add(opened)
        uow.plans.add(starter)
        uow.plans.add(team)
        uow.commit()
        uow.subscriptions.add(subscription)
        uow.commit()
        uow.scheduled_changes.add(first)
        uow.commit()
        uow.scheduled_changes.add(second)
        with pytest.raises(UniquenessViolation):
            uow.commit()

    with store.uow() as uow:
        pending = uow.scheduled_changes.pending_for(subscription.id, for_update=True)
        assert pending is not None
        pending.cancel(ChangeReason.REPLACED, later)
        uow.scheduled_changes.save(pending)
        uow.scheduled_changes.add(second)
        uow.commit()

    with store.uow() as uow:
        listed = uow.scheduled_changes.for_subscription(subscription.id)
    assert [(change.id, change.state) for change in listed] == [
        (second.id, ChangeState.SCHEDULED),
        (first.id, ChangeState.CANCELED),
    ]
    with store.uow() as uow:
        assert uow.scheduled_changes.subscription_of(first.id) == subscription.id
        assert uow.scheduled_changes.subscription_of("chg_never_made") is None


def subscription_of(opened: BillingAccount, on: Plan, subscription_id: str) -> Subscription:
    return Subscription(
        id=subscription_id,
        billing_account_id=opened.id,
        plan_id=on.id,
        state=SubscriptionState.ACTIVE,
        provider="fake",
        provider_id=f"sub_remote_{uuid.uuid4().hex[:8]}",
        current_period_start=T0,
        current_period_end=T0 + timedelta(days=30),
        created_at=T0,
        updated_at=T0,
    )


def test_every_account_and_subscription_is_listed_by_id_and_only_pending_changes_as_pending(
    store: Store,
) -> None:
    org, other = store.organization(), store.organization()
    second, first = account(org, "ba_b"), account(other, "ba_a")
    first.state = BillingAccountState.DISABLED
    starter, team = plan(), plan()
    later, earlier = (
        subscription_of(second, starter, "sub_b"),
        subscription_of(first, starter, "sub_a"),
    )
    pending = ScheduledChange.at_period_end("chg_pending", later, team, now=T0)
    done = ScheduledChange.at_period_end("chg_done", earlier, team, now=T0)
    done.cancel(ChangeReason.CANCELED_ON_REQUEST, T0)
    with store.uow() as uow:
        uow.billing_accounts.add(second)
        uow.billing_accounts.add(first)
        uow.plans.add(starter)
        uow.plans.add(team)
        uow.commit()
        uow.subscriptions.add(later)
        uow.subscriptions.add(earlier)
        uow.commit()
        uow.scheduled_changes.add(pending)
        uow.scheduled_changes.add(done)
        uow.commit()

    with store.uow() as uow:
        assert [found.id for found in uow.billing_accounts.list_all()] == ["ba_a", "ba_b"]
        assert [found.id for found in uow.subscriptions.list_all()] == ["sub_a", "sub_b"]
        assert [found.id for found in uow.scheduled_changes.all_pending()] == ["chg_pending"]


def test_pending_accounts_opened_by_a_moment_are_found_oldest_first_up_to_a_limit(
    store: Store,
) -> None:
    opened = []
    for minutes in (30, 10, 20, 40):
        pending = BillingAccount.open(
            f"ba_{uuid.uuid4().hex[:8]}",
            store.organization(),
            BillingDetails(name="Acme", email="billing@acme.example"),
            offline=False,
            default_currency="usd",
            now=T0 + timedelta(minutes=minutes),
        )
        opened.append(pending)
    offline = account(store.organization())
    with store.uow() as uow:
        for made in (*opened, offline):
            uow.billing_accounts.add(made)
        uow.commit()

    with store.uow() as uow:
        found = uow.billing_accounts.pending_created_before(T0 + timedelta(minutes=30), 10)
        limited = uow.billing_accounts.pending_created_before(T0 + timedelta(minutes=30), 2)

    assert [made.id for made in found] == [opened[1].id, opened[2].id, opened[0].id]
    assert [made.id for made in limited] == [opened[1].id, opened[2].id]


def test_a_preview_is_found_by_its_id_and_a_subscriptions_expired_previews_are_pruned(
    store: Store,
) -> None:
    suffix = uuid.uuid4().hex[:8]
    older = IssuedPreview.of(f"sub_{suffix}", "plan_a", "plan_b", T0, T0)
    newer = IssuedPreview.of(f"sub_{suffix}", "plan_a", "plan_c", T0 + timedelta(minutes=6), T0)
    of_another = IssuedPreview.of(f"sub_other_{suffix}", "plan_a", "plan_b", T0, T0)
    with store.uow() as uow:
        for preview in (older, newer, of_another):
            uow.change_previews.add(preview)
        uow.commit()
    with store.uow() as uow:
        found = uow.change_previews.get(older.id)
        uow.change_previews.prune(f"sub_{suffix}", T0 + timedelta(minutes=1))
        uow.commit()

    assert found == older
    with store.uow() as uow:
        kept = [uow.change_previews.get(p.id) for p in (older, newer, of_another)]
    assert kept == [None, newer, of_another]

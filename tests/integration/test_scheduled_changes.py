"""Plan changes in SQLite and PostgreSQL: claiming due changes under concurrency, and the
one-pending-change rule."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, event

from adapters.clock import SystemClock
from adapters.db.engine import session_factory
from adapters.db.uow import SqlUnitOfWork
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount
from domain.errors import UniquenessViolation
from domain.ports.repositories import Claim
from domain.subscriptions.change_states import ChangeReason, ChangeState
from domain.subscriptions.plans import Plan, PlanSpec, ProviderPrice
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import Subscription, SubscriptionState
from tests.support.records import create_organization

NOW = datetime.now(UTC).replace(microsecond=0)
LEASE = timedelta(minutes=5)


class Catalog:
    """A database with an organization, its billing account and two plans."""

    def __init__(self, url: str) -> None:
        self.sessions = session_factory(url)
        org = create_organization(self.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex}")
        self.account = BillingAccount.open(
            f"ba_{uuid.uuid4().hex[:8]}",
            org,
            BillingDetails(name="Acme", email="billing@acme.example"),
            offline=True,
            default_currency="usd",
            now=NOW,
        )
        self.starter = self._plan("starter")
        self.team = self._plan("team")
        with self.uow() as uow:
            uow.billing_accounts.add(self.account)
            uow.plans.add(self.starter)
            uow.plans.add(self.team)
            uow.commit()

    def _plan(self, name: str) -> Plan:
        suffix = uuid.uuid4().hex[:8]
        plan = Plan.new(
            f"plan_{suffix}", PlanSpec(name=f"{name}-{suffix}", amount=100, currency="usd"), NOW
        )
        plan.registered("stripe", ProviderPrice(f"prod_{suffix}", f"price_{suffix}"), NOW)
        return plan

    def uow(self) -> SqlUnitOfWork:
        return SqlUnitOfWork(self.sessions)

    def subscription(self) -> Subscription:
        sub_id = f"sub_{uuid.uuid4().hex[:12]}"
        subscription = Subscription(
            id=sub_id,
            billing_account_id=self.account.id,
            plan_id=self.starter.id,
            state=SubscriptionState.ACTIVE,
            provider="stripe",
            provider_id=f"sub_stripe_{sub_id}",
            current_period_start=NOW - timedelta(days=30),
            current_period_end=NOW,
            created_at=NOW,
            updated_at=NOW,
        )
        with self.uow() as uow:
            uow.subscriptions.add(subscription)
            uow.commit()
        return subscription

    def scheduled(self, count: int, *, effective_at: datetime = NOW) -> list[str]:
        subscriptions = [self.subscription() for _ in range(count)]
        with self.uow() as uow:
            ids = []
            for subscription in subscriptions:
                subscription.current_period_end = effective_at
                change = ScheduledChange.at_period_end(
                    f"chg_{uuid.uuid4().hex}", subscription, self.team, now=NOW
                )
                uow.scheduled_changes.add(change)
                ids.append(change.id)
            uow.commit()
        return ids

    def claim(self, now: datetime, limit: int = 1000) -> list[Claim]:
        with self.uow() as uow:
            claims = uow.scheduled_changes.claim_due(now, now + LEASE, limit, lead=timedelta(0))
            uow.commit()
        return claims

    def change(self, change_id: str) -> ScheduledChange:
        with self.uow() as uow:
            change = uow.scheduled_changes.get(change_id)
        assert change is not None
        return change


@pytest.fixture
def catalog(make_database: Callable[[str], str]) -> Catalog:
    return Catalog(make_database(f"changes_{uuid.uuid4().hex[:8]}"))


def test_due_changes_are_claimed_once_with_a_lease(catalog: Catalog) -> None:
    due = catalog.scheduled(3)
    later = catalog.scheduled(1, effective_at=NOW + timedelta(days=1))

    claims = catalog.claim(NOW)

    assert {claim.change_id for claim in claims} == set(due)
    assert {claim.number for claim in claims} == {1}
    assert catalog.claim(NOW + LEASE / 2) == []  # leased: nobody else takes them
    change = catalog.change(due[0])
    assert (change.state, change.claims, change.lease_until) == (
        ChangeState.APPLYING,
        1,
        NOW + LEASE,
    )
    assert catalog.change(later[0]).state is ChangeState.SCHEDULED


def test_a_change_whose_lease_ran_out_is_claimed_again_with_a_new_number(
    catalog: Catalog,
) -> None:
    [change_id] = catalog.scheduled(1)
    [first] = catalog.claim(NOW)

    [second] = catalog.claim(NOW + LEASE + timedelta(seconds=1))

    assert (first.change_id, first.number) == (change_id, 1)
    assert (second.change_id, second.number) == (change_id, 2)


def test_a_released_claim_is_taken_by_the_next_sweep(catalog: Catalog) -> None:
    [change_id] = catalog.scheduled(1)
    [claim] = catalog.claim(NOW)
    with catalog.uow() as uow:
        uow.scheduled_changes.release(claim, NOW)
        uow.commit()

    assert [c.change_id for c in catalog.claim(NOW + timedelta(seconds=1))] == [change_id]


def test_a_batch_claims_the_earliest_changes_first(catalog: Catalog) -> None:
    early = catalog.scheduled(2, effective_at=NOW - timedelta(hours=1))
    catalog.scheduled(2)

    assert {claim.change_id for claim in catalog.claim(NOW, limit=2)} == set(early)


def test_concurrent_sweeps_never_claim_one_change_twice(catalog: Catalog) -> None:
    due = catalog.scheduled(120)
    claimed: list[list[Claim]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def sweep() -> None:
        start.wait()
        try:
            mine: list[Claim] = []
            for _ in range(10):
                mine.extend(catalog.claim(NOW, limit=15))
            claimed.append(mine)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=sweep) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    all_claims = [claim.change_id for claims in claimed for claim in claims]
    assert len(all_claims) == len(set(all_claims)) == len(due)
    assert set(all_claims) == set(due)


def test_one_subscription_has_at_most_one_pending_change(catalog: Catalog) -> None:
    subscription = catalog.subscription()
    first = ScheduledChange.at_period_end(
        "chg_a" + uuid.uuid4().hex, subscription, catalog.team, now=NOW
    )
    second = ScheduledChange.at_period_end(
        "chg_b" + uuid.uuid4().hex, subscription, catalog.team, now=NOW
    )
    with catalog.uow() as uow:
        uow.scheduled_changes.add(first)
        uow.commit()

    with catalog.uow() as uow:
        uow.scheduled_changes.add(second)
        with pytest.raises(UniquenessViolation):
            uow.commit()

    # Replacing in one transaction: the old change leaves the pending states first.
    with catalog.uow() as uow:
        pending = uow.scheduled_changes.pending_for(subscription.id, for_update=True)
        assert pending is not None
        pending.cancel(ChangeReason.REPLACED, NOW)
        uow.scheduled_changes.save(pending)
        uow.scheduled_changes.add(second)
        uow.commit()
    with catalog.uow() as uow:
        changes = uow.scheduled_changes.for_subscription(subscription.id)
        pending = uow.scheduled_changes.pending_for(subscription.id)
    assert pending is not None
    assert pending.id == second.id
    assert {(c.id, c.state) for c in changes} == {
        (first.id, ChangeState.CANCELED),
        (second.id, ChangeState.SCHEDULED),
    }


def test_a_change_round_trips_through_the_database(catalog: Catalog) -> None:
    [change_id] = catalog.scheduled(1)
    with catalog.uow() as uow:
        change = uow.scheduled_changes.get(change_id, for_update=True)
        assert change is not None
        change.claim(NOW, LEASE)
        change.applied(NOW + timedelta(seconds=2.5))
        uow.scheduled_changes.save(change)
        uow.commit()

    stored = catalog.change(change_id)
    assert stored == change
    assert stored.apply_lag_seconds == 2.5
    assert stored.effective_at.tzinfo is not None


def statements_of(catalog: Catalog, work: Callable[[], object]) -> list[str]:
    """Each statement ``work`` sends to the database: ``UPDATE`` if it updates, else its
    first word."""
    sent: list[str] = []

    def on_statement(*arguments: Any) -> None:
        statement = " ".join(arguments[2].upper().split())
        updates = statement.startswith("UPDATE ") or ") UPDATE SCHEDULED_CHANGES " in statement
        sent.append("UPDATE" if updates else statement.split()[0])

    engine: Engine = catalog.sessions.kw["bind"]
    event.listen(engine, "before_cursor_execute", on_statement)
    try:
        work()
    finally:
        event.remove(engine, "before_cursor_execute", on_statement)
    return sent


def test_a_claim_is_one_statement_on_postgresql_and_on_sqlite_writes_only_when_some_are_due(
    catalog: Catalog,
) -> None:
    due = catalog.scheduled(3)
    on_postgresql = catalog.sessions.kw["bind"].dialect.name == "postgresql"

    claimed: list[Claim] = []
    sent = statements_of(catalog, lambda: claimed.extend(catalog.claim(NOW)))
    nothing_due = statements_of(catalog, lambda: catalog.claim(NOW))

    assert set(due) <= {claim.change_id for claim in claimed}
    if on_postgresql:  # the candidates are the update's subquery: one round trip
        assert sent == nothing_due == ["UPDATE"]
    else:  # no UPDATE (the database's write lock) when nothing is due
        assert (sent, nothing_due) == (["SELECT", "UPDATE"], ["SELECT"])

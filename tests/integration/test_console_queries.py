"""The operator console's reads on SQLite and PostgreSQL (``adapters/db/timelines.py``,
``listing.py``): an account's and a subscription's story gather what named them from the
command log, the provider-call record and the outbox; lists page with their cursors."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from adapters.db.command_log import SqlCommandLog
from adapters.db.engine import session_factory
from adapters.db.provider_calls import SqlProviderCallLog
from adapters.db.timelines import SqlConsole
from adapters.db.uow import SqlUnitOfWork
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount
from domain.errors import InvalidArgument
from domain.events.billing_accounts import BillingAccountCreated, BillingAccountRegistered
from domain.provider.calls import CallOutcome, ProviderCall
from domain.subscriptions.plans import Plan, PlanSpec
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import ProviderSubscription, Subscription
from tests.support.fakes.clock import FakeClock
from tests.support.records import create_organization

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
ACME = BillingDetails(name="Acme", email="billing@acme.example")


@dataclass
class Ledger:
    sessions: sessionmaker[Session]
    clock: FakeClock
    console: SqlConsole
    commands: SqlCommandLog
    calls: SqlProviderCallLog


@pytest.fixture
def ledger(make_database: Callable[[str], str]) -> Ledger:
    sessions = session_factory(make_database(f"console_{uuid.uuid4().hex[:8]}"))
    clock = FakeClock(T0)
    return Ledger(
        sessions,
        clock,
        SqlConsole(sessions),
        SqlCommandLog(sessions, clock),
        SqlProviderCallLog(sessions),
    )


def open_account(
    ledger: Ledger,
    name: str,
    details: BillingDetails = ACME,
) -> BillingAccount:
    organization = create_organization(ledger.sessions, ledger.clock, name=name)
    account = BillingAccount.open(
        f"ba_{name}",
        organization,
        details,
        offline=False,
        default_currency="usd",
        now=ledger.clock.now(),
    )
    with SqlUnitOfWork(ledger.sessions) as uow:
        uow.billing_accounts.add(account)
        uow.events.add(BillingAccountCreated.of(account, command_id="cmd_create", now=T0))
        uow.commit()
    return account


def call(ledger: Ledger, account: BillingAccount, outcome: CallOutcome, error: str | None) -> None:
    ledger.clock.advance(SECOND)
    ledger.calls.record(
        ProviderCall(
            operation="create_customer",
            subject=f"billing_account:{account.id}",
            command_id="cmd_create",
            idempotency_key=account.registration_key,
            outcome=outcome,
            error=error,
            started_at=ledger.clock.now(),
            duration_ms=12,
        )
    )


def test_an_accounts_story_holds_its_commands_provider_attempts_and_events(
    ledger: Ledger,
) -> None:
    account = open_account(ledger, f"acme-{uuid.uuid4().hex[:6]}")
    other = open_account(ledger, f"other-{uuid.uuid4().hex[:6]}")
    payload = {"command_id": "cmd_create", "org_id": account.org_id, "account": {}}
    ledger.commands.accept(
        command_id="cmd_create",
        command_type="billing.create_account",
        payload=payload,
        client_id=None,
        idempotency_key=None,
        request_fingerprint=None,
    )
    ledger.commands.accept(
        command_id="cmd_other",
        command_type="billing.create_account",
        payload={"command_id": "cmd_other", "org_id": other.org_id},
        client_id=None,
        idempotency_key=None,
        request_fingerprint=None,
    )
    ledger.commands.begin("cmd_create", "billing.create_account", payload, source="api")
    call(ledger, account, CallOutcome.RETRYABLE, "stripe create customer: 503")
    ledger.commands.retrying(
        "cmd_create",
        {"code": 14, "message": "stripe create customer: 503", "details": []},
        {"attempt": 1, "reason": "stripe create customer: 503", "delay_seconds": 2.5},
    )
    call(ledger, account, CallOutcome.SUCCEEDED, None)
    key = account.registration_key
    account.registered("stripe", "cus_1", ledger.clock.now())
    with SqlUnitOfWork(ledger.sessions) as uow:
        uow.billing_accounts.save(account)
        uow.events.add(BillingAccountRegistered.of(account, command_id="cmd_create", now=T0))
        uow.commit()

    by_org = ledger.console.account_story(account.org_id)
    by_id = ledger.console.account_story(account.id)

    assert by_org is not None
    assert by_id is not None
    assert by_org == by_id
    assert by_org.provider_customer_id == "cus_1"
    assert [command.id for command in by_org.commands] == ["cmd_create"]
    [command] = by_org.commands
    assert command.status == "retrying"
    assert command.last_error == "stripe create customer: 503"
    assert command.next_retry_at == T0 + SECOND + timedelta(seconds=2.5)
    attempts = [(c.attempt, c.outcome, c.error) for c in by_org.provider_calls]
    assert attempts == [
        (1, "retryable", "stripe create customer: 503"),
        (2, "succeeded", None),
    ]
    assert {c.idempotency_key for c in by_org.provider_calls} == {key}
    assert [event.type for event in by_org.events] == [
        "billing_account.created",
        "billing_account.registered",
    ]
    assert ledger.console.account_story("org_nowhere") is None


def test_a_subscriptions_story_has_its_phases_and_its_changes_newest_first(
    ledger: Ledger,
) -> None:
    account = open_account(ledger, f"subs-{uuid.uuid4().hex[:6]}")
    suffix = uuid.uuid4().hex[:6]
    starter = Plan.new(f"plan_s{suffix}", PlanSpec(name=f"s{suffix}", amount=1, currency="usd"), T0)
    team = Plan.new(f"plan_t{suffix}", PlanSpec(name=f"t{suffix}", amount=2, currency="usd"), T0)
    remote = ProviderSubscription(
        id=f"sub_remote_{suffix}",
        status="active",
        item_id="si_1",
        price_id="price_1",
        current_period_start=T0,
        current_period_end=T0 + timedelta(days=30),
    )
    subscription = Subscription.started(f"sub_{suffix}", account.id, starter, "stripe", remote, T0)
    change = ScheduledChange.at_period_end(f"chg_{suffix}", subscription, team, now=T0)
    with SqlUnitOfWork(ledger.sessions) as uow:
        uow.plans.add(starter)
        uow.plans.add(team)
        uow.subscriptions.add(subscription)
        uow.commit()
    with SqlUnitOfWork(ledger.sessions) as uow:
        uow.scheduled_changes.add(change)
        uow.commit()

    story = ledger.console.subscription_story(subscription.id)

    assert story is not None
    assert [(p.plan_id, p.source) for p in story.phases] == [
        (starter.id, "current"),
        (team.id, "scheduled"),
    ]
    assert [c["id"] for c in story.changes] == [change.id]
    assert story.subscription["plan"]["id"] == starter.id
    assert story.invoices is None
    page = ledger.console.subscriptions(
        state="active", billing_account_id=account.id, plan_id=None, limit=10, after=None
    )
    assert [(item.id, item.pending_change) for item in page.items] == [(subscription.id, change.id)]


def test_lists_page_by_id_with_a_cursor_and_filter(ledger: Ledger) -> None:
    names = sorted(f"page-{uuid.uuid4().hex[:6]}" for _ in range(3))
    accounts = sorted(open_account(ledger, name).id for name in names)

    first = ledger.console.billing_accounts(state="pending", org_id=None, limit=2, after=None)
    second = ledger.console.billing_accounts(
        state="pending", org_id=None, limit=2, after=first.next_cursor
    )
    active = ledger.console.billing_accounts(state="active", org_id=None, limit=2, after=None)

    assert [item.id for item in first.items + second.items] == accounts
    assert first.next_cursor is not None
    assert second.next_cursor is None
    assert active.items == []


def test_in_flight_commands_are_listed_oldest_first_across_pages(ledger: Ledger) -> None:
    for index in range(3):
        command_id = f"cmd_{index}"
        ledger.commands.accept(
            command_id=command_id,
            command_type="users.enable",
            payload={"command_id": command_id, "user_id": "usr_1"},
            client_id=None,
            idempotency_key=None,
            request_fingerprint=None,
        )
    ledger.commands.succeed("cmd_1", {})

    first = ledger.console.commands(statuses=(), command_type=None, limit=1, after=None)
    second = ledger.console.commands(
        statuses=(), command_type="users.enable", limit=5, after=first.next_cursor
    )
    done = ledger.console.commands(statuses=["succeeded"], command_type=None, limit=5, after=None)

    assert [c.id for c in first.items + second.items] == ["cmd_0", "cmd_2"]
    assert second.next_cursor is None
    assert [c.id for c in done.items] == ["cmd_1"]


@pytest.mark.parametrize("cursor", ["not base64!", "Zm9v", "../etc"])
def test_a_cursor_that_no_page_gave_is_an_invalid_argument_naming_after(
    ledger: Ledger, cursor: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        ledger.console.commands(statuses=(), command_type=None, limit=5, after=cursor)
    assert refused.value.details[0]["fieldViolations"][0]["field"] == "after"
    with pytest.raises(InvalidArgument):
        ledger.console.organizations(state=None, limit=5, after="../etc")


@pytest.mark.parametrize("cursor", ["x", "org_0001", "not base64!", "Zm9v"])
def test_an_id_ordered_list_takes_no_cursor_its_pages_did_not_give(
    ledger: Ledger, cursor: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        ledger.console.users(state=None, limit=5, after=cursor)
    assert refused.value.details[0]["fieldViolations"][0]["field"] == "after"
    with pytest.raises(InvalidArgument):
        ledger.console.billing_accounts(state=None, org_id=None, limit=5, after=cursor)


def test_a_cursor_of_one_list_is_refused_by_another(ledger: Ledger) -> None:
    for _ in range(2):
        open_account(ledger, f"cur-{uuid.uuid4().hex[:6]}")
    first = ledger.console.billing_accounts(state=None, org_id=None, limit=1, after=None)
    assert first.next_cursor is not None

    with pytest.raises(InvalidArgument):
        ledger.console.subscriptions(
            state=None, billing_account_id=None, plan_id=None, limit=1, after=first.next_cursor
        )


def test_a_search_finds_by_id_stripe_id_handle_whole_name_and_whole_email(
    ledger: Ledger,
) -> None:
    handle = f"acme-{uuid.uuid4().hex[:6]}"
    account = open_account(
        ledger, handle, BillingDetails(name="Jane Doe", email="Jane.Doe@Acme.example")
    )
    bob = open_account(
        ledger, f"other-{uuid.uuid4().hex[:6]}", BillingDetails(name="Bob", email="bob@b.example")
    )
    account.registered("stripe", "cus_search1", ledger.clock.now())
    with SqlUnitOfWork(ledger.sessions) as uow:
        uow.billing_accounts.save(account)
        uow.commit()
    ledger.commands.accept(
        command_id="cmd_found",
        command_type="billing.create_account",
        payload={"org_id": account.org_id},
        client_id=None,
        idempotency_key=None,
        request_fingerprint=None,
    )

    def found(query: str) -> list[tuple[str, str, str]]:
        return [(hit.kind, hit.id, hit.matched) for hit in ledger.console.search(query, limit=10)]

    assert found(account.id) == [("billing_account", account.id, "id")]
    assert found(account.org_id) == [("organization", account.org_id, "id")]
    assert found("cmd_found") == [("command", "cmd_found", "id")]
    assert found("cus_search1") == [("billing_account", account.id, "stripe id")]
    assert found(handle) == [("organization", account.org_id, "handle")]
    assert found(handle.upper()) == [("organization", account.org_id, "handle")]
    assert found(" Jane Doe ") == [("billing_account", account.id, "name")]
    by_email = [("billing_account", account.id, "email")]
    assert found("Jane.Doe@acme.example") == by_email
    assert found("Jane.Doe@ACME.EXAMPLE") == by_email  # a domain has no case
    assert found("Bob@b.example") == [("billing_account", bob.id, "email")]  # stored lower
    [hit] = ledger.console.search("Jane.Doe@acme.example", limit=10)
    assert hit.label == "J*** J***@acme.example"  # masked, as every page shows them
    assert hit.org_id == account.org_id


def test_a_search_never_matches_part_of_a_name_or_an_address(ledger: Ledger) -> None:
    open_account(
        ledger,
        f"part-{uuid.uuid4().hex[:6]}",
        BillingDetails(name="Jane Doe", email="jane.doe@acme.example"),
    )

    for query in ("Jane", "jane doe", "@acme.example", "acme.example", "j***@acme.example", ""):
        assert ledger.console.search(query, limit=10) == [], query


def test_a_commands_story_holds_its_record_retries_stripe_calls_and_its_own_events(
    ledger: Ledger,
) -> None:
    account = open_account(ledger, f"story-{uuid.uuid4().hex[:6]}")
    payload = {
        "command_id": "cmd_create",
        "org_id": account.org_id,
        "billing_account_id": account.id,
    }
    ledger.commands.accept(
        command_id="cmd_create",
        command_type="billing.create_account",
        payload=payload,
        client_id="ops",
        idempotency_key="k-1",
        request_fingerprint=None,
    )
    ledger.commands.begin("cmd_create", "billing.create_account", payload, source="api")
    call(ledger, account, CallOutcome.RETRYABLE, "stripe create customer: 503")
    ledger.commands.retrying(
        "cmd_create",
        {"code": 14, "message": "stripe create customer: 503", "details": []},
        {"attempt": 1, "reason": "stripe create customer: 503", "delay_seconds": 2.5},
    )
    call(ledger, account, CallOutcome.SUCCEEDED, None)
    account.registered("stripe", "cus_story", ledger.clock.now())
    with SqlUnitOfWork(ledger.sessions) as uow:
        uow.billing_accounts.save(account)
        uow.events.add(BillingAccountRegistered.of(account, command_id="cmd_create", now=T0))
        uow.events.add(BillingAccountRegistered.of(account, command_id="cmd_later", now=T0))
        uow.commit()

    story = ledger.console.command_story("cmd_create")

    assert story is not None
    assert story.command.status == "retrying"
    assert (story.client_id, story.idempotency_key) == ("ops", "k-1")
    assert story.payload == payload
    assert [(r.attempt, r.delay_seconds) for r in story.retry_history] == [(1, 2.5)]
    assert [(c.attempt, c.outcome) for c in story.provider_calls] == [
        (1, "retryable"),
        (2, "succeeded"),
    ]
    # The account's creation event (cmd_create, from open_account) and its registration;
    # not the registration another command emitted on the same account.
    assert [(e.type, e.command_id) for e in story.events] == [
        ("billing_account.created", "cmd_create"),
        ("billing_account.registered", "cmd_create"),
    ]
    assert ledger.console.command_story("cmd_nowhere") is None
    assert ledger.console.command_story("not an id") is None


PENDING_INDEXES: set[str] = set()
"""Tables the search still reads whole: none (migration 0019 indexes the accounts' names and
email addresses)."""


def test_a_search_and_a_commands_story_read_no_table_whole(
    ledger: Ledger,
) -> None:
    engine = ledger.sessions.kw["bind"]
    if engine.dialect.name != "sqlite":
        pytest.skip("read with SQLite's query plans (PostgreSQL's depend on the tables' sizes)")
    account = open_account(ledger, f"plan-{uuid.uuid4().hex[:6]}")
    statements: list[tuple[str, Any]] = []

    def kept(conn: Any, cursor: Any, statement: str, parameters: Any, *rest: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            statements.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", kept)
    try:
        for query in (
            account.id,
            account.org_id,
            "cmd_x",
            "cus_x",
            "acme",
            "Acme",
            "b@acme.example",
        ):
            ledger.console.search(query, limit=10)
        ledger.console.command_story("cmd_create")
    finally:
        event.remove(engine, "before_cursor_execute", kept)

    scanned: set[str] = set()
    with engine.connect() as connection:
        for statement, parameters in statements:
            plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
            for row in plan:
                found = re.match(r"SCAN (?:TABLE )?(\w+)", str(row[-1]))
                if found:
                    scanned.add(found.group(1))
    assert statements
    assert scanned <= PENDING_INDEXES, scanned

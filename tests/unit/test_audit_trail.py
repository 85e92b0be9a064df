"""The audit trail, on in-memory ports: every action taken through the table's ``take`` writes
one entry (who, when, why, what it targeted, what it changed) and its event, in the
transaction of what it changed; an action refused, or without a reason, writes none."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from application.handlers.subscriptions.plan_changes import change_subscription_plan
from application.operator_actions import Surface, action, take
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount
from domain.errors import FailedPrecondition, InvalidArgument
from domain.messages import CommandStatus
from domain.operations.audit import AuditEntry, AuditFilter
from domain.subscriptions.change_commands import ChangeSubscriptionPlan
from tests.support.fakes.application import FakeApplication
from tests.support.fakes.data import an_organization, subscribed
from tests.support.fakes.database import DatabaseUnavailable


@pytest.fixture
def app() -> FakeApplication:
    app = FakeApplication()
    organization = an_organization("org_1")
    pending = BillingAccount.open(
        "ba_1",
        organization,
        BillingDetails(name="Acme", email="billing@acme.example"),
        offline=False,
        default_currency="usd",
        now=app.clock.now(),
    )
    app.db.seed(organization, pending)
    return app


def entries(app: FakeApplication, **wanted: Any) -> list[AuditEntry]:
    with app.unit_of_work() as uow:
        return uow.audit.find(AuditFilter(**wanted), 100)


def events(app: FakeApplication, kind: str = "operator.action_taken") -> list[Any]:
    rows = sorted(app.db.rows("events"), key=lambda row: row.sequence)
    return [row.document for row in rows if row.document["type"] == kind]


def test_an_action_records_who_took_it_when_why_what_it_targeted_and_what_it_changed(
    app: FakeApplication,
) -> None:
    taken = take(
        action("mark-offline"), app, ["ba_1"], "Stripe is down", by="ann", surface=Surface.CLI
    )

    [entry] = entries(app)
    assert entry == AuditEntry(
        id=taken.command_id,
        action="mark-offline",
        operator="ann",
        surface="cli",
        at=app.clock.now(),
        reason="Stripe is down",
        targets=["billing_account:ba_1"],
        billing_account_id="ba_1",
        changes=["billing_account.marked_offline billing_account:ba_1"],
    )


def test_an_actions_entry_is_exported_as_an_event_in_its_transaction(
    app: FakeApplication,
) -> None:
    taken = take(
        action("mark-offline"), app, ["ba_1"], "Stripe is down", by="ops", surface=Surface.API
    )

    [event] = events(app)
    assert event["command_id"] == taken.command_id
    assert event["subject"] == {"type": "operator_action", "id": taken.command_id}
    assert event["data"]["operator"] == "ops"
    assert event["data"]["reason"] == "Stripe is down"
    assert event["data"]["changes"] == ["billing_account.marked_offline billing_account:ba_1"]


def test_an_action_whose_commit_fails_leaves_neither_its_change_nor_its_entry(
    app: FakeApplication,
) -> None:
    app.db.fail_next_commits(1)

    with pytest.raises(DatabaseUnavailable):
        take(action("mark-offline"), app, ["ba_1"], "Stripe is down", by="ann", surface=Surface.CLI)

    assert app.db.row("billing_accounts", "ba_1").state.value == "pending"
    assert entries(app) == []
    assert app.db.rows("events") == []


@pytest.mark.parametrize("reason", ["", "   ", "\t\n"])
def test_an_action_without_a_reason_is_refused_and_changes_nothing(
    app: FakeApplication, reason: str
) -> None:
    with pytest.raises(InvalidArgument, match="mark-offline needs a reason") as refused:
        take(action("mark-offline"), app, ["ba_1"], reason, by="ann", surface=Surface.CONSOLE)

    assert refused.value.details[0]["fieldViolations"][0]["field"] == "reason"
    assert app.db.row("billing_accounts", "ba_1").state.value == "pending"
    assert entries(app) == []


def test_a_refused_action_writes_no_entry(app: FakeApplication) -> None:
    take(action("mark-offline"), app, ["ba_1"], "first", by="ann", surface=Surface.CLI)

    with pytest.raises(FailedPrecondition):
        take(action("retry-registration"), app, ["ba_1"], "again", by="ann", surface=Surface.CLI)

    assert [entry.action for entry in entries(app)] == ["mark-offline"]


def test_a_replay_through_the_command_log_records_what_it_did_and_the_commands_account(
    app: FakeApplication,
) -> None:
    app.commands.accept("cmd_1", "billing.register_account", {"billing_account_id": "ba_1"})
    app.commands["cmd_1"].status = CommandStatus.FAILED

    take(action("replay-command"), app, ["cmd_1"], "Stripe is back", by="ops", surface=Surface.API)

    [entry] = entries(app)
    assert entry.targets == ["command:cmd_1"]
    assert entry.billing_account_id == "ba_1"
    assert entry.changes == ["command cmd_1 is queued again: a worker runs it under its own id"]
    assert len(events(app)) == 1


def test_a_skipped_change_is_in_the_audit_trail_of_its_subscriptions_account() -> None:
    app = FakeApplication()
    sub = subscribed(app)
    change_subscription_plan(
        ChangeSubscriptionPlan(
            command_id="c1",
            org_id=sub.org_id,
            billing_account_id=sub.account_id,
            subscription_id=sub.subscription_id,
            plan="team",
        ),
        app,
    )
    with app.unit_of_work() as uow:
        [change] = uow.scheduled_changes.for_subscription(sub.subscription_id)

    take(action("skip-change"), app, [change.id], "asked", by="ann", surface=Surface.CONSOLE)

    [entry] = entries(app, target=sub.account_id)
    assert entry.targets == [f"scheduled_change:{change.id}"]
    assert entry.changes == [f"subscription.plan_change.skipped subscription:{sub.subscription_id}"]


def test_the_audit_trail_is_filtered_by_target_operator_action_and_time(
    app: FakeApplication,
) -> None:
    app.commands.accept("cmd_1", "users.enable", {"user_id": "u_1"})
    app.commands["cmd_1"].status = CommandStatus.FAILED
    take(action("replay-command"), app, ["cmd_1"], "first", by="ops", surface=Surface.API)
    app.clock.advance(timedelta(hours=1))
    later = app.clock.now()
    take(action("mark-offline"), app, ["ba_1"], "second", by="ann", surface=Surface.CLI)

    assert [e.reason for e in entries(app)] == ["second", "first"]
    assert [e.reason for e in entries(app, target="ba_1")] == ["second"]
    assert [e.reason for e in entries(app, target="command:cmd_1")] == ["first"]
    assert [e.reason for e in entries(app, operator="ops")] == ["first"]
    assert [e.reason for e in entries(app, action="mark-offline")] == ["second"]
    assert [e.reason for e in entries(app, since=later)] == ["second"]


def test_a_replayed_command_naming_only_its_organization_is_in_its_accounts_trail(
    app: FakeApplication,
) -> None:
    app.commands.accept("cmd_1", "billing.create_account", {"org_id": "org_1"})
    app.commands["cmd_1"].status = CommandStatus.FAILED

    take(action("replay-command"), app, ["cmd_1"], "Stripe is back", by="ops", surface=Surface.API)

    assert [entry.targets for entry in entries(app, target="ba_1")] == [["command:cmd_1"]]

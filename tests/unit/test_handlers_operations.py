"""The operator console's actions, on in-memory ports: what each may act on, what it changes,
the event it records and what it puts on the queue."""

from __future__ import annotations

from typing import Any

import pytest

from application.handlers.operations.actions import (
    mark_account_offline,
    replay_commands,
    retry_command,
    retry_registration,
    skip_scheduled_change,
)
from application.handlers.subscriptions.plan_changes import change_subscription_plan
from application.requests.operator_actions import (
    MarkAccountOffline,
    ReplayCommands,
    RetryCommand,
    RetryRegistration,
    SkipScheduledChange,
    new_action_id,
)
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount, BillingAccountState
from domain.errors import FailedPrecondition, NotFound
from domain.messages import CommandStatus
from domain.subscriptions.change_commands import ChangeSubscriptionPlan
from domain.subscriptions.change_states import ChangeState
from tests.support.fakes.application import FakeApplication
from tests.support.fakes.data import an_organization, subscribed


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


def events(app: FakeApplication) -> list[Any]:
    return [row.document for row in sorted(app.db.rows("events"), key=lambda row: row.sequence)]


def account(app: FakeApplication, account_id: str = "ba_1") -> BillingAccount:
    stored: BillingAccount = app.db.row("billing_accounts", account_id)
    return stored


def test_an_action_id_is_a_command_id_naming_the_action() -> None:
    action_id = new_action_id("retry-registration")
    assert action_id.startswith("op-retry-registration-")
    assert RetryRegistration(command_id=action_id, billing_account_id="ba_1").command_id


def test_retrying_a_pending_registration_records_the_event_and_sends_the_registration(
    app: FakeApplication,
) -> None:
    taken = retry_registration(
        RetryRegistration(command_id="op-1", billing_account_id="ba_1", reason="stripe is back"),
        app,
    )

    [sent] = app.published.published
    assert (sent.task_name, sent.command_id) == ("billing.register_account", "op-1")
    assert sent.payload["billing_account_id"] == "ba_1"
    [event] = events(app)
    assert event["type"] == "billing_account.registration_retried"
    assert event["command_id"] == "op-1"
    assert (taken.changed, taken.sent_command_id) == (True, "op-1")


def test_a_registered_or_offline_account_has_no_registration_to_retry(
    app: FakeApplication,
) -> None:
    mark_account_offline(MarkAccountOffline(command_id="op-1", billing_account_id="ba_1"), app)

    with pytest.raises(FailedPrecondition, match="no registration is pending"):
        retry_registration(RetryRegistration(command_id="op-2", billing_account_id="ba_1"), app)
    assert app.published.published == []


def test_an_unknown_account_is_not_found(app: FakeApplication) -> None:
    with pytest.raises(NotFound):
        retry_registration(RetryRegistration(command_id="op-1", billing_account_id="ba_x"), app)


def test_marking_a_pending_account_offline_makes_it_active_without_its_registration(
    app: FakeApplication,
) -> None:
    taken = mark_account_offline(
        MarkAccountOffline(command_id="op-1", billing_account_id="ba_1"), app
    )

    stored = account(app)
    assert stored.state is BillingAccountState.ACTIVE
    assert (stored.provider_id, stored.registration_key) == (None, None)
    assert [event["type"] for event in events(app)] == ["billing_account.marked_offline"]
    assert (taken.state, taken.changed) == ("active", True)


def test_marking_an_offline_account_offline_again_changes_nothing(app: FakeApplication) -> None:
    mark_account_offline(MarkAccountOffline(command_id="op-1", billing_account_id="ba_1"), app)

    again = mark_account_offline(
        MarkAccountOffline(command_id="op-2", billing_account_id="ba_1"), app
    )

    assert again.changed is False
    assert len(events(app)) == 1


def test_a_registered_account_cannot_be_marked_offline() -> None:
    app = FakeApplication()
    sub = subscribed(app)

    with pytest.raises(FailedPrecondition):
        mark_account_offline(
            MarkAccountOffline(command_id="op-1", billing_account_id=sub.account_id), app
        )


def test_retrying_a_retrying_command_publishes_it_again_under_its_own_id(
    app: FakeApplication,
) -> None:
    app.commands.accept("cmd_1", "billing.create_account", {"command_id": "cmd_1"})
    app.commands.begin("cmd_1", "billing.create_account", {"command_id": "cmd_1"}, source="api")
    app.commands.retrying("cmd_1", {"code": 14, "message": "stripe: 503", "details": []})

    taken = retry_command(RetryCommand(command_id="op-1", target_command_id="cmd_1"), app)

    [sent] = app.published.published
    assert (sent.task_name, sent.command_id) == ("billing.create_account", "cmd_1")
    [event] = events(app)
    assert event["type"] == "command.retry_requested"
    assert event["subject"] == {"type": "command", "id": "cmd_1"}
    assert event["data"]["status"] == "retrying"
    assert taken.sent_command_id == "cmd_1"


@pytest.mark.parametrize("status", [CommandStatus.SUCCEEDED, CommandStatus.FAILED])
def test_a_finished_command_is_not_retried_now(app: FakeApplication, status: CommandStatus) -> None:
    app.commands.accept("cmd_1", "users.enable", {"command_id": "cmd_1"})
    app.commands["cmd_1"].status = status

    with pytest.raises(FailedPrecondition, match=status.value):
        retry_command(RetryCommand(command_id="op-1", target_command_id="cmd_1"), app)
    assert app.published.published == []
    assert events(app) == []


def test_replaying_failed_commands_queues_and_publishes_each_under_its_own_id(
    app: FakeApplication,
) -> None:
    for command_id in ("cmd_1", "cmd_2"):
        app.commands.accept(command_id, "users.enable", {"command_id": command_id})
        app.commands[command_id].status = CommandStatus.FAILED

    taken = replay_commands(
        ReplayCommands(command_id="op-1", target_command_ids=["cmd_1", "cmd_2"]), app
    )

    assert [sent.command_id for sent in app.published.published] == ["cmd_1", "cmd_2"]
    assert [app.commands[c].status for c in ("cmd_1", "cmd_2")] == [CommandStatus.QUEUED] * 2
    assert [t.subject for t in taken] == ["command:cmd_1", "command:cmd_2"]


def test_a_replay_naming_a_rejected_command_replays_none_and_says_why(
    app: FakeApplication,
) -> None:
    app.commands.accept("cmd_1", "users.enable", {"command_id": "cmd_1"})
    app.commands["cmd_1"].status = CommandStatus.FAILED
    app.commands.accept("cmd_2", "users.enable", {"command_id": "cmd_2"})
    app.commands["cmd_2"].status = CommandStatus.REJECTED
    app.commands["cmd_2"].error = {"code": 5, "message": "user 'u_9' not found"}

    with pytest.raises(FailedPrecondition, match=r"was rejected .*user 'u_9' not found"):
        replay_commands(
            ReplayCommands(command_id="op-1", target_command_ids=["cmd_1", "cmd_2"]), app
        )
    assert app.published.published == []
    assert app.commands["cmd_1"].status is CommandStatus.FAILED


def test_a_replay_of_an_unknown_command_is_not_found(app: FakeApplication) -> None:
    with pytest.raises(NotFound):
        replay_commands(ReplayCommands(command_id="op-1", target_command_ids=["cmd_9"]), app)


def test_an_unknown_command_is_not_found(app: FakeApplication) -> None:
    with pytest.raises(NotFound):
        retry_command(RetryCommand(command_id="op-1", target_command_id="cmd_x"), app)


def test_skipping_a_scheduled_change_records_the_operators_reason() -> None:
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

    taken = skip_scheduled_change(
        SkipScheduledChange(command_id="op-1", change_id=change.id, reason="customer\nasked"),
        app,
    )

    with app.unit_of_work() as uow:
        skipped = uow.scheduled_changes.get(change.id)
    assert skipped is not None
    assert skipped.state is ChangeState.SKIPPED
    assert skipped.reason == "skipped_by_operator: customer asked"
    last = events(app)[-1]
    assert last["type"] == "subscription.plan_change.skipped"
    assert last["data"]["reason"] == "skipped_by_operator"
    assert (taken.state, taken.changed) == ("skipped", True)
    again = skip_scheduled_change(SkipScheduledChange(command_id="op-2", change_id=change.id), app)
    assert again.changed is False

"""Domain events on in-memory ports: which change writes which event, in its own transaction,
and how the relay publishes them (the stream, then one webhook delivery per endpoint)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from celery import Task

import tasks.users  # noqa: F401  (registers the tasks with every app)
from application.handlers.billing.accounts import create_billing_account
from application.handlers.events.relay import relay_events
from application.handlers.events.webhook_deliveries import DELIVER_WEBHOOK, WEBHOOKS_QUEUE
from application.handlers.operations.retention import prune_outbox
from application.handlers.subscriptions.plan_changes import change_subscription_plan
from application.handlers.subscriptions.scheduled_changes import apply_scheduled_change
from application.handlers.users import enable_user
from application.requests.sweeps import PruneOutbox, RelayEvents
from domain.billing.account_commands import CreateBillingAccount
from domain.billing.account_details import BillingDetails
from domain.errors import InvalidArgument, TransientError
from domain.events.catalog import EVENT_TYPES, parse_event
from domain.subscriptions.change_commands import ApplyScheduledChange, ChangeSubscriptionPlan
from domain.subscriptions.scheduled_changes import change_id_for
from domain.users import EnableUser
from domain.webhooks import DeliveryState, WebhookEndpoint
from tasks.runtime import CommandApp
from tests.support.fakes.application import FakeApplication
from tests.support.fakes.data import a_user, an_organization, subscribed

DETAILS = BillingDetails(
    name="Ada Lovelace", email="ada@acme.example", phone="+14155550100", tax_data=[]
)


@pytest.fixture
def app() -> FakeApplication:
    app = FakeApplication()
    app.db.seed(an_organization("org_1"), a_user("usr_1"))
    return app


def outbox(app: FakeApplication) -> list[dict[str, Any]]:
    """Every event written, in outbox order."""
    rows = sorted(app.db.rows("events"), key=lambda row: row.sequence)
    return [row.document for row in rows]


def types(app: FakeApplication) -> list[str]:
    return [event["type"] for event in outbox(app)]


def create(command_id: str = "c1", *, offline: bool = False) -> CreateBillingAccount:
    return CreateBillingAccount(
        command_id=command_id,
        org_id="org_1",
        billing_account_id="ba_1",
        account=DETAILS,
        offline=offline,
    )


def change(sub_id: str, command_id: str, **fields: Any) -> ChangeSubscriptionPlan:
    return ChangeSubscriptionPlan(
        command_id=command_id,
        org_id="org_1",
        billing_account_id="ba_1",
        subscription_id=sub_id,
        **fields,
    )


# --- what each change writes ------------------------------------------------------------------


def test_an_online_account_is_created_then_registered_with_its_customer(
    app: FakeApplication,
) -> None:
    create_billing_account(create(), app)

    created, registered = outbox(app)
    assert created["type"] == "billing_account.created"
    assert created["data"]["state"] == "pending"
    assert registered["type"] == "billing_account.registered"
    assert registered["data"]["state"] == "active"
    assert registered["data"]["provider_customer_id"].startswith("cus_")
    assert {created["command_id"], registered["command_id"]} == {"c1"}
    assert created["subject"] == registered["subject"] == {"type": "billing_account", "id": "ba_1"}


def test_an_offline_account_is_created_and_never_said_registered(app: FakeApplication) -> None:
    create_billing_account(create(offline=True), app)

    (created,) = outbox(app)
    assert created["type"] == "billing_account.created"
    assert created["data"]["offline"] is True
    assert created["data"]["state"] == "active"


def test_a_redelivered_create_command_writes_no_second_event(app: FakeApplication) -> None:
    create_billing_account(create(), app)
    create_billing_account(create(), app)

    assert types(app) == ["billing_account.created", "billing_account.registered"]


def test_a_registration_the_provider_refuses_is_an_event_naming_the_removed_account(
    app: FakeApplication,
) -> None:
    app.provider.fail_next(
        "create_customer",
        InvalidArgument.for_fields("Invalid phone for ada@acme.example", [("phone", "invalid")]),
    )

    with pytest.raises(InvalidArgument):
        create_billing_account(create(), app)

    created, failed = outbox(app)
    assert created["type"] == "billing_account.created"
    assert failed["type"] == "billing_account.registration_failed"
    assert failed["data"]["state"] == "removed"
    assert "ada@acme.example" not in json.dumps(failed["data"]["error"])


def test_events_carry_no_personal_data(app: FakeApplication) -> None:
    create_billing_account(create(), app)

    written = json.dumps(outbox(app))
    for personal in ("Ada", "Lovelace", "ada@acme.example", "4155550100"):
        assert personal not in written


def test_enabling_a_user_is_an_event_and_enabling_it_again_is_none(app: FakeApplication) -> None:
    enable_user(EnableUser(command_id="e1", user_id="usr_1"), app)
    enable_user(EnableUser(command_id="e2", user_id="usr_1"), app)

    (enabled,) = outbox(app)
    assert enabled["type"] == "user.enabled"
    assert enabled["data"] == {"user_id": "usr_1", "state": "enabled"}
    assert enabled["command_id"] == "e1"


def test_a_change_that_rolls_back_writes_no_event(app: FakeApplication) -> None:
    app.db.fail_next_commits(1)

    with pytest.raises(Exception, match="locked"):
        enable_user(EnableUser(command_id="e1", user_id="usr_1"), app)

    assert outbox(app) == []


def test_plan_changes_are_scheduled_replaced_canceled_and_made_now_in_order() -> None:
    app = FakeApplication()
    sub = subscribed(app)

    change_subscription_plan(change(sub.subscription_id, "c1", plan="team"), app)
    change_subscription_plan(change(sub.subscription_id, "c2", plan="scale"), app)
    change_subscription_plan(change(sub.subscription_id, "c3", cancel_upcoming_changes=True), app)
    change_subscription_plan(change(sub.subscription_id, "c4", plan="scale"), app)
    change_subscription_plan(change(sub.subscription_id, "c5", plan="team", immediate=True), app)

    assert types(app) == [
        "subscription.plan_change.scheduled",
        "subscription.plan_change.replaced",
        "subscription.plan_change.scheduled",
        "subscription.plan_change.canceled",
        "subscription.plan_change.scheduled",
        "subscription.plan_change.canceled",
        "subscription.plan_changed",
    ]
    events = outbox(app)
    assert events[1]["data"]["change_id"] == change_id_for("c1")
    assert events[1]["data"]["reason"] == "replaced"
    assert events[5]["data"]["reason"] == "superseded"
    assert events[6]["data"]["target_plan_id"] == "plan_team"
    assert events[6]["data"]["state"] == "applied"
    assert {event["subject"]["id"] for event in events} == {sub.subscription_id}


def test_a_due_change_applied_by_beat_is_applied_and_one_on_an_ended_subscription_skipped() -> None:
    app = FakeApplication()
    sub = subscribed(app, period_days=30)
    change_subscription_plan(change(sub.subscription_id, "c1", plan="team"), app)
    app.clock.advance(timedelta(days=31))

    apply_scheduled_change(
        ApplyScheduledChange(command_id="apply:1", change_id=change_id_for("c1")), app
    )
    change_subscription_plan(change(sub.subscription_id, "c2", plan="scale"), app)
    app.provider.cancel_subscription(sub.provider_id)
    app.clock.advance(timedelta(days=31))
    apply_scheduled_change(
        ApplyScheduledChange(command_id="apply:2", change_id=change_id_for("c2")), app
    )

    events = outbox(app)
    assert [event["type"] for event in events] == [
        "subscription.plan_change.scheduled",
        "subscription.plan_change.applied",
        "subscription.plan_change.scheduled",
        "subscription.plan_change.skipped",
    ]
    assert events[1]["command_id"] == "apply:1"
    assert events[3]["data"]["reason"] == "subscription_canceled"


def test_an_immediate_change_the_provider_refuses_is_skipped_and_what_it_superseded_stands_again() -> (  # noqa: E501
    None
):
    app = FakeApplication()
    sub = subscribed(app)
    change_subscription_plan(change(sub.subscription_id, "c1", plan="team"), app)
    app.provider.fail_next(
        "change_subscription_price",
        InvalidArgument.for_fields("No such price", [("price", "no such price")]),
    )

    with pytest.raises(InvalidArgument):
        change_subscription_plan(
            change(sub.subscription_id, "c2", plan="scale", immediate=True), app
        )

    assert types(app) == [
        "subscription.plan_change.scheduled",
        "subscription.plan_change.canceled",
        "subscription.plan_change.skipped",
        "subscription.plan_change.scheduled",
    ]
    assert outbox(app)[3]["data"]["change_id"] == change_id_for("c1")


def test_every_written_event_reads_back_as_its_catalog_type(app: FakeApplication) -> None:
    create_billing_account(create(), app)
    enable_user(EnableUser(command_id="e1", user_id="usr_1"), app)

    for document in outbox(app):
        event = parse_event(document)
        assert isinstance(event, EVENT_TYPES[document["type"]])
        assert event.model_dump(mode="json") == document


# --- a rejected or failed command -------------------------------------------------------------


def run(worker: CommandApp, task_name: str, **kwargs: Any) -> dict[str, Any]:
    task: Task[Any, Any] = worker.tasks[task_name]
    task.push_request(
        id="task-1",
        kwargs=kwargs,
        retries=0,
        delivery_info={"routing_key": "users"},
        is_eager=True,
        called_directly=False,
    )
    # As Celery's tracer: the task runs, then its ``after_return`` (which starts the relay).
    state, result = "FAILURE", None
    try:
        returned: dict[str, Any] = task.run(**kwargs)
        state, result = "SUCCESS", returned
        return returned
    finally:
        try:
            task.after_return(state, result, "task-1", (), kwargs, None)  # type: ignore[arg-type]
        finally:
            task.pop_request()


def test_a_rejected_command_is_an_event_carrying_its_error_and_is_relayed_at_once(
    worker: CommandApp, app: FakeApplication
) -> None:
    with pytest.raises(Exception, match=r"usr_nobody"):
        run(worker, EnableUser.TASK_NAME, command_id="e1", user_id="usr_nobody")

    (rejected,) = outbox(app)
    assert rejected["type"] == "command.rejected"
    assert rejected["subject"] == {"type": "command", "id": "e1"}
    assert rejected["data"]["command_type"] == "users.enable"
    assert rejected["data"]["error"]["code"] == 5
    assert app.stream.types == ["command.rejected"]


def test_a_failed_command_is_an_event_of_its_own_type_carrying_its_error(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.db.fail_next_commits(1, RuntimeError("a bug"))

    with pytest.raises(Exception, match=r"internal error"):
        run(worker, EnableUser.TASK_NAME, command_id="e1", user_id="usr_1")

    (failed,) = outbox(app)
    assert failed["type"] == "command.failed"
    assert failed["subject"] == {"type": "command", "id": "e1"}
    assert failed["data"]["error"]["code"] == 13
    assert app.stream.types == ["command.failed"]


def test_a_succeeded_command_relays_its_events_once_it_returned(
    worker: CommandApp, app: FakeApplication
) -> None:
    run(worker, EnableUser.TASK_NAME, command_id="e1", user_id="usr_1")

    assert app.stream.types == ["user.enabled"]
    assert app.db.rows("events")[0].published_at is not None


def test_a_command_whose_relay_fails_still_succeeds_and_leaves_its_event_for_beat(
    worker: CommandApp, app: FakeApplication
) -> None:
    app.stream.fail_next(ConnectionError("redis is down"))

    run(worker, EnableUser.TASK_NAME, command_id="e1", user_id="usr_1")

    assert app.commands["e1"].status.value == "succeeded"
    assert app.db.rows("events")[0].published_at is None
    assert relay_events(RelayEvents(), app) == 1
    assert app.stream.types == ["user.enabled"]


# --- the relay --------------------------------------------------------------------------------


def test_the_relay_publishes_in_outbox_order_once(app: FakeApplication) -> None:
    create_billing_account(create(), app)
    enable_user(EnableUser(command_id="e1", user_id="usr_1"), app)

    assert relay_events(RelayEvents(), app) == 3
    assert relay_events(RelayEvents(), app) == 0

    assert app.stream.types == [
        "billing_account.created",
        "billing_account.registered",
        "user.enabled",
    ]
    assert [entry.sequence for entry in app.stream.entries] == sorted(
        entry.sequence for entry in app.stream.entries
    )


def test_a_stream_that_fails_leaves_the_events_for_the_next_relay(app: FakeApplication) -> None:
    enable_user(EnableUser(command_id="e1", user_id="usr_1"), app)
    app.stream.fail_next(ConnectionError("redis is down"))

    with pytest.raises(ConnectionError):
        relay_events(RelayEvents(), app)

    assert not app.lock.held
    assert relay_events(RelayEvents(), app) == 1
    assert app.stream.types == ["user.enabled"]


def test_a_relay_finding_another_one_running_leaves_the_work_to_it(app: FakeApplication) -> None:
    enable_user(EnableUser(command_id="e1", user_id="usr_1"), app)
    app.lock.acquire()

    assert relay_events(RelayEvents(), app) == 0
    assert app.stream.entries == []


def test_the_relay_makes_one_claimed_delivery_per_endpoint_that_wants_the_event(
    app: FakeApplication,
) -> None:
    now = app.clock.now()
    everything = WebhookEndpoint.new("https://a.example/hook", ["*"], now)
    users_only = WebhookEndpoint.new("https://b.example/hook", ["user.enabled"], now)
    accounts_only = WebhookEndpoint.new("https://c.example/hook", ["billing_account.created"], now)
    disabled = WebhookEndpoint.new("https://d.example/hook", ["*"], now)
    disabled.disable("operator", now)
    app.db.seed(everything, users_only, accounts_only, disabled)
    enable_user(EnableUser(command_id="e1", user_id="usr_1"), app)

    relay_events(RelayEvents(), app)

    deliveries = app.db.rows("webhook_deliveries")
    assert sorted(delivery.endpoint_id for delivery in deliveries) == sorted(
        [everything.id, users_only.id]
    )
    assert {delivery.state for delivery in deliveries} == {DeliveryState.DELIVERING}
    sent = app.published.published
    assert {message.task_name for message in sent} == {DELIVER_WEBHOOK}
    assert {message.queue for message in sent} == {WEBHOOKS_QUEUE}
    assert sorted(message.payload["delivery_id"] for message in sent) == sorted(
        delivery.id for delivery in deliveries
    )


def test_a_delivery_message_that_cannot_go_is_left_to_the_sweep(app: FakeApplication) -> None:
    app.db.seed(WebhookEndpoint.new("https://a.example/hook", ["*"], app.clock.now()))
    enable_user(EnableUser(command_id="e1", user_id="usr_1"), app)
    app.published.fail_next(TransientError("broker down"))

    relay_events(RelayEvents(), app)

    (delivery,) = app.db.rows("webhook_deliveries")
    assert delivery.state is DeliveryState.DELIVERING  # its lease runs out, then a sweep takes it
    assert app.db.rows("events")[0].published_at is not None


def test_the_outbox_keeps_deliveries_and_events_as_long_as_the_command_log_keeps_commands(
    app: FakeApplication,
) -> None:
    app.db.seed(WebhookEndpoint.new("https://a.example/hook", ["*"], app.clock.now()))
    enable_user(EnableUser(command_id="e1", user_id="usr_1"), app)
    relay_events(RelayEvents(), app)
    with app.unit_of_work() as uow:
        (delivery,) = uow.webhook_deliveries.find()
        delivery.succeeded(200, app.clock.now())
        uow.webhook_deliveries.save(delivery)
        uow.commit()

    app.clock.advance(timedelta(days=29))
    assert prune_outbox(PruneOutbox(), app) == 0
    app.clock.advance(timedelta(days=2))
    assert prune_outbox(PruneOutbox(), app) == 1  # the succeeded delivery, after 30 days
    assert len(outbox(app)) == 1
    app.clock.advance(timedelta(days=60))
    assert prune_outbox(PruneOutbox(), app) == 1  # the event, after 90 days
    assert outbox(app) == []


def test_an_event_committed_while_the_relay_ran_is_published_by_it_not_left_for_beat(
    app: FakeApplication,
) -> None:
    """Its own command's relay found the lock taken: the running relay looks again once it
    lets go."""
    enable_user(EnableUser(command_id="e1", user_id="usr_1"), app)
    app.db.seed(a_user("usr_2"))
    release = app.lock.release

    def release_after_another_command() -> bool:
        if not app.stream.entries or len(app.stream.entries) > 1:
            return release()
        enable_user(EnableUser(command_id="e2", user_id="usr_2"), app)
        assert relay_events(RelayEvents(), app) == 0  # its relay finds the lock taken
        return release()

    app.lock.release = release_after_another_command  # type: ignore[method-assign]

    assert relay_events(RelayEvents(), app) == 2
    assert [entry.subject_key for entry in app.stream.entries] == ["user:usr_1", "user:usr_2"]


def test_a_change_the_provider_refuses_is_skipped_with_its_reason_code_not_the_providers_words() -> (  # noqa: E501
    None
):
    app = FakeApplication()
    sub = subscribed(app)
    app.provider.fail_next(
        "change_subscription_price",
        InvalidArgument.for_fields(
            "No such price for billing@acme.example", [("price", "no such price")]
        ),
    )

    with pytest.raises(InvalidArgument):
        change_subscription_plan(
            change(sub.subscription_id, "c1", plan="team", immediate=True), app
        )

    skipped = outbox(app)[-1]
    assert skipped["type"] == "subscription.plan_change.skipped"
    assert skipped["data"]["reason"] == "provider_rejected"

"""The webhook tasks as a worker runs them (a Celery app carrying in-memory ports), and how
the Celery app routes and schedules them."""

from __future__ import annotations

from typing import Any

import pytest
from celery import Task
from celery.exceptions import Retry

import tasks.webhooks
from application.handlers.events.relay import relay_events
from application.requests.sweeps import RelayEvents
from domain.events.users import UserEnabledEvent
from domain.ports.events import WebhookResponse
from domain.webhooks import DeliveryState, WebhookEndpoint
from tasks.runtime import CommandApp
from tests.support.environment import clear_settings
from tests.support.fakes.application import FakeApplication
from tests.support.fakes.data import a_user

TASK_MODULES = (tasks.webhooks,)  # registers the tasks with every Celery app
URL = "https://receiver.example/hook"


@pytest.fixture
def app() -> FakeApplication:
    return FakeApplication()


def run(worker: CommandApp, task_name: str, **kwargs: Any) -> Any:
    task: Task[Any, Any] = worker.tasks[task_name]
    task.push_request(id="t1", kwargs=kwargs, retries=0, is_eager=True, called_directly=False)
    try:
        return task.run(**kwargs)
    finally:
        task.pop_request()


def a_relayed_event(app: FakeApplication) -> dict[str, Any]:
    app.db.seed(WebhookEndpoint.new(URL, ["*"], app.clock.now()))
    with app.unit_of_work() as uow:
        uow.events.add(
            UserEnabledEvent.of(a_user(enabled=True), command_id=None, now=app.clock.now())
        )
        uow.commit()
    relay_events(RelayEvents(), app)
    [message] = app.published.published
    app.published.published.clear()
    return message.payload


def test_the_delivery_task_returns_what_it_did(worker: CommandApp, app: FakeApplication) -> None:
    message = a_relayed_event(app)

    assert run(worker, tasks.webhooks.DELIVER_WEBHOOK, **message) == "succeeded"
    assert run(worker, tasks.webhooks.DELIVER_WEBHOOK, **message) == "stale"


def test_a_receivers_failure_is_an_outcome_never_an_exception(
    worker: CommandApp, app: FakeApplication
) -> None:
    message = a_relayed_event(app)
    app.webhooks.answer(URL, WebhookResponse(status=None, error="connection refused"))

    assert run(worker, tasks.webhooks.DELIVER_WEBHOOK, **message) == "retrying"


def test_a_database_hiccup_retries_the_message_with_its_claim(
    worker: CommandApp, app: FakeApplication
) -> None:
    message = a_relayed_event(app)
    app.db.fail_next_commits(1)

    with pytest.raises(Retry):
        run(worker, tasks.webhooks.DELIVER_WEBHOOK, **message)
    assert run(worker, tasks.webhooks.DELIVER_WEBHOOK, **message) == "succeeded"
    [delivery] = app.db.rows("webhook_deliveries")
    assert delivery.state is DeliveryState.SUCCEEDED


def test_the_sweep_task_publishes_the_due_deliveries(
    worker: CommandApp, app: FakeApplication
) -> None:
    a_relayed_event(app)
    app.clock.advance(app.deliveries.lease * 2)

    assert run(worker, tasks.webhooks.SEND_DUE_DELIVERIES) == 1
    [message] = app.published.published
    assert (message.task_name, message.queue) == (tasks.webhooks.DELIVER_WEBHOOK, "webhooks")


def test_deliveries_go_to_the_webhooks_queue_and_beats_sweep_to_maintenance_at_its_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adapters.messaging.config import TASK_MODULES as APP_MODULES
    from adapters.messaging.config import celery_config
    from worker.celery_app import create_celery_app
    from worker.settings import Settings

    clear_settings(monkeypatch)
    settings = Settings(redis_url="redis://127.0.0.1:1/0", webhook_sweep_interval_seconds=0.5)
    sweep = celery_config(settings)["beat_schedule"]["send-due-webhook-deliveries"]
    app = create_celery_app(settings)

    assert "tasks.webhooks" in APP_MODULES
    assert (sweep["task"], sweep["schedule"]) == (tasks.webhooks.SEND_DUE_DELIVERIES, 0.5)
    assert sweep["options"]["expires"] >= 0.5
    router = app.amqp.router
    assert router.route({}, tasks.webhooks.DELIVER_WEBHOOK)["queue"].name == "webhooks"
    assert router.route({}, tasks.webhooks.SEND_DUE_DELIVERIES)["queue"].name == "maintenance"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"delivery_id": "whd_1"},
        {"delivery_id": "whd_1", "claim": 1, "extra": True},
        {"delivery_id": ["whd_1"], "claim": 1},
        {"delivery_id": "whd_1", "claim": True},
        {"delivery_id": "whd_1", "claim": "1"},
        {"delivery_id": "whd 1\nforged log line", "claim": 1},
    ],
    ids=["no-claim", "extra", "list-id", "bool-claim", "text-claim", "forged-id"],
)
def test_a_message_that_is_not_a_delivery_is_kept_as_a_dead_letter_and_raises_nothing(
    worker: CommandApp, app: FakeApplication, kwargs: dict[str, Any]
) -> None:
    a_relayed_event(app)

    assert run(worker, tasks.webhooks.DELIVER_WEBHOOK, **kwargs) == "refused"

    (dead,) = app.dead.letters
    assert dead.queue == "webhooks"
    assert dead.reason.startswith("not a webhook delivery")
    assert app.webhooks.sent == []

"""What Celery shows of a task message's arguments (worker/messaging/masking.py)."""

from __future__ import annotations

from typing import Any

from celery import Celery

from worker.messaging.masking import mask_argument_reprs, message_log_fields

KWARGS = {
    "command_id": "c-1",
    "org_id": "org_1",
    "account": {"name": "Ada Lovelace", "email": "ada@acme.example", "phone": "+442079460958"},
}


def test_our_publishers_write_masked_argument_reprs_and_sent_events() -> None:
    app = Celery("unit-tests", set_as_current=False, amqp="worker.messaging.masking:MaskingAMQP")
    try:
        message: Any = app.amqp.create_task_message(
            "task-1", "billing.create_account", (), KWARGS, create_sent_event=True
        )
    finally:
        app.close()

    for shown in (message.headers["kwargsrepr"], message.sent_event["kwargs"]):
        assert "ada@acme.example" not in shown
        assert "Ada Lovelace" not in shown
        assert "'a***@acme.example'" in shown
    assert message.body[1] == KWARGS  # the message itself is whole


def test_a_received_message_s_reprs_are_rewritten_whatever_its_publisher_wrote() -> None:
    headers: dict[str, Any] = {"id": "task-1", "task": "billing.create_account"}
    headers["kwargsrepr"] = repr(KWARGS)  # as a plain Celery client writes it

    mask_argument_reprs(headers, [], KWARGS)

    assert "ada@acme.example" not in headers["kwargsrepr"]
    assert "+44*******958" in headers["kwargsrepr"]
    assert headers["argsrepr"] == "[]"


def test_a_received_message_names_its_command_for_the_log() -> None:
    fields = message_log_fields({"id": "task-1", "task": "users.enable", "retries": 2}, KWARGS)

    assert fields == {
        "command_id": "c-1",
        "task": "users.enable",
        "task_id": "task-1",
        "attempt": 3,
        "org_id": "org_1",
    }
    assert message_log_fields({"id": "task-2", "task": "t"}, {})["command_id"] == "task-2"

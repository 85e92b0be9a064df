"""Log lines: JSON or console, each naming the command it is about, personal data masked."""

from __future__ import annotations

import io
import json
import logging
import sys
from typing import Any

import pytest

from adapters.observability.logs import configure, remember_message
from application import log_context


def logged(log_format: str, *args: Any, exc: BaseException | None = None, **extra: Any) -> str:
    stream = io.StringIO()
    configure(log_format=log_format, level="INFO", stream=stream)  # type: ignore[arg-type]
    logger = logging.getLogger("tests.log_lines")
    if exc is None:
        logger.warning(*args, extra=extra or None)
    else:
        try:
            raise exc
        except type(exc):
            logger.exception(*args)
    return stream.getvalue()


def a_command() -> dict[str, str | int]:
    return log_context.command_fields(
        command_id="c-1",
        task="billing.create_account",
        task_id="t-1",
        attempt=2,
        values={"org_id": "org_1", "billing_account_id": "ba_1", "account": {"name": "A"}},
    )


@pytest.mark.usefixtures("restore_root")
def test_a_json_line_is_one_object_with_the_command_it_is_about() -> None:
    log_context.bind(a_command())

    line = json.loads(logged("json", "registered %s", "ba_1"))

    assert line["message"] == "registered ba_1"
    assert (line["level"], line["logger"]) == ("WARNING", "tests.log_lines")
    assert line["time"]
    assert {key: line[key] for key in ("command_id", "task", "task_id", "attempt")} == {
        "command_id": "c-1",
        "task": "billing.create_account",
        "task_id": "t-1",
        "attempt": 2,
    }
    assert (line["org_id"], line["billing_account_id"]) == ("org_1", "ba_1")


@pytest.mark.usefixtures("restore_root")
def test_outside_a_command_a_line_names_none() -> None:
    line = json.loads(logged("json", "swept"))

    assert "command_id" not in line


@pytest.mark.usefixtures("restore_root")
def test_celery_s_line_about_a_message_it_took_names_that_message_s_command() -> None:
    remember_message("t-9", {"command_id": "c-9", "task": "users.enable", "user_id": "usr_1"})
    data = {"id": "t-9", "name": "users.enable"}

    line = json.loads(logged("json", "Task users.enable[t-9] received", data=data))

    assert (line["command_id"], line["task_id"], line["user_id"]) == ("c-9", "t-9", "usr_1")
    assert "data" not in line  # Celery's extra repeats the message


@pytest.mark.usefixtures("restore_root")
def test_an_id_field_that_is_not_shaped_as_an_id_is_left_out() -> None:
    fields = log_context.command_fields(
        command_id="c-1", task="t", task_id="t-1", attempt=1, values={"org_id": "ada@acme.example"}
    )

    assert "org_id" not in fields


@pytest.mark.usefixtures("restore_root")
def test_emails_and_phones_in_a_message_or_an_exception_are_masked() -> None:
    line = json.loads(
        logged("json", "failed", exc=ValueError("Invalid email: ada@acme.example, +442079460958"))
    )

    assert "ada@acme.example" not in line["exc_info"]
    assert "a***@acme.example" in line["exc_info"]
    assert "+44*******958" in line["exc_info"]
    assert "+442079460958" not in json.dumps(line)
    assert json.loads(logged("json", "to %s", "ada@acme.example"))["message"] == (
        "to a***@acme.example"
    )


@pytest.mark.usefixtures("restore_root")
def test_a_console_line_ends_with_the_command_and_escapes_control_characters() -> None:
    log_context.bind(a_command())

    output = logged("console", "name %s", "Acme\r\nFORGED")

    assert output.count("\n") == 1
    assert "name Acme\\r\\nFORGED [command_id=c-1 task=billing.create_account" in output


@pytest.mark.usefixtures("restore_root")
def test_a_json_line_holds_control_characters_escaped_by_json_itself() -> None:
    output = logged("json", "name %s", "Acme\r\nFORGED")

    assert output.count("\n") == 1
    assert json.loads(output)["message"] == "name Acme\r\nFORGED"


@pytest.mark.usefixtures("restore_root")
def test_an_exception_nothing_caught_is_a_json_line_too() -> None:
    stream = io.StringIO()
    configure(log_format="json", level="INFO", stream=stream)

    sys.excepthook(RuntimeError, RuntimeError("beat fell over"), None)

    line = json.loads(stream.getvalue())
    assert (line["level"], line["message"]) == ("CRITICAL", "uncaught exception")
    assert "RuntimeError: beat fell over" in line["exc_info"]


def test_a_publishers_task_name_or_id_that_is_not_an_id_cannot_reach_a_log_line() -> None:
    from application.log_context import command_fields

    fields = command_fields(
        command_id="c1",
        task="users.enable\n[forged] ada@example.com",
        task_id="ada@example.com",
        attempt=1,
        values={},
    )

    assert (fields["task"], fields["task_id"]) == ("(invalid)", "(invalid)")
    assert fields["command_id"] == "c1"

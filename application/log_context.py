"""What every log line of a running command carries: its id, task, attempt and the ids it
touches.

The runner (:func:`application.command_runner.run_command`) binds the fields when a delivery
starts; a logging filter (``adapters.observability.logs``) adds them to every record logged
meanwhile in that context, whoever logs it (the runner, a handler, the Stripe adapter, Celery's
own lines about the task). Only values shaped as ids are taken from a message: a foreign
publisher cannot put an email into a log line through an id field.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar, Token
from typing import Any

from domain.messages import is_id

ID_FIELDS = ("org_id", "billing_account_id", "subscription_id", "change_id", "user_id")
"""The ids of a command message that its log lines name, where the message has them."""

LogFields = Mapping[str, str | int]

_fields: ContextVar[LogFields | None] = ContextVar("billing_command_log_fields", default=None)


def command_fields(
    *, command_id: str, task: str, task_id: str, attempt: int, values: Mapping[str, Any]
) -> dict[str, str | int]:
    """The log fields of one delivery of a command: ``values`` are its message's fields (or
    the validated command's), of which the id fields shaped as ids are kept."""
    fields: dict[str, str | int] = {
        "command_id": shown_id(command_id),
        "task": shown_id(task),
        "task_id": shown_id(task_id),
        "attempt": attempt,
    }
    for name in ID_FIELDS:
        value = values.get(name)
        if is_id(value):
            fields[name] = value
    return fields


def shown_id(value: object) -> str:
    """``value`` if it is shaped as an id, else ``(invalid)``: a publisher's header cannot
    forge a log line or carry personal data into one."""
    return value if is_id(value, max_length=255) else "(invalid)"


def bind(fields: LogFields) -> None:
    """Let every record logged from now on in this context carry ``fields``."""
    _fields.set(dict(fields))


def unbind() -> None:
    _fields.set(None)


def begin_run() -> Token[LogFields | None]:
    """A task run begins with nothing bound, whatever an earlier run in this process left
    (a run that ended in a retry is not followed by Celery's ``after_return``): a sweep runs
    as no command, a command only as itself. Returns the token :func:`end_run` takes."""
    return _fields.set(None)


def end_run(token: Token[LogFields | None]) -> None:
    """The run is over, however it ended (success, failure, retry): what was bound before it
    is bound again."""
    try:
        _fields.reset(token)
    except ValueError:  # made in another context (cannot happen in a worker): start clean
        _fields.set(None)


def current() -> LogFields:
    """The fields bound in this context (empty outside a command)."""
    return _fields.get() or {}

"""Where Celery shows a command's arguments, they are masked (rules: ``domain.redaction``).

Celery's events (and so Flower) and its log lines show a task's arguments as the ``argsrepr``
and ``kwargsrepr`` headers of its message, written by whoever published it:

* a worker rewrites both headers of every message it takes, from the message's own arguments,
  before Celery reads them (:func:`mask_argument_reprs`, called by the guarded transport in
  ``adapters.messaging.broker``): a service publishing straight onto the queue may have written
  anything, or nothing, there;
* our own publishers (the API, beat's sweeps, a task's retry) write them masked
  (:class:`MaskingAMQP`, the ``amqp`` class of our Celery app), so their ``task-sent`` events
  show no personal data either.

Results are masked by the runner (``application.command_outcomes``); the result backend keeps
no arguments (``result_extended`` is off). ``BILLING_MASK_PERSONAL_DATA=false`` turns all of it off.
"""

from __future__ import annotations

from typing import Any

from celery.app.amqp import AMQP
from celery.utils.saferepr import saferepr

from application.log_context import command_fields
from domain.messages import is_id
from domain.redaction import redact

REPR_MAX_SIZE = 1024
"""As Celery's own ``argsrepr``/``kwargsrepr``."""


_SCALARS = frozenset({str, int, float, bool, type(None)})


def masked_repr(value: Any) -> str:
    """The repr Celery shows of a task's ``args`` or ``kwargs``, personal data masked."""
    shown = redact(value)
    # A command's arguments are most often a flat dict of ids and values, whose plain repr
    # is what ``saferepr`` writes (it differs only past three levels, for recursive or
    # unknown objects, and beyond its size): written at a twentieth of its cost, on every
    # message a worker takes and every one we publish.
    if _flat(shown):
        plain = repr(shown)
        if len(plain) <= REPR_MAX_SIZE:
            return plain
    return saferepr(shown, REPR_MAX_SIZE)


def _flat(value: Any) -> bool:
    kind = type(value)
    if kind is dict:
        return all(_plain(key) and _plain(item) for key, item in value.items())
    if kind is tuple or kind is list:
        return all(_plain(item) for item in value)
    return False


def _plain(value: Any) -> bool:
    """A scalar whose ``repr`` is ``saferepr``'s: ``saferepr`` writes unprintable characters
    and backslashes as they are, where ``repr`` escapes them, and quotes a string holding a
    single quote differently; such strings take ``saferepr``'s own path."""
    kind = type(value)
    return kind in _SCALARS and (
        kind is not str or (value.isprintable() and "\\" not in value and "'" not in value)
    )


def mask_argument_reprs(headers: dict[str, Any], args: Any, kwargs: Any) -> None:
    """Rewrite a task message's ``argsrepr`` and ``kwargsrepr`` headers from its arguments."""
    headers["argsrepr"] = masked_repr(args)
    headers["kwargsrepr"] = masked_repr(kwargs)


def message_log_fields(headers: dict[str, Any], kwargs: Any) -> dict[str, str | int]:
    """The log fields (``application.log_context``) of a task message, from its headers and
    keyword arguments: what Celery's lines about it carry before its command runs."""
    values = kwargs if isinstance(kwargs, dict) else {}
    task_id = str(headers.get("id"))
    given = values.get("command_id")
    retries = headers.get("retries")
    return command_fields(
        command_id=given if is_id(given, max_length=64) else task_id,
        task=str(headers.get("task")),
        task_id=task_id,
        attempt=(retries if isinstance(retries, int) else 0) + 1,
        values=values,
    )


class MaskingAMQP(AMQP):
    """Celery's message maker, writing masked ``argsrepr``/``kwargsrepr`` (those of the
    ``task-sent`` event too) unless a caller gave its own."""

    def as_task_v2(
        self,
        task_id: str,
        name: str,
        args: Any = None,
        kwargs: Any = None,
        *rest: Any,
        **options: Any,
    ) -> Any:
        if options.get("argsrepr") is None:
            options["argsrepr"] = masked_repr(args if args is not None else ())
        if options.get("kwargsrepr") is None:
            options["kwargsrepr"] = masked_repr(kwargs if kwargs is not None else {})
        return super().as_task_v2(task_id, name, args, kwargs, *rest, **options)

"""How every process logs: JSON or console lines, each naming its command, with personal data
masked and control characters escaped.

:func:`configure` gives the root logger of the API, a worker or beat one handler (uvicorn's and
Celery's loggers go through it) whose filters, in order:

* add the running command's fields to each record (:class:`AddCommandContext`: ``command_id``,
  ``task``, ``task_id``, ``attempt`` and the ids the command touches, bound by the runner in
  :mod:`application.log_context`; Celery's lines about a message it received name its task and
  command too);
* mask emails and international phone numbers in the message and the exception text
  (:class:`MaskPersonalData`, :mod:`domain.redaction`): call sites log ids, never payloads, and
  this catches what an exception's message may quote;
* in the console format, escape control characters (:class:`EscapeControlCharacters`): a
  billing name with CR LF, published on the queue, would otherwise start a line of its own,
  one that looks like ours (``\\r\\n`` → ``\\\\r\\\\n``; a traceback keeps its newlines).
  JSON encoding escapes them by itself.

The JSON format (``BILLING_LOG_FORMAT=json``, python-json-logger) writes one object a line:
``time``, ``level``, ``logger``, ``process``, ``message``, ``exc_info`` when there is one, and
the command's fields.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Collection, Mapping
from threading import Lock
from types import TracebackType
from typing import Any, Literal, TextIO

from pythonjsonlogger.json import JsonFormatter

from adapters.observability.sweeps import QuietSweeps
from application import log_context
from application.log_context import ID_FIELDS, LogFields
from domain.redaction import mask_text

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_BUT_NEWLINE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


def _escape(match: re.Match[str]) -> str:
    return match.group(0).encode("unicode_escape").decode("ascii")


def escape_controls(text: str, *, keep_newlines: bool = False) -> str:
    return (_CONTROL_BUT_NEWLINE if keep_newlines else _CONTROL).sub(_escape, text)


class EscapeControlCharacters(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format: keep it as is
            return True
        record.msg, record.args = escape_controls(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = escape_controls(record.exc_text, keep_newlines=True)
        return True


def install(*loggers: logging.Logger | None) -> None:
    """Escape control characters in every record the handlers of ``loggers`` (default: the
    root logger) write."""
    escaper = EscapeControlCharacters()
    for logger in loggers or (logging.getLogger(),):
        for handler in (logger or logging.getLogger()).handlers:
            if not any(isinstance(f, EscapeControlCharacters) for f in handler.filters):
                handler.addFilter(escaper)


CONTEXT_FIELDS = ("command_id", "task", "task_id", "attempt", *ID_FIELDS)
"""What a record of a command carries, besides its message."""

_JSON_FIELDS = frozenset(
    {"time", "level", "logger", "process", "message", "exc_info", "stack_info", *CONTEXT_FIELDS}
)

LogFormat = Literal["json", "console"]

_MESSAGES_REMEMBERED = 4096
_message_fields: OrderedDict[str, LogFields] = OrderedDict()
_message_fields_lock = Lock()


def remember_message(task_id: str, fields: LogFields) -> None:
    """The log fields of a message the worker just took (``adapters.messaging.broker``), for
    the lines Celery logs about it by its task id alone, outside the command's run
    ("received")."""
    with _message_fields_lock:
        _message_fields[task_id] = fields
        _message_fields.move_to_end(task_id)
        while len(_message_fields) > _MESSAGES_REMEMBERED:
            _message_fields.popitem(last=False)


def _remembered(task_id: str) -> LogFields:
    with _message_fields_lock:
        return _message_fields.get(task_id) or {}


class AddCommandContext(logging.Filter):
    """Adds the fields of the command being run (or that Celery's line is about) to a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields: dict[str, Any] = dict(log_context.current())
        # Celery's lines about one message (received, succeeded, failed) name it in ``data``.
        data = getattr(record, "data", None)
        if isinstance(data, Mapping) and isinstance(data.get("id"), str):
            task_id = data["id"]
            fields = {**_remembered(task_id), **fields}
            fields.setdefault("task_id", log_context.shown_id(task_id))
            if isinstance(data.get("name"), str):
                fields.setdefault("task", log_context.shown_id(data["name"]))
        for name, value in fields.items():
            if name in CONTEXT_FIELDS and not hasattr(record, name):
                setattr(record, name, value)
        return True


class MaskPersonalData(logging.Filter):
    """Masks emails and international phone numbers in a record's message (its arguments
    merged in) and exception text: defence in depth behind call sites that log ids only."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format: keep it as is
            return True
        record.msg, record.args = mask_text(message), None
        if record.exc_info:
            if not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            # Formatters (the JSON one included) then write the masked text, not a new one.
            record.exc_info = None
        if record.exc_text:
            record.exc_text = mask_text(record.exc_text)
        return True


class JsonLines(JsonFormatter):
    """One JSON object a line: the fields in ``_JSON_FIELDS``, nothing else a record holds
    (Celery's ``data`` extra repeats the message)."""

    def __init__(self) -> None:
        super().__init__(
            "%(levelname)s %(name)s %(processName)s %(message)s",
            rename_fields={"levelname": "level", "name": "logger", "processName": "process"},
            timestamp="time",
        )

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in log_data.items() if key in _JSON_FIELDS}


class ConsoleLines(logging.Formatter):
    """``[time: LEVEL/process] logger: message [command_id=… task=…]``."""

    def __init__(self) -> None:
        super().__init__("[%(asctime)s: %(levelname)s/%(processName)s] %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        shown = {name: getattr(record, name) for name in CONTEXT_FIELDS if hasattr(record, name)}
        if shown.get("task_id") == shown.get("command_id"):
            shown.pop("task_id", None)  # a command published by us: its task id is its id
        context = " ".join(f"{name}={value}" for name, value in shown.items())
        return f"{line} [{context}]" if context else line


ROUTED_TO_ROOT = ("uvicorn", "uvicorn.error", "celery", "celery.task")
"""Loggers that would otherwise write through handlers of their own."""


def configure(
    *,
    log_format: LogFormat,
    level: str | int,
    mask_personal_data: bool = True,
    stream: TextIO | None = None,
    quiet_tasks: Collection[str] = (),
) -> logging.Handler:
    """Make this process log through one handler on its root logger (see the module's
    docstring); returns it. ``quiet_tasks``: tasks whose routine lines are DEBUG lines
    (beat's sweeps)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLines() if log_format == "json" else ConsoleLines())
    if quiet_tasks:
        # First: a sweep's routine lines go to DEBUG (adapters/observability/sweeps.py).
        handler.addFilter(QuietSweeps(quiet_tasks))
    handler.addFilter(AddCommandContext())
    if mask_personal_data:
        handler.addFilter(MaskPersonalData())
    if log_format == "console":
        handler.addFilter(EscapeControlCharacters())
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(level)
    for name in ROUTED_TO_ROOT:
        routed = logging.getLogger(name)
        routed.handlers = []
        routed.propagate = True
    # The Stripe SDK logs request bodies (names, emails, addresses) at DEBUG, and two lines a
    # request at INFO (its URL, then its status): the provider-call record, the metrics and
    # the span keep each call already, and at Stripe's pace the two lines cost a worker more
    # CPU than the call's own record (docs/benchmarks.md, P5L).
    stripe_logger = logging.getLogger("stripe")
    stripe_logger.setLevel(max(logging.WARNING, root.getEffectiveLevel()))
    # httpx logs each request's whole URL at INFO: a webhook endpoint's may hold a token.
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(max(logging.WARNING, root.getEffectiveLevel()))
    # An exception nothing caught is a line in the same format, not a bare traceback.
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread
    return handler


def _log_uncaught(
    kind: type[BaseException], error: BaseException, traceback: TracebackType | None
) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, error, traceback)
        return
    logging.getLogger("uncaught").critical("uncaught exception", exc_info=(kind, error, traceback))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None or issubclass(args.exc_type, SystemExit):
        return
    logging.getLogger("uncaught").critical(
        "uncaught exception in thread %s",
        args.thread.name if args.thread else "?",
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )

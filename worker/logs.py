"""Log lines that data cannot forge: control characters are escaped in every record.

A billing name with CR LF, published on the queue, would otherwise start a line of its own
in a worker's log, one that looks like ours. The filter below rewrites each record's message
(its arguments merged in) with every C0 control character and DEL escaped (``\\r\\n`` →
``\\\\r\\\\n``), and the exception text likewise except the newlines between a traceback's
lines. It is installed on the handlers of every process: workers and beat (Celery's logging
signals), the API (its lifespan).
"""

from __future__ import annotations

import logging
import re
from typing import Any

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


def install_on_celery_logger(logger: logging.Logger, **_: Any) -> None:
    """For Celery's ``after_setup_logger`` and ``after_setup_task_logger`` signals."""
    install(logger, logging.getLogger())

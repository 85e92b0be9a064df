"""Fixtures of the unit tests."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator

import pytest

from adapters.observability.logs import ROUTED_TO_ROOT
from application import log_context
from tasks.runtime import CommandApp
from tests.support.fakes.application import FakeApplication


@pytest.fixture
def worker(app: FakeApplication) -> Iterator[CommandApp]:
    """A Celery app whose tasks run with the test module's ``app`` (never connected to a
    broker: a test runs its tasks by calling them)."""
    celery = CommandApp("unit-tests", application=lambda: app, set_as_current=False)
    yield celery
    celery.close()


@pytest.fixture
def restore_root() -> Iterator[None]:
    """Logging as it was before the test: ``configure`` sets the root logger, the levels of
    the SDKs' loggers, the routed loggers' handlers and the exception hooks; all are put back,
    so a later test's ``caplog`` sees what it would."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    others = [logging.getLogger(name) for name in ("stripe", "httpx", "httpcore", *ROUTED_TO_ROOT)]
    kept = [(other, other.level, other.handlers[:], other.propagate) for other in others]
    hooks = sys.excepthook, threading.excepthook
    yield
    root.handlers, root.level = handlers, level
    for other, other_level, other_handlers, propagate in kept:
        other.setLevel(other_level)
        other.handlers, other.propagate = other_handlers, propagate
    sys.excepthook, threading.excepthook = hooks
    log_context.unbind()

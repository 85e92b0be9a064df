"""Fixtures of the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tasks.runtime import CommandApp
from tests.support.fakes.application import FakeApplication


@pytest.fixture
def worker(app: FakeApplication) -> Iterator[CommandApp]:
    """A Celery app whose tasks run with the test module's ``app`` (never connected to a
    broker: a test runs its tasks by calling them)."""
    celery = CommandApp("unit-tests", application=lambda: app, set_as_current=False)
    yield celery
    celery.close()

"""Fixtures of the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from celery import Celery

from tests.support.stack import Stack


@pytest.fixture
def publisher(stack: Stack) -> Iterator[Celery]:
    """Another service's plain Celery client: it knows our contract, not our code."""
    app = Celery("another-service", broker=stack.redis_url)
    app.conf.update(task_serializer="json", accept_content=["json"])
    yield app
    app.close()

"""Fixtures of the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import stripe  # noqa: TID251 - the tests look at the emulator's objects through the SDK
from celery import Celery

from stripe_emulator import EmulatorAdmin
from tests.emulator.support import sdk_client
from tests.support.message_check import MessageCheck
from tests.support.stack import Stack
from tests.support.subscriptions import operator
from worker.bootstrap import Services

_CHECKS: dict[str, MessageCheck] = {}


@pytest.fixture(scope="module")
def ctx(stack: Stack) -> Services:
    """The operator's services on the stack (the handlers run in the test's process)."""
    return operator(stack)


@pytest.fixture
def api(stack: Stack) -> Iterator[httpx.Client]:
    """The stack's API, as the tests' client."""
    with stack.http() as client:
        yield client


@pytest.fixture
def sdk(stack: Stack) -> stripe.StripeClient:
    """The real Stripe SDK on the stack's emulator."""
    return sdk_client(stack.stripe_url)


@pytest.fixture
def emulator(stack: Stack) -> Iterator[EmulatorAdmin]:
    """The stack's emulator, through its admin API; the faults a test added end with it."""
    admin = stack.stripe
    yield admin
    admin.clear_faults()
    admin.close()


@pytest.fixture
def publisher(stack: Stack) -> Iterator[Celery]:
    """Another service's plain Celery client: it knows our contract, not our code."""
    app = Celery("another-service", broker=stack.redis_url)
    app.conf.update(task_serializer="json", accept_content=["json"])
    yield app
    app.close()


@pytest.fixture(autouse=True)
def messages_match_their_schemas(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test that runs a stack: every command that succeeded and every event its
    database recorded since the last check validates against its file under ``schemas/``
    (a failure names the message and the violated path)."""
    if "stack" not in request.fixturenames:
        yield
        return
    stack: Stack = request.getfixturevalue("stack")
    yield
    check = _CHECKS.setdefault(stack.database_url, MessageCheck(stack.sessions))
    problems = check.violations()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)

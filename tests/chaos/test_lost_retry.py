"""A later attempt's message lost with the broker's data (a Redis wiped, or what a failover's
old primary took with it): the command, ``retrying`` in the log, is sent again by the
stalled-command sweep, and goes on with the attempts it had left, not with a fresh budget.
So is a command whose worker died running it, its message lost: left ``running``, it is
published again once it has run past what the broker's visibility timeout allows."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from adapters.clock import SystemClock
from domain.messages import CommandStatus
from tests.support.emulator import start_emulator
from tests.support.records import create_organization
from tests.support.redis_server import RedisServer
from tests.support.stack import Stack, eventually, stack_env

pytestmark = pytest.mark.chaos

MAX_ATTEMPTS = 6
CUSTOMERS = "/v1/customers"


@pytest.fixture
def stack(backend: str, workdir: Path, make_database: Callable[[str], str]) -> Iterator[Stack]:
    """A stack with its own Redis (to be wiped) and Stripe emulator; nothing started."""
    name = f"lost_retry_{uuid.uuid4().hex[:8]}"
    base = workdir / name
    server = RedisServer(base / "redis")
    server.start()
    emulator = start_emulator(base / "stripe-emulator.log", "--rate-limit", "0")
    database_url = make_database(name)
    env = stack_env(
        database_url=database_url,
        redis_url=server.url,
        data_dir=base,
        stripe_url=emulator.url,
        BILLING_RETRY_MAX_ATTEMPTS=str(MAX_ATTEMPTS),
        # Long enough that the worker is stopped with attempts left to make.
        BILLING_RETRY_BASE_DELAY_SECONDS="4",
        BILLING_RETRY_MAX_DELAY_SECONDS="4",
        BILLING_STALLED_COMMAND_SECONDS="2",
    )
    system = Stack(
        name=name,
        database_url=database_url,
        redis_url=server.url,
        workdir=base,
        env=env,
        stripe_url=emulator.url,
    )
    try:
        yield system
    finally:
        system.stop()
        emulator.stop()
        server.stop()


def test_a_retry_lost_with_the_broker_s_data_runs_again_with_the_attempts_it_had_left(
    stack: Stack,
) -> None:
    stack.start_api()
    stack.client = stack.new_client()
    org = create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex[:8]}")
    with stack.stripe as stripe:
        stripe.add_fault("service_unavailable", f"POST {CUSTOMERS}")  # for good
    worker: subprocess.Popen[bytes] = stack.start_worker("w1", concurrency=1)
    with stack.http() as http:
        response = http.post(
            f"/v1beta1/organizations/{org.id}/billing",
            json={"body": {"name": "Acme Ltd", "email": "billing@acme.example"}},
            headers={"Prefer": "respond-async"},
        )
    assert response.status_code == 202, response.text
    command_id = response.headers["Command-Id"]
    eventually(lambda: stack.command(command_id).retries, what="the command's first retry recorded")

    # A warm shutdown puts the retry the worker held back on the queue; the wipe loses it.
    worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=60)
    before = stack.command(command_id)
    redis.Redis.from_url(stack.redis_url).flushall()
    assert before.status is CommandStatus.RETRYING
    assert before.attempts < MAX_ATTEMPTS

    stack.start_worker("w2", concurrency=1)
    stack.start_beat()
    failed = stack.finished(command_id, timeout=120)

    assert failed.status is CommandStatus.FAILED
    assert failed.attempts == MAX_ATTEMPTS
    assert [retry["attempt"] for retry in failed.retries] == list(range(1, MAX_ATTEMPTS))
    assert f"gave up after {MAX_ATTEMPTS} attempts" in str(failed.error)


def test_a_command_whose_worker_died_running_it_and_whose_message_was_lost_runs_again(
    stack: Stack,
) -> None:
    """The worker killed while Stripe is slow to answer its call, and the broker's data lost
    with it (its message, unacknowledged, was the only one): nothing hands the message back,
    so the stalled-command sweep publishes the command again once it has been ``running``
    past the visibility timeout and the stalled wait, and it succeeds (the fault schedules
    found such a command left running for good: seeds 24 and 500)."""
    stack.env["BILLING_BROKER_VISIBILITY_TIMEOUT_SECONDS"] = "4"
    stack.start_api()
    stack.client = stack.new_client()
    org = create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex[:8]}")
    with stack.stripe as stripe:
        stripe.add_fault("latency", f"POST {CUSTOMERS}", latency_ms=60_000, count=1)
    worker: subprocess.Popen[bytes] = stack.start_worker("w1", concurrency=1)
    with stack.http() as http:
        response = http.post(
            f"/v1beta1/organizations/{org.id}/billing",
            json={"body": {"name": "Acme Ltd", "email": "billing@acme.example"}},
            headers={"Prefer": "respond-async"},
        )
    assert response.status_code == 202, response.text
    command_id = response.headers["Command-Id"]
    eventually(
        lambda: stack.command(command_id).status is CommandStatus.RUNNING,
        what="the command running, its Stripe call slow",
    )

    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)
    redis.Redis.from_url(stack.redis_url).flushall()
    with stack.stripe as stripe:
        stripe.clear_faults()
    stack.start_worker("w2", concurrency=1)
    stack.start_beat()
    finished = stack.finished(command_id, timeout=120)

    assert finished.status is CommandStatus.SUCCEEDED, finished.error
    assert finished.attempts == 2  # the dead worker's run, then the one that took it over

"""The whole system on Redis Sentinel (``BILLING_REDIS_SENTINELS``): the API (its publisher
and its result listener) and a worker node (the guarded Sentinel transport, the result
backend) find the primary through the sentinel, and keep working, without a restart, once
the sentinel has promoted the replica of a primary killed with SIGKILL."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.records import create_user, user_state
from tests.support.sentinel import SentinelTopology
from tests.support.stack import Stack, stack_env
from worker.clock import SystemClock

pytestmark = pytest.mark.chaos


@pytest.fixture
def system(
    backend: str, workdir: Path, make_database: Callable[[str], str]
) -> Iterator[tuple[Stack, SentinelTopology]]:
    """A stack whose every process is configured with the sentinel only."""
    name = f"sentinel_{uuid.uuid4().hex[:8]}"
    base = workdir / name
    topology = SentinelTopology(base / "redis")
    topology.start()
    database_url = make_database(name)
    env = stack_env(
        database_url=database_url,
        # Only the test's own ping of the workers reads it (the primary at the start): the
        # processes' BILLING_REDIS_SENTINELS wins over it.
        redis_url=topology.primary_url(),
        data_dir=base,
        **topology.settings_env(),
    )
    stack = Stack(
        name=name,
        database_url=database_url,
        redis_url=env["BILLING_REDIS_URL"],
        workdir=base,
        env=env,
    )
    try:
        stack.start_worker()
        stack.start_api()
        stack.client = stack.new_client()
        yield stack, topology
    finally:
        stack.stop()
        topology.stop()


def enable(stack: Stack) -> tuple[str, str]:
    """Send an enable command for a new disabled user over HTTP: the user and command ids."""
    user = str(
        create_user(
            stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io", disabled=True
        ).id
    )
    with stack.http() as http:
        response = http.post(
            f"/v1beta1/users/{user}/enable", json={}, headers={"Prefer": "respond-async"}
        )
    assert response.status_code == 202, response.text
    return user, str(response.json()["command_id"])


def test_commands_run_before_and_after_the_sentinel_promotes_a_new_primary(
    system: tuple[Stack, SentinelTopology],
) -> None:
    stack, topology = system
    before_user, before = enable(stack)
    assert stack.finished(before).status.value == "succeeded"

    old = topology.kill_primary()
    topology.wait_for_new_primary(old)
    after_user, after = enable(stack)  # the same API and worker processes, never restarted

    assert stack.finished(after, timeout=60).status.value == "succeeded"
    assert [user_state(stack.sessions, user) for user in (before_user, after_user)] == [
        "enabled",
        "enabled",
    ]
    assert stack.group.exited() == []

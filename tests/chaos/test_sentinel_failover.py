"""The whole system on Redis Sentinel (``BILLING_REDIS_SENTINELS``): the API (its publisher
and its result listener) and a worker node (the guarded Sentinel transport, the result
backend) find the primary through the sentinel, and keep working, without a restart, once
the sentinel has promoted the replica of a primary killed with SIGKILL."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from adapters.clock import SystemClock
from tests.support.cli import billing_worker
from tests.support.records import create_user, user_state
from tests.support.stack import Stack, eventually, stack_env
from worker.launch.command_lines import flower_argv, flower_env
from worker.local.embedded import free_port
from worker.local.sentinel import SentinelTopology

pytestmark = pytest.mark.chaos

PUBLISHER = Path(__file__).resolve().parents[2] / "examples" / "publish_command_sentinel.py"


@pytest.fixture
def system(
    backend: str, workdir: Path, make_database: Callable[[str], str]
) -> Iterator[tuple[Stack, SentinelTopology, str]]:
    """A stack whose every process (the API, a worker node, Flower) is configured with the
    sentinel only."""
    name = f"sentinel_{uuid.uuid4().hex[:8]}"
    base = workdir / name
    topology = SentinelTopology(base / "redis")
    topology.start()
    database_url = make_database(name)
    primary_url = topology.primary_url()  # only the test's own ping of the workers uses it
    env = stack_env(
        database_url=database_url,
        redis_url=primary_url,
        data_dir=base,
        **topology.settings_env(),
    )
    del env["BILLING_REDIS_URL"]  # the processes know the sentinel only
    stack = Stack(
        name=name, database_url=database_url, redis_url=primary_url, workdir=base, env=env
    )
    try:
        stack.start_worker()
        stack.start_api()
        stack.client = stack.new_client()
        yield stack, topology, start_flower(stack)
    finally:
        stack.stop()
        topology.stop()


FLOWER_AUTH = ("admin", "flower-sentinel-test")


def start_flower(stack: Stack) -> str:
    """Flower of ``stack`` (its basic auth :data:`FLOWER_AUTH`); its URL."""
    port = free_port()
    stack.group.start(
        "flower",
        flower_argv("127.0.0.1", port, stack.workdir / "flower.db"),
        env={**stack.env, **flower_env(*FLOWER_AUTH)},
        log_path=stack.workdir / "flower.log",
    )
    return f"http://127.0.0.1:{port}"


def flower_queue_lengths(flower_url: str) -> dict[str, int] | None:
    """What Flower's ``/api/queues/length`` reads of the queues (through the sentinel)."""
    try:
        response = httpx.get(f"{flower_url}/api/queues/length", auth=FLOWER_AUTH, timeout=5)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    return {queue["name"]: queue["messages"] for queue in response.json()["active_queues"]}


def disabled_user(stack: Stack) -> str:
    return str(
        create_user(
            stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io", disabled=True
        ).id
    )


def enable(stack: Stack) -> tuple[str, str]:
    """Send an enable command for a new disabled user over HTTP: the user and command ids."""
    user = disabled_user(stack)
    with stack.http() as http:
        response = http.post(
            f"/v1beta1/users/{user}/enable", json={}, headers={"Prefer": "respond-async"}
        )
    assert response.status_code == 202, response.text
    return user, str(response.json()["command_id"])


def publish_from_another_service(stack: Stack, topology: SentinelTopology) -> tuple[str, str]:
    """Enable a new disabled user as another service would, with the documented recipe
    (examples/publish_command_sentinel.py): the user and command ids."""
    user = disabled_user(stack)
    settings = topology.settings_env()
    published = subprocess.run(
        [sys.executable, str(PUBLISHER), user],
        env={
            **os.environ,
            "REDIS_SENTINELS": settings["BILLING_REDIS_SENTINELS"],
            "REDIS_MASTER_NAME": settings["BILLING_REDIS_MASTER_NAME"],
            "REDIS_PASSWORD": settings["BILLING_REDIS_PASSWORD"],
            "REDIS_SENTINEL_PASSWORD": settings["BILLING_REDIS_SENTINEL_PASSWORD"],
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return user, published.stdout.strip()


def test_commands_run_before_and_after_the_sentinel_promotes_a_new_primary(
    system: tuple[Stack, SentinelTopology, str],
) -> None:
    stack, topology, flower = system
    assert "users" in eventually(lambda: flower_queue_lengths(flower), 30, "Flower's queues")
    before_user, before = enable(stack)
    assert stack.finished(before).status.value == "succeeded"

    old = topology.kill_primary()
    topology.wait_for_new_primary(old)
    after_user, after = enable(stack)  # the same API and worker processes, never restarted
    other_user, other = publish_from_another_service(stack, topology)
    listed = billing_worker("dead-letters", "list", env=stack.env)  # the command line too
    assert listed.status == 0, listed.stderr

    assert stack.finished(after, timeout=60).status.value == "succeeded"
    assert stack.finished(other, timeout=60).status.value == "succeeded"
    users = (before_user, after_user, other_user)
    assert [user_state(stack.sessions, user) for user in users] == ["enabled"] * 3
    assert "users" in eventually(lambda: flower_queue_lengths(flower), 30, "Flower's queues")
    assert stack.group.exited() == []

"""Killed workers and restarted Redis: every accepted command still runs, once."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adapters.clock import SystemClock
from tests.support.locks import user_row_locked
from tests.support.records import create_user, user_state
from tests.support.redis_server import RedisServer
from tests.support.stack import Stack, eventually, stack_env
from worker.celery_app import create_celery_app
from worker.settings import Settings

pytestmark = pytest.mark.chaos


@pytest.fixture
def system(
    backend: str, workdir: Path, make_database: Callable[[str], str]
) -> Iterator[tuple[Stack, RedisServer]]:
    """A stack with its own Redis, so that Redis can be restarted under it."""
    name = f"chaos_{uuid.uuid4().hex[:8]}"
    base = workdir / name
    redis = RedisServer(base / "redis")
    redis.start()
    database_url = make_database(name)
    env = stack_env(
        database_url=database_url,
        redis_url=redis.url,
        data_dir=base,
        BILLING_BROKER_VISIBILITY_TIMEOUT_SECONDS="4",
        BILLING_STALLED_COMMAND_SECONDS="2",
    )
    stack = Stack(name=name, database_url=database_url, redis_url=redis.url, workdir=base, env=env)
    try:
        stack.start_api()
        stack.client = stack.new_client()
        yield stack, redis
    finally:
        stack.stop()
        redis.stop()


def disabled_user(stack: Stack) -> str:
    return str(
        create_user(
            stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io", disabled=True
        ).id
    )


def enable_async(stack: Stack, user_id: str) -> str:
    with stack.http() as http:
        response = http.post(
            f"/v1beta1/users/{user_id}/enable", json={}, headers={"Prefer": "respond-async"}
        )
    assert response.status_code == 202, response.text
    return str(response.json()["command_id"])


def active_task_ids(stack: Stack) -> set[str]:
    app = create_celery_app(Settings(redis_url=stack.redis_url))
    try:
        active = app.control.inspect(timeout=0.5).active() or {}
    finally:
        app.close()
    return {task["id"] for tasks in active.values() for task in tasks}


@contextlib.contextmanager
def command_in_flight(
    stack: Stack, worker_name: str
) -> Iterator[tuple[subprocess.Popen[bytes], str, str]]:
    """A worker (one process) running an enable command, held mid-way by a row lock until
    the block ends: yields the worker, the command id and the user id."""
    user = disabled_user(stack)
    command_id = enable_async(stack, user)
    with user_row_locked(stack, user):
        worker = stack.start_worker(worker_name, concurrency=1)
        eventually(lambda: command_id in active_task_ids(stack), what="the task to be running")
        yield worker, command_id, user


def test_commands_queued_in_redis_survive_a_redis_restart(
    system: tuple[Stack, RedisServer],
) -> None:
    stack, redis = system
    users = [disabled_user(stack) for _ in range(10)]
    command_ids = [enable_async(stack, user) for user in users]  # no worker yet: they wait
    redis.stop()
    redis.start()
    stack.start_worker()
    for command_id in command_ids:
        assert stack.finished(command_id, timeout=30).status.value == "succeeded"
    assert {user_state(stack.sessions, user) for user in users} == {"enabled"}


def test_a_command_accepted_while_redis_is_down_runs_once_redis_is_back(
    system: tuple[Stack, RedisServer],
) -> None:
    stack, redis = system
    stack.start_worker()
    stack.start_beat()
    user = disabled_user(stack)
    redis.stop()
    command_id = enable_async(stack, user)
    assert stack.command(command_id).status.value == "queued"  # recorded, not on a queue
    redis.start()
    record = stack.finished(command_id, timeout=40)
    assert record.status.value == "succeeded"
    assert user_state(stack.sessions, user) == "enabled"


def test_a_worker_process_killed_mid_command_hands_it_back_to_the_queue(
    system: tuple[Stack, RedisServer],
) -> None:
    stack, _ = system
    with command_in_flight(stack, "w1") as (worker, command_id, user):
        children = subprocess.run(
            ["pgrep", "-P", str(worker.pid)], capture_output=True, text=True, check=False
        ).stdout.split()
        assert children, "the prefork pool has a child process"
        for pid in children:
            os.kill(int(pid), signal.SIGKILL)
    record = stack.finished(command_id, timeout=30)
    assert record.status.value == "succeeded"
    assert user_state(stack.sessions, user) == "enabled"


def test_a_whole_worker_killed_mid_command_is_redelivered_to_another_worker(
    system: tuple[Stack, RedisServer],
) -> None:
    stack, _ = system
    with command_in_flight(stack, "first") as (first, command_id, user):
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    stack.start_worker("second", concurrency=1)
    record = stack.finished(command_id, timeout=40)
    assert record.status.value == "succeeded"
    assert user_state(stack.sessions, user) == "enabled"

"""The benchmarks' own worker nodes (tests/benchmarks/workers/) run production's app without
one capability, each beside production's node doing the same command: P8 measures what the
capability costs only if its node really goes without it (production's settings have no
switch for it)."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from celery import Celery
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from adapters.clock import SystemClock
from adapters.db.migrate import upgrade
from application.handlers.events.relay import relay_events
from application.requests.sweeps import RelayEvents
from tests.support.events import STREAM, outbox_rows
from tests.support.records import create_user
from tests.support.stack import Stack, eventually, stack_of_its_own
from worker.bootstrap import build_services
from worker.settings import Settings

pytestmark = pytest.mark.e2e

BENCH_REDIS_DB = 0
"""No other stack of the tests uses database 0 of the shared Redis."""
WITHOUT_METRICS = "tests.benchmarks.workers.without_metrics"
WITHOUT_RELAY_AFTER_COMMAND = "tests.benchmarks.workers.without_relay_after_command"


@pytest.fixture(scope="module")
def stack(workdir: Path, redis_server: str) -> Iterator[Stack]:
    """A stack of its own on SQLite (what a node runs with does not depend on the database),
    no process started: each test starts and stops its nodes."""
    database_url = f"sqlite:///{workdir / 'bench_workers.db'}"
    upgrade(database_url)
    with stack_of_its_own(
        "bench_workers", workdir, database_url, f"{redis_server}/{BENCH_REDIS_DB}"
    ) as system:
        yield system


def enable_a_user(stack: Stack) -> str:
    """A disabled user enabled by a command on the queue, as another service sends it, once
    the command is recorded finished: the user's id."""
    user = create_user(
        stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@example.com", disabled=True
    )
    command_id = str(uuid.uuid4())
    client = Celery("another-service", broker=stack.redis_url, set_as_current=False)
    client.conf.update(task_serializer="json", accept_content=["json"])
    try:
        client.send_task(
            "users.enable", kwargs={"command_id": command_id, "user_id": user.id}, queue="users"
        )
    finally:
        client.close()
    assert stack.finished(command_id).status.value == "succeeded"
    return str(user.id)


def stop(node: subprocess.Popen[bytes]) -> None:
    """A warm shutdown of the node, waited for: each pool process runs the relay it asked for
    as it stops."""
    os.kill(node.pid, signal.SIGTERM)
    node.wait(30)


def published(stack: Stack, user_id: str) -> list[bool]:
    return [row.published_at is not None for row in outbox_rows(stack.sessions, f"user:{user_id}")]


def test_a_benchmark_node_without_the_relay_leaves_a_commands_events_for_beats_sweep(
    stack: Stack,
) -> None:
    node = stack.start_worker("bench-relay", app=WITHOUT_RELAY_AFTER_COMMAND)
    left = enable_a_user(stack)
    stop(node)

    assert published(stack, left) == [False]
    assert redis.Redis.from_url(stack.redis_url).xlen(STREAM) == 0

    services = build_services(Settings(database_url=stack.database_url, redis_url=stack.redis_url))
    assert relay_events(RelayEvents(), services) == 1  # what beat's relay sweep runs
    assert published(stack, left) == [True]

    production = stack.start_worker("production-relay")
    relayed = enable_a_user(stack)
    eventually(lambda: published(stack, relayed) == [True], 15, "the relay after the command")
    stop(production)


def test_a_benchmark_node_without_metrics_times_no_run_and_serves_no_exporter(
    stack: Stack,
) -> None:
    node = stack.start_worker("bench-metrics", app=WITHOUT_METRICS)
    enable_a_user(stack)
    stop(node)

    assert runs_timed(stack, "bench-metrics") == 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(stack.worker_metrics_urls["bench-metrics"], timeout=2)

    production = stack.start_worker("production-metrics")
    enable_a_user(stack)
    exported = eventually(
        lambda: _exported(stack.worker_metrics_urls["production-metrics"]), 15, "the exporter"
    )
    stop(production)
    assert "billing_command_run_seconds" in exported
    assert runs_timed(stack, "production-metrics") == 1


def runs_timed(stack: Stack, node: str) -> float:
    """The runs of enable-user commands the node's run timer recorded (Celery's signals
    reach it), added up from what its pool processes wrote to its metrics directory."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, str(stack.workdir / f"metrics-worker-{node}"))  # type: ignore[no-untyped-call]
    sample = registry.get_sample_value(
        "billing_command_run_seconds_count", {"type": "users.enable"}
    )
    return sample or 0.0


def _exported(url: str) -> str | None:
    try:
        return httpx.get(url, timeout=2).text
    except httpx.HTTPError:
        return None

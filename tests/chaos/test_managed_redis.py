"""Redis as the managed services run it, under load: every process is given one stable
address (a TCP forwarder standing in for the DNS name, tests/support/forwarder.py), and

* ``flip``: the service fails over as ElastiCache, Memorystore and Azure do: the replica is
  promoted, the name moved to it, and the old primary turned into a replica in place while
  every process holds connections to it (the worker's blocking read is answered
  ``UNBLOCKED``, its writes ``READONLY``);
* ``empty-restart``: the primary is restarted with an empty dataset (the queues, the
  unacknowledged messages, the clock's offset, the failover sweep's sighting: all gone).

Every accepted command ends ``succeeded``, nothing runs twice at Stripe (the emulator's request
log), no process exits or is restarted, the clock keeps its offset, events reach the stream
after the fault, and the time from the fault to commands completing again is printed and
bounded. The stalled-command sweep and the plan changes' leases are out of reach (300 s): what
the fault dropped comes back through the failover sweep, or the test times out.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from adapters.clock import CLOCK_OFFSET_KEY, ShiftableClock, SystemClock
from tests.chaos.test_failover_under_load import (
    API_PROCESSES,
    Load,
    answered_synchronously,
    customers_created,
    pids,
    publish_until_accepted,
    send_http,
    statuses,
)
from tests.support.emulator import start_emulator
from tests.support.events import STREAM, events_on_stream
from tests.support.managed_redis import ManagedRedis
from tests.support.records import create_organization, create_user, user_state
from tests.support.stack import Stack, eventually, stack_env
from tests.support.subscriptions import DAY

pytestmark = pytest.mark.chaos

HTTP_COMMANDS = int(os.environ.get("CHAOS_MANAGED_HTTP_COMMANDS", "60"))
"""Billing accounts created over HTTP (each creates a Stripe customer)."""
RAW_COMMANDS = int(os.environ.get("CHAOS_MANAGED_RAW_COMMANDS", "30"))
"""Users enabled by another service's raw publishes."""
RESUME_BOUND_SECONDS = 30.0
"""From the fault to commands completing again (the issue's target)."""
DRAIN_SECONDS = 90.0


@dataclass
class System:
    stack: Stack
    redis: ManagedRedis


@pytest.fixture
def system(backend: str, workdir: Path, make_database: Callable[[str], str]) -> Iterator[System]:
    """A stack (its own database and Stripe emulator, a shiftable clock) whose processes know
    only the managed Redis's stable address; nothing started but the servers."""
    name = f"managed_{uuid.uuid4().hex[:8]}"
    base = workdir / name
    managed = ManagedRedis(base / "redis")
    managed.start()
    emulator = start_emulator(base / "stripe-emulator.log", "--rate-limit", "0")
    database_url = make_database(name)
    env = stack_env(
        database_url=database_url,
        redis_url=managed.url,
        data_dir=base,
        stripe_url=emulator.url,
        BILLING_SHIFTABLE_CLOCK="true",
        # Out of reach: only the failover sweep can bring back what the fault dropped.
        BILLING_STALLED_COMMAND_SECONDS="300",
        BILLING_SCHEDULED_CHANGE_LEASE_SECONDS="300",
        BILLING_HTTP_WAIT_TIMEOUT_SECONDS="3",
    )
    stack = Stack(
        name=name,
        database_url=database_url,
        redis_url=managed.url,
        workdir=base,
        env=env,
        stripe_url=emulator.url,
    )
    try:
        yield System(stack, managed)
    finally:
        stack.stop()
        emulator.stop()
        managed.stop()
        if keep := os.environ.get("CHAOS_KEEP_LOGS"):  # the processes' logs, to read after
            shutil.copytree(base, Path(keep) / name, ignore=shutil.ignore_patterns("*.db*"))


def send_raw(url: str, load: Load, users: list[str], fault: threading.Event) -> None:
    """Another service's raw publishes, on the same stable address (a third before the
    fault), each again with the same id until the broker takes it."""
    app = Celery(broker=url)
    app.conf.broker_transport_options = {"socket_timeout": 5, "socket_connect_timeout": 5}
    try:
        for index, user in enumerate(users):
            if index == len(users) // 3:
                fault.wait(timeout=60)
            command_id = str(uuid.uuid4())
            publish_until_accepted(app, command_id, user)
            with load.lock:
                load.users[command_id] = user
            load.accept(command_id)
    finally:
        app.close()


def republish_missing(stack: Stack, url: str, load: Load) -> None:
    """The other service's recipe: a raw command not in the log once the fault is over may
    have been dropped with the old primary's dataset (no log of ours holds it): publish it
    again, with the same id."""
    app = Celery(broker=url)
    try:

        def all_logged() -> bool:
            missing = [command for command in load.users if stack.commands.get(command) is None]
            for command in missing:
                publish_until_accepted(app, command, load.users[command])
            if missing:
                print(f"\nrepublished {len(missing)} raw commands missing from the log")
            return not missing

        eventually(all_logged, timeout=60, interval=5, what="the raw commands in the log")
    finally:
        app.close()


def completed_after(stack: Stack, load: Load, since: float) -> bool:
    """Whether a command accepted after ``since`` (``time.monotonic()``) succeeded."""
    with load.lock:
        after = [command for command, at in load.accepted.items() if at > since]
    return statuses(stack, after)["succeeded"] > 0


def stream_written_since(url: str, wall_ms: int) -> bool:
    """Whether the event stream holds an entry written after ``wall_ms`` (its id's time)."""
    newest: Any = redis.Redis.from_url(url, socket_timeout=2).xrevrange(STREAM, count=1)
    return bool(newest) and int(newest[0][0].decode().split("-")[0]) > wall_ms


@pytest.mark.timeout(240)
@pytest.mark.parametrize("fault", ["flip", "empty-restart"])
def test_a_managed_redis_failing_over_or_restarting_empty_under_load_loses_doubles_and_stops_nothing(  # noqa: E501
    system: System, fault: str, backend: str
) -> None:
    stack, managed = system.stack, system.redis
    orgs = [
        create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex[:12]}").id
        for _ in range(HTTP_COMMANDS)
    ]
    users = [
        str(
            create_user(
                stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@x.io", disabled=True
            ).id
        )
        for _ in range(RAW_COMMANDS)
    ]
    stack.start_worker("w1", concurrency=3)
    stack.start_beat()
    stack.start_api(processes=API_PROCESSES)  # each process has its result listener
    stack.client = stack.new_client()
    stack.advance_time(32 * DAY)  # an offset the fault must not take back
    offset = ShiftableClock(managed.url).offset()
    eventually(lambda: managed.replicated(CLOCK_OFFSET_KEY), what="the offset on the replica")
    before = pids(stack)

    load = Load()
    started = threading.Event()
    faulted: dict[str, float] = {}
    with ThreadPoolExecutor(2) as pool:
        http = pool.submit(send_http, stack, load, orgs, started)
        raw = pool.submit(send_raw, managed.url, load, users, started)
        eventually(
            lambda: len(load.accepted) >= (HTTP_COMMANDS + RAW_COMMANDS) // 4,
            timeout=60,
            what="the load under way",
        )
        wall_ms = int(time.time() * 1000)
        faulted["at"] = time.monotonic()
        if fault == "flip":
            managed.flip()
        else:
            managed.restart_empty()
        faulted["over"] = time.monotonic()
        started.set()
        eventually(
            lambda: completed_after(stack, load, faulted["over"]),
            timeout=RESUME_BOUND_SECONDS,
            interval=0.2,
            what="a command accepted after the fault to complete",
        )
        resumed = time.monotonic() - faulted["at"]
        http.result()
        raw.result()
    if fault == "flip":
        managed.wait_for_replica()
    republish_missing(stack, managed.url, load)

    accepted = list(load.accepted)
    try:
        eventually(
            lambda: statuses(stack, accepted)["succeeded"] == len(accepted),
            timeout=DRAIN_SECONDS,
            interval=0.5,
            what="every accepted command to succeed",
        )
    except AssertionError:
        raise AssertionError(
            f"not every accepted command succeeded: {statuses(stack, accepted)}"
        ) from None
    drained = time.monotonic() - faulted["at"]
    print(
        f"\n[{fault} on {backend}] fault took {faulted['over'] - faulted['at']:.1f} s; "
        f"time to resume (a command accepted after the fault completed): {resumed:.1f} s; "
        f"all {len(accepted)} accepted commands done {drained:.1f} s after the fault; "
        f"refused: {dict(load.refused)}"
    )
    assert resumed < RESUME_BOUND_SECONDS

    # Nothing refused but requests that met the fault, and most were accepted.
    assert len(load.users) == RAW_COMMANDS
    assert len(load.orgs) >= HTTP_COMMANDS * 0.8, dict(load.refused)
    # Nothing doubled at Stripe: one customer per accepted account.
    customers = customers_created(stack)
    assert {customers[org] for org in load.orgs.values()} == {1}
    assert {user_state(stack.sessions, user) for user in load.users.values()} == {"enabled"}
    # The clock kept its offset; the relay and its lock went on writing the stream.
    assert ShiftableClock(managed.url).offset() == offset
    eventually(lambda: stream_written_since(managed.url, wall_ms), what="events after the fault")
    # Every event of the load is on the stream, those published before the fault too: what a
    # failover or an empty restart took from it, the failover sweep appended again.
    expected = {f"user.enabled {user}" for user in load.users.values()} | {
        f"billing_account.created {command_id}" for command_id in load.orgs
    }
    eventually(
        lambda: expected <= events_on_stream(redis.Redis.from_url(managed.url, socket_timeout=2)),
        what="every event of the load on the stream",
    )
    # Every API process's listener came through: synchronous requests are answered.
    assert all(answered_synchronously(stack) for _ in range(4 * API_PROCESSES))
    # No process restarted, none exited, and the worker never gave up.
    assert stack.group.exited() == []
    assert pids(stack) == before
    assert managed.exited() == []
    assert "Unrecoverable error" not in (stack.workdir / "worker-w1.log").read_text()

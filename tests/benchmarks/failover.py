"""The failover's time to resume: under a steady load of HTTP commands, the time from a fault
of Redis to commands completing again. Ours: the primary of a Sentinel topology (a primary, a
replica and three sentinels: ``worker/local/sentinel.py``, as ``up --ha`` runs it) SIGKILLed,
every process finding Redis through the sentinels. Baseline, same run, same load: the one
Redis of a plain stack SIGKILLed and started again at once on its port and data (what a
supervisor restarting it gives at best)."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import select

from adapters.db.models import CommandRow
from tests.benchmarks.figures import Figure, Target
from tests.benchmarks.harness import BENCH_SETTINGS, BenchContext, seed_users
from tests.support.redis_server import RedisServer
from tests.support.stack import Stack, stack_env
from worker.local.sentinel import SentinelTopology

RESUME_TARGET_SECONDS = 30.0
"""The issue's bound on the time to resume after a failover."""
QUIET_SECONDS = 10.0
"""After the load: no accepted command finishing for this long, the rest wait for the sweep."""


@dataclass
class Load:
    """Commands sent at a steady rate (``Prefer: respond-async``), each enabling a user."""

    sent: list[tuple[str, float]] = field(default_factory=list)
    """(command id, when it was answered) for every accepted command."""
    statuses: Counter[int] = field(default_factory=Counter)
    stop: threading.Event = field(default_factory=threading.Event)


def steady_load(stack: Stack, users: list[str], rate: float, load: Load) -> None:
    """Send ``rate`` commands a second (one connection, requests paced, never bunched up to
    catch up after a slow answer) until ``load.stop`` or no user is left."""
    interval = 1 / rate
    with stack.http() as http:
        next_at = time.monotonic()
        for user in users:
            if load.stop.is_set():
                return
            next_at = max(next_at + interval, time.monotonic())
            try:
                response = http.post(
                    f"/v1beta1/users/{user}/enable",
                    json={},
                    headers={"Prefer": "respond-async"},
                )
            except httpx.HTTPError:
                load.statuses[0] += 1
            else:
                load.statuses[response.status_code] += 1
                if response.status_code in (200, 202):
                    load.sent.append((response.headers["Command-Id"], time.time()))
            time.sleep(max(0.0, next_at - time.monotonic()))


@dataclass
class Resumed:
    seconds: float
    details: dict[str, Any]


def time_to_resume(
    stack: Stack, users: list[str], rate: float, fault: Callable[[], object], settle: float
) -> Resumed:
    """Run the load, let ``settle`` seconds pass, make the ``fault``, and wait until a command
    accepted after it has completed (at most 120 s): the time from the fault to the first
    such command's ``finished_at``. Then, the load stopped, wait until the accepted commands
    stop finishing (none for :data:`QUIET_SECONDS`, at most 120 s): the details say when the
    last one finished, counted from the fault, and how many are left ``queued``: those whose
    publish met the fault (or whose message the failover dropped) and that neither beat's
    failover watch nor, later, the stalled-command sweep (``BILLING_STALLED_COMMAND_SECONDS``,
    300 s: not within the benchmark) has published again."""
    load = Load()
    sender = threading.Thread(target=steady_load, args=(stack, users, rate, load))
    sender.start()
    try:
        time.sleep(settle)  # the load's steady state before the fault, not a condition
        fault_at = datetime.now(UTC)
        fault()
        deadline = time.monotonic() + 120
        first: datetime | None = None
        while first is None and time.monotonic() < deadline:
            first = _first_finished_after(stack, fault_at)
            time.sleep(0.05)
        time.sleep(settle)  # the load after the resumption, for the counts below
    finally:
        load.stop.set()
        sender.join()
    seconds = (first - fault_at).total_seconds() if first is not None else float("nan")
    accepted = [command for command, _ in load.sent]
    deadline = time.monotonic() + 120
    unfinished, changed_at = -1, time.monotonic()
    while time.monotonic() < min(deadline, changed_at + QUIET_SECONDS):
        now_unfinished = _unfinished(stack, accepted)
        if now_unfinished != unfinished:
            unfinished, changed_at = now_unfinished, time.monotonic()
        if not unfinished:
            break
        time.sleep(0.2)
    last = _last_finished(stack, accepted)
    return Resumed(
        seconds,
        {
            "drained_seconds": round((last - fault_at).total_seconds(), 2) if last else None,
            "left_queued": unfinished,
            "command_statuses": _statuses(stack, accepted),
            "accepted": len(load.sent),
            "http_statuses": {str(status): n for status, n in sorted(load.statuses.items())},
            "rate_per_second": rate,
        },
    )


def _first_finished_after(stack: Stack, moment: datetime) -> datetime | None:
    with stack.sessions() as session:
        finished = session.scalars(
            select(CommandRow.finished_at)
            .where(CommandRow.created_at >= moment, CommandRow.finished_at.is_not(None))
            .order_by(CommandRow.finished_at)
            .limit(1)
        ).first()
    return finished.replace(tzinfo=finished.tzinfo or UTC) if finished is not None else None


def _count(stack: Stack, command_ids: list[str], *where: Any) -> int:
    total = 0
    with stack.sessions() as session:
        for start in range(0, len(command_ids), 500):
            batch = command_ids[start : start + 500]
            total += len(
                session.scalars(select(CommandRow.id).where(CommandRow.id.in_(batch), *where)).all()
            )
    return total


def _unfinished(stack: Stack, command_ids: list[str]) -> int:
    return _count(stack, command_ids, CommandRow.finished_at.is_(None))


def _last_finished(stack: Stack, command_ids: list[str]) -> datetime | None:
    last: datetime | None = None
    with stack.sessions() as session:
        for start in range(0, len(command_ids), 500):
            batch = command_ids[start : start + 500]
            moment = session.scalars(
                select(CommandRow.finished_at)
                .where(CommandRow.id.in_(batch), CommandRow.finished_at.is_not(None))
                .order_by(CommandRow.finished_at.desc())
                .limit(1)
            ).first()
            if moment is not None:
                moment = moment.replace(tzinfo=moment.tzinfo or UTC)
                last = moment if last is None else max(last, moment)
    return last


def _statuses(stack: Stack, command_ids: list[str]) -> dict[str, int]:
    """How the accepted commands stand at the end (those still ``queued`` wait for the
    stalled-command sweep: their publish met the fault)."""
    counted: Counter[str] = Counter()
    with stack.sessions() as session:
        for start in range(0, len(command_ids), 500):
            batch = command_ids[start : start + 500]
            counted.update(
                session.scalars(select(CommandRow.status).where(CommandRow.id.in_(batch)))
            )
    return dict(counted)


@contextmanager
def _stack(ctx: BenchContext, name: str, redis_url: str, env: dict[str, str]) -> Iterator[Stack]:
    base = ctx.directory(name)
    database_url = ctx.database("sqlite", f"bench_{name}")
    full_env = stack_env(
        database_url=database_url, redis_url=redis_url, data_dir=base, **BENCH_SETTINGS, **env
    )
    if "BILLING_REDIS_SENTINELS" in env:
        del full_env["BILLING_REDIS_URL"]  # the processes know the sentinels only
    stack = Stack(name, database_url, redis_url, base, full_env)
    try:
        stack.start_worker()
        stack.start_beat()  # its failover watch publishes again what a failover dropped
        stack.start_api()
        stack.client = stack.new_client()
        yield stack
    finally:
        stack.stop()


def failover(ctx: BenchContext) -> list[Figure]:
    """Time to resume after a Sentinel failover ÷ after a single Redis's immediate restart,
    the same steady load of enable-user commands over HTTP on SQLite."""
    rate = ctx.size(5, 20)
    settle = ctx.size(2, 5)
    count = int(rate * (settle * 2 + 130))

    server = RedisServer(ctx.directory("failover-single") / "redis")
    server.start()
    try:
        with _stack(ctx, "failover_single", server.url, {}) as stack:
            users = seed_users(stack, count)

            def restart() -> None:
                server.kill()
                server.start()

            baseline = time_to_resume(stack, users, rate, restart, settle)
    finally:
        server.stop()

    topology = SentinelTopology(
        ctx.directory(f"failover-sentinel-{uuid.uuid4().hex[:6]}"), sentinel_count=3
    )
    topology.start()
    try:
        with _stack(
            ctx, "failover_sentinel", topology.primary_url(), topology.settings_env()
        ) as stack:
            users = seed_users(stack, count)
            ours = time_to_resume(stack, users, rate, topology.kill_primary, settle)
    finally:
        topology.stop()
    return [
        Figure(
            "failover",
            "time to resume after the primary's SIGKILL, Sentinel (3 sentinels)",
            ours.seconds,
            "s",
            baseline.seconds,
            "after one Redis's SIGKILL and immediate restart",
            Target("<", RESUME_TARGET_SECONDS, on="value", text=f"< {RESUME_TARGET_SECONDS:g} s"),
            shown="difference",
            details={"ours": ours.details, "baseline": baseline.details},
        )
    ]

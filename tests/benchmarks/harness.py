"""What every benchmark of ``tests/benchmarks/run.py`` runs on: one embedded Redis (a
database each), a throwaway PostgreSQL cluster when asked, our system as separate processes
(``tests.support.stack.Stack``: workers, beat, the API) and, as the baseline, a bare Celery
worker with our Celery settings (``tests.benchmarks.bare_celery``).

Clients publish as another service would (a plain Celery client and the message contract);
throughput is counted end to end, until every command is recorded (ours) or every task is
acknowledged (the bare worker's).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import redis
from celery import Celery
from sqlalchemy import case, func, select

from adapters.clock import SystemClock
from adapters.db.migrate import upgrade
from adapters.db.models import CommandRow
from adapters.db.uow import SqlUnitOfWork
from domain.rules import new_id
from domain.users import NewUser, User
from tests.benchmarks import bare_celery
from tests.support.emulator import EmulatorProcess, start_emulator
from tests.support.postgres import PostgresCluster, start_cluster
from tests.support.stack import Stack, stack_env
from worker.local.embedded import ProcessGroup, start_redis, wait_until

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("sqlite", "postgresql")
BENCH_SETTINGS = {
    # Production's defaults where the tests' settings would change what is measured.
    "BILLING_LOG_LEVEL": "INFO",
    "BILLING_HTTP_WAIT_TIMEOUT_SECONDS": "60",
    "BILLING_BROKER_VISIBILITY_TIMEOUT_SECONDS": "600",
    "BILLING_STALLED_COMMAND_SECONDS": "300",
}
# The Celery settings of ours the bare baseline runs with too (the transport guard, the
# queues, the routes and beat's schedule are ours: their cost is part of what is measured).
BARE_SETTINGS = (
    "task_serializer",
    "result_serializer",
    "accept_content",
    "result_accept_content",
    "enable_utc",
    "timezone",
    "task_acks_late",
    "task_reject_on_worker_lost",
    "worker_prefetch_multiplier",
    "broker_transport_options",
    "broker_connection_retry_on_startup",
    "task_track_started",
    "task_send_sent_event",
    "worker_send_task_events",
    "result_extended",
    "result_expires",
)


@dataclass
class BenchContext:
    """One run of the command: its directory, its Redis, its PostgreSQL (started on first
    use) and whether sizes are the ``--quick`` ones."""

    quick: bool
    workdir: Path
    redis_base: str
    group: ProcessGroup
    _cluster: PostgresCluster | None = None
    _next_db: int = 0

    @classmethod
    @contextlib.contextmanager
    def open(cls, quick: bool) -> Iterator[BenchContext]:
        with tempfile.TemporaryDirectory(prefix="billing-bench-") as tmp:
            workdir = Path(tmp)
            group = ProcessGroup()
            url = start_redis(group, workdir / "redis", log_path=workdir / "redis.log")
            context = cls(quick, workdir, url.rsplit("/", 1)[0], group)
            try:
                yield context
            finally:
                if context._cluster is not None:
                    context._cluster.stop()
                group.stop()

    def size(self, quick: int, full: int) -> int:
        return quick if self.quick else full

    def redis_url(self) -> str:
        """A Redis database of its own (emptied), 1 to 15 in turn."""
        self._next_db = self._next_db % 15 + 1
        url = f"{self.redis_base}/{self._next_db}"
        redis.Redis.from_url(url).flushdb()
        return url

    def postgres(self) -> PostgresCluster:
        if self._cluster is None:
            self._cluster = start_cluster()
        return self._cluster

    def database(self, backend: str, name: str) -> str:
        """A new migrated database on ``backend``."""
        if backend == "sqlite":
            url = f"sqlite:///{self.workdir / f'{name}.db'}"
        else:
            url = self.postgres().create_database(name)
        upgrade(url)
        return url

    def directory(self, name: str) -> Path:
        path = self.workdir / name
        path.mkdir(parents=True, exist_ok=True)
        return path


@contextlib.contextmanager
def system(
    ctx: BenchContext,
    name: str,
    backend: str = "sqlite",
    *,
    database_url: str | None = None,
    emulator: bool = False,
    settings: dict[str, str] | None = None,
) -> Iterator[Stack]:
    """Our system on ``backend`` (a new database unless ``database_url``), no process started
    yet, with ``BILLING_*`` ``settings`` over the benchmarks' own; with ``emulator``, Stripe
    is an emulator of its own (no rate limit)."""
    base = ctx.directory(name)
    url = database_url or ctx.database(backend, f"bench_{name}")
    stripe: EmulatorProcess | None = None
    if emulator:
        stripe = start_emulator(base / "stripe-emulator.log", "--rate-limit", "0")
    redis_url = ctx.redis_url()
    env = stack_env(
        database_url=url,
        redis_url=redis_url,
        data_dir=base,
        stripe_url=stripe.url if stripe else None,
        **{**BENCH_SETTINGS, **(settings or {})},
    )
    stack = Stack(name, url, redis_url, base, env, stripe_url=stripe.url if stripe else "")
    try:
        yield stack
    finally:
        stack.stop()
        if stripe is not None:
            stripe.stop()


def another_service(redis_url: str) -> Celery:
    """A plain Celery client that knows our message contract, not our code."""
    app = Celery("another-service", broker=redis_url, set_as_current=False)
    app.conf.update(task_serializer="json", accept_content=["json"])
    return app


def seed_users(stack: Stack, count: int) -> list[str]:
    """``count`` disabled users, written in batches (the repository, not the handler: one
    transaction per thousand)."""
    now = SystemClock().now()
    ids: list[str] = []
    for start in range(0, count, 1000):
        batch = [
            User.new(new_id("usr"), NewUser(email=f"{uuid.uuid4().hex}@x.io", disabled=True), now)
            for _ in range(min(1000, count - start))
        ]
        with SqlUnitOfWork(stack.sessions) as uow:
            for user in batch:
                uow.users.add(user)
            uow.commit()
        ids.extend(user.id for user in batch)
    return ids


@dataclass
class Throughput:
    """``count`` commands (or tasks) done in ``seconds``, and the CPU the workers spent."""

    count: int
    seconds: float
    failed: int = 0
    worker_cpu_seconds: float = 0.0
    machine_busy: float = float("nan")
    """The share of the machine's CPU time (every core) spent busy meanwhile, by anyone."""

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else float("nan")

    @property
    def cpu_ms_per_command(self) -> float:
        return 1000 * self.worker_cpu_seconds / self.count if self.count else float("nan")

    def details(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "seconds": round(self.seconds, 4),
            "failed": self.failed,
            "worker_cpu_ms_per_command": round(self.cpu_ms_per_command, 3),
            "machine_busy": round(self.machine_busy, 3),
        }


def enable_users(stack: Stack, user_ids: Sequence[str], worker_pids: Sequence[int]) -> Throughput:
    """Publish an enable-user command per user, as another service would, and wait until
    every one is recorded finished; the time runs from the first publish to the last
    ``finished_at``."""
    publisher = another_service(stack.redis_url)
    cpu_before, machine_before = cpu_seconds(worker_pids), machine_ticks()
    began = datetime.now(UTC)
    started = time.perf_counter()
    try:
        for user_id in user_ids:
            publisher.send_task(
                "users.enable",
                kwargs={"command_id": str(uuid.uuid4()), "user_id": user_id},
                queue="users",
            )
    finally:
        publisher.close()
    finished, failed, last = _wait_finished(stack, "users.enable", began, len(user_ids))
    cpu = cpu_seconds(worker_pids) - cpu_before
    seconds = (last - began).total_seconds() if last else time.perf_counter() - started
    return Throughput(finished, seconds, failed, cpu, busy_since(machine_before))


def _wait_finished(
    stack: Stack, task: str, since: datetime, count: int, timeout: float = 600.0
) -> tuple[int, int, datetime | None]:
    """Finished and failed commands of ``task`` created since ``since``, and the last
    finish, once ``count`` finished (or at the timeout)."""
    row = CommandRow
    query = select(
        func.count(),
        func.sum(case((row.status == "failed", 1), else_=0)),
        func.max(row.finished_at),
    ).where(
        row.type == task,
        row.created_at >= since,
        row.status.in_(("succeeded", "failed")),
        # Implied by the above; it lets the poll read the index on (status, updated_at): on
        # a log of millions the poll would otherwise scan it, and take the cores measured.
        row.updated_at >= since,
    )
    deadline = time.monotonic() + timeout
    while True:
        with stack.sessions() as session:
            finished, failed, last = session.execute(query).one()
        if finished >= count or time.monotonic() > deadline:
            return int(finished), int(failed or 0), last
        time.sleep(0.05)


def wait_commands(stack: Stack, task: str, since: datetime, count: int) -> tuple[int, int, float]:
    """Finished and failed commands of ``task`` since ``since``, and the seconds from
    ``since`` to the last finish."""
    finished, failed, last = _wait_finished(stack, task, since, count)
    return finished, failed, (last - since).total_seconds() if last else float("nan")


@dataclass
class BareCelery:
    """A bare Celery worker (the baseline) and a client of it."""

    redis_url: str
    process: Any
    client: Celery
    pids: list[int] = field(default_factory=list)

    def noops(self, count: int) -> Throughput:
        """Publish ``count`` no-op tasks and wait until the queue is empty and nothing is
        left unacknowledged (late acknowledgement: after each task ran)."""
        connection = redis.Redis.from_url(self.redis_url)
        pids = process_tree(self.process.pid)
        cpu_before, machine_before = cpu_seconds(pids), machine_ticks()
        started = time.perf_counter()
        for _ in range(count):
            self.client.send_task(bare_celery.NOOP, queue=bare_celery.QUEUE)
        deadline, empty_twice = started + 600, 0
        while time.perf_counter() < deadline and empty_twice < 2:
            # Twice in a row: a message taken off the list is marked unacknowledged a moment
            # later, not in the same step.
            empty = not connection.llen(bare_celery.QUEUE) and not connection.hlen("unacked")
            empty_twice = empty_twice + 1 if empty else 0
            time.sleep(0.005)
        seconds = time.perf_counter() - started
        connection.close()
        cpu = cpu_seconds(pids) - cpu_before
        return Throughput(count, seconds, 0, cpu, busy_since(machine_before))

    def round_trip(self) -> float:
        """Seconds from publishing a no-op task to holding its result."""
        started = time.perf_counter()
        self.client.send_task(bare_celery.NOOP, queue=bare_celery.QUEUE).get(timeout=30)
        return time.perf_counter() - started


def bare_config(redis_url: str) -> dict[str, Any]:
    from adapters.messaging.config import celery_config
    from worker.settings import Settings

    config = celery_config(Settings(redis_url=redis_url))
    return {name: config[name] for name in BARE_SETTINGS}


@contextlib.contextmanager
def bare_worker(ctx: BenchContext, concurrency: int = 2) -> Iterator[BareCelery]:
    """The baseline: a bare Celery worker of ``concurrency`` processes, started with our
    worker's command-line options (task events, no mingle or gossip, INFO logs)."""
    redis_url = ctx.redis_url()
    config = bare_config(redis_url)
    name = f"bare-{uuid.uuid4().hex[:8]}"
    group = ProcessGroup()
    process = group.start(
        name,
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tests.benchmarks.bare_celery",
            "worker",
            "-E",
            "--without-mingle",
            "--without-gossip",
            "-Q",
            bare_celery.QUEUE,
            "-c",
            str(concurrency),
            "-n",
            f"{name}@%h",
            "-l",
            "INFO",
        ],
        env={"BENCH_BROKER_URL": redis_url, "BENCH_CELERY_CONFIG": json.dumps(config)},
        log_path=ctx.workdir / f"{name}.log",
        cwd=ROOT,
    )
    client = Celery("bench-client", broker=redis_url, backend=redis_url, set_as_current=False)
    client.conf.update(config)
    try:
        wait_until(lambda: _answers(client, name), 60, "the bare Celery worker")
        bare = BareCelery(redis_url, process, client)
        bare.noops(concurrency * 10)  # every pool process has run a task
        yield bare
    finally:
        client.close()
        group.stop()


def _answers(app: Celery, prefix: str) -> bool:
    replies = app.control.ping(timeout=0.5)
    return any(name.startswith(prefix) for reply in replies or [] for name in reply)


def worker_processes(stack: Stack) -> list[int]:
    """The pids of every worker node's main and pool processes."""
    return [
        pid
        for child in stack.group.children
        if child.name.startswith("worker-")
        for pid in process_tree(child.process.pid)
    ]


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants, parents first."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                found.extend(process_tree(int(child)))
    return found


def pss_mib(pid: int) -> float:
    """Proportional set size: private pages, plus shared ones divided among sharers."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pids: Sequence[int]) -> float:
    """User and system CPU the processes have used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def machine_ticks() -> tuple[int, int]:
    """Busy and total CPU ticks of the whole machine so far (``/proc/stat``)."""
    numbers = [int(n) for n in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = numbers[3] + numbers[4]  # idle + iowait
    return sum(numbers) - idle, sum(numbers)


def busy_since(before: tuple[int, int]) -> float:
    busy, total = machine_ticks()
    return (busy - before[0]) / (total - before[1]) if total > before[1] else float("nan")


def since_now() -> datetime:
    """A moment just before now, in the application's clock (UTC)."""
    return datetime.now(UTC) - timedelta(milliseconds=5)

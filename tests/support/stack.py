"""The system under test, as separate processes: Celery workers, beat and the API."""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import redis
from sqlalchemy.orm import Session, sessionmaker

from adapters.clock import REFRESH_SECONDS, ShiftableClock, SystemClock
from adapters.db.api_clients import NewClient, create_client
from adapters.db.command_log import SqlCommandLog
from adapters.db.command_records import CommandRecord
from adapters.db.engine import session_factory
from domain.permissions import ALL_SCOPES, Grant
from stripe_emulator import DEFAULT_API_KEY, EmulatorAdmin
from worker.launch.command_lines import (
    WORKER_APP,
    api_argv,
    api_metrics_env,
    celery_beat_argv,
    celery_worker_argv,
    worker_metrics_env,
)
from worker.local.embedded import ProcessGroup, free_port, wait_until

T = TypeVar("T")

# Fast retries so that tests about backoff take seconds, not minutes.
TEST_SETTINGS = {
    "BILLING_RETRY_MAX_ATTEMPTS": "4",
    "BILLING_RETRY_BASE_DELAY_SECONDS": "0.2",
    "BILLING_RETRY_MAX_DELAY_SECONDS": "2",
    "BILLING_BROKER_VISIBILITY_TIMEOUT_SECONDS": "30",
    "BILLING_BEAT_INTERVAL_SECONDS": "0.5",
    "BILLING_SCHEDULED_CHANGES_INTERVAL_SECONDS": "0.5",
    "BILLING_SCHEDULED_CHANGE_LEASE_SECONDS": "10",
    "BILLING_STALLED_COMMAND_SECONDS": "3",
    "BILLING_HTTP_WAIT_TIMEOUT_SECONDS": "15",
    "BILLING_DATABASE_LOCK_TIMEOUT_SECONDS": "2",
    "BILLING_LOG_LEVEL": "INFO",
    # Short enough for the tests of slow clients to wait it out.
    "BILLING_API_READ_TIMEOUT_SECONDS": "3",
    # Every test talks from 127.0.0.1: the per-source throttle is a unit test's business.
    "BILLING_AUTH_MAX_FAILURES_PER_SOURCE": "100000",
    "BILLING_STRIPE_WEBHOOK_MAX_FAILURES_PER_SOURCE": "100000",
    # Tests and benchmarks send bursts from one client: each client's share of the workers is
    # tests/chaos/test_fair_share.py's business.
    "BILLING_CLIENT_COMMANDS_PER_SECOND": "0",
    "BILLING_CLIENT_TOTAL_COMMANDS_PER_SECOND": "0",
    # The tests' webhook receivers listen on 127.0.0.1.
    "BILLING_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",
    # Stripe events the tests sign themselves (tests/support/stripe_events.py).
    "BILLING_STRIPE_WEBHOOK_SECRETS": "whsec_tests_first,whsec_tests_second",
    # The sweep stays out of the way of tests that count Stripe's reads.
    "BILLING_RECONCILE_INTERVAL_SECONDS": "3600",
}


def stack_env(
    *,
    database_url: str,
    redis_url: str,
    data_dir: Path,
    stripe_url: str | None = None,
    **overrides: str,
) -> dict[str, str]:
    """The ``BILLING_*`` environment of a test stack's processes (``TEST_SETTINGS`` plus
    ``overrides``); with ``stripe_url``, Stripe is that emulator."""
    env = {
        **TEST_SETTINGS,
        "BILLING_DATABASE_URL": database_url,
        "BILLING_REDIS_URL": redis_url,
        "BILLING_DATA_DIR": str(data_dir),
    }
    if stripe_url is not None:
        env["BILLING_STRIPE_API_KEY"] = DEFAULT_API_KEY
        env["BILLING_STRIPE_API_BASE"] = stripe_url
    env.update(overrides)
    return env


MOST_PATIENCE = 4.0
"""The most a wait stretches on a busy machine (a condition never met still fails)."""


def patience() -> float:
    """How much slower than on a quiet machine things run now: the runnable processes per
    core over the last minute, at least 1 (a quiet machine) and at most :data:`MOST_PATIENCE`."""
    runnable_per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return min(max(runnable_per_core, 1.0), MOST_PATIENCE)


def eventually(
    check: Callable[[], T | None],
    timeout: float = 15.0,
    what: str = "condition",
    interval: float = 0.05,
) -> T:
    """Poll until ``check`` returns something truthy; fail with ``what`` otherwise.

    ``timeout`` is what the wait may take on a quiet machine: on a busy one (another suite on
    the same cores) each second counts for less, as the machine's load says (:func:`patience`).
    """
    started = last = time.monotonic()
    waited = 0.0
    while True:
        value = check()
        if value:
            return value
        now = time.monotonic()
        waited += (now - last) / patience()
        last = now
        if waited > timeout:
            raise AssertionError(
                f"timed out after {timeout}s (quiet-machine seconds; {now - started:.0f}s"
                f" of wall time) waiting for {what}"
            )
        time.sleep(interval)


@dataclass
class Stack:
    """One running system: its database, its Redis database, its processes."""

    name: str
    database_url: str
    redis_url: str
    workdir: Path
    env: dict[str, str]
    group: ProcessGroup = field(default_factory=ProcessGroup)
    api_url: str = ""
    stripe_url: str = ""
    client: NewClient | None = None
    worker_metrics_urls: dict[str, str] = field(default_factory=dict)
    """Each worker node's exporter (by the name it was started with)."""
    beat_metrics_url: str = ""

    @property
    def stripe(self) -> EmulatorAdmin:
        """The admin API of this stack's Stripe emulator."""
        return EmulatorAdmin(self.stripe_url)

    def advance_time(self, seconds: float) -> None:
        """Move the emulator's clock, then the application's, as ``clock advance`` does
        (``worker/local/stack_clock.py``): once ours moves, beat may apply a change that fell
        due, and Stripe must have renewed by then (the other order raced the failover test
        into a late correction: three writes for one change)."""
        with self.stripe as stripe:
            stripe.advance_clock(seconds)
        ShiftableClock(self.redis_url).advance(seconds)
        time.sleep(REFRESH_SECONDS + 0.1)  # every process has read the new offset

    @property
    def sessions(self) -> sessionmaker[Session]:
        return session_factory(self.database_url)

    @property
    def commands(self) -> SqlCommandLog:
        return SqlCommandLog(self.sessions, SystemClock())

    def command(self, command_id: str) -> CommandRecord:
        record = self.commands.get(command_id)
        assert record is not None, f"no command {command_id}"
        return record

    def finished(self, command_id: str, timeout: float = 15.0) -> CommandRecord:
        """The command's record once it succeeded or failed."""

        def done() -> CommandRecord | None:
            record = self.commands.get(command_id)
            return record if record is not None and record.status.is_terminal else None

        return eventually(done, timeout, f"command {command_id} to finish")

    def start_worker(
        self,
        name: str = "w1",
        concurrency: int = 2,
        loglevel: str = "INFO",
        app: str = WORKER_APP,
        run_in: Sequence[str] = (),
        extra_env: dict[str, str] | None = None,
    ) -> Any:
        """A worker node of ``concurrency`` processes running ``app`` (a module's Celery app:
        production's unless a benchmark composes its own), once it answers a ping. ``run_in``
        goes before its command line (``ip netns exec NAME``: the node runs in that network
        namespace; its metrics exporter is then only reachable there)."""
        metrics_port = free_port()
        process = self.group.start(
            f"worker-{name}",
            [
                *run_in,
                *celery_worker_argv(
                    concurrency=concurrency,
                    hostname=f"{name}-{self.name}@%h",
                    loglevel=loglevel,
                    app=app,
                ),
            ],
            env={
                **self.env,
                **worker_metrics_env(metrics_port, self.workdir / f"metrics-worker-{name}"),
                **(extra_env or {}),
            },
            log_path=self.workdir / f"worker-{name}.log",
        )
        self.worker_metrics_urls[name] = f"http://127.0.0.1:{metrics_port}/metrics"
        wait_until(lambda: self._worker_answers(f"{name}-{self.name}"), 30, f"worker {name}")
        return process

    def _worker_answers(self, prefix: str) -> bool:
        from kombu.pidbox import Mailbox

        from worker.celery_app import create_celery_app
        from worker.settings import Settings

        app = create_celery_app(Settings(redis_url=self.redis_url))
        try:
            # A connection of its own and a mailbox without a producer pool: Celery's control
            # publishes through kombu's pool, shared by every app of the process, whose
            # connection may still reach a primary since demoted in place (a managed Redis's
            # failover), where a broadcast's PUBLISH is taken and heard by nobody.
            mailbox = Mailbox(
                app.conf.control_exchange, type="fanout", accept=["json"], serializer="json"
            )
            with app.connection_for_write() as connection:
                bound: Any = mailbox(connection)  # a copy bound to the connection (typed Node)
                replies = bound._broadcast("ping", reply=True, timeout=0.5)
        finally:
            app.close()
        return any(name.startswith(prefix) for reply in replies or [] for name in reply)

    def start_beat(self, name: str = "beat", extra_env: dict[str, str] | None = None) -> Any:
        metrics_port = free_port()
        process = self.group.start(
            name,
            celery_beat_argv(self.workdir / f"{name}-schedule"),
            env={
                **self.env,
                **(extra_env or {}),
                "BILLING_BEAT_METRICS_PORT": str(metrics_port),
            },
            log_path=self.workdir / f"{name}.log",
        )
        self.beat_metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        return process

    def start_api(
        self, extra_env: dict[str, str] | None = None, processes: int = 1, port: int | None = None
    ) -> str:
        """The API on ``port``, or a free one; with ``processes`` over one, that many on the
        port, their metrics added up from a directory of their own."""
        port = port or free_port()
        metrics = api_metrics_env(self.workdir / f"metrics-api-{port}") if processes > 1 else {}
        self.group.start(
            "api",
            api_argv("127.0.0.1", port, processes),
            env={**self.env, **metrics, **(extra_env or {})},
            log_path=self.workdir / "api.log",
        )
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: _answers(f"{url}/healthz"), 30, "api")
        self.api_url = url
        return url

    def new_client(self, name: str = "tests", grant: Grant | None = None) -> NewClient:
        """A client holding every scope unless ``grant`` says otherwise."""
        return create_client(
            self.sessions, SystemClock(), name, grant=grant or Grant(scopes=ALL_SCOPES)
        )

    def http(self, client: NewClient | None = None, **kwargs: Any) -> httpx.Client:
        client = client or self.client
        assert client is not None
        return httpx.Client(
            base_url=self.api_url, auth=(client.client_id, client.secret), timeout=30, **kwargs
        )

    def stop(self) -> None:
        self.group.stop()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def basic(client_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


@contextlib.contextmanager
def stack_of_its_own(
    name: str, workdir: Path, database_url: str, redis_url: str, **settings: str
) -> Iterator[Stack]:
    """A stack with its own database, Redis database and Stripe emulator (no processes
    started yet), on a shiftable clock, for tests that move time or set their own settings;
    stopped with its emulator on the way out."""
    from tests.support.emulator import start_emulator

    base = workdir / name
    base.mkdir(parents=True, exist_ok=True)
    redis.Redis.from_url(redis_url).flushdb()  # no messages or clock left by another run
    emulator = start_emulator(base / "stripe-emulator.log", "--rate-limit", "0")
    env = stack_env(
        database_url=database_url,
        redis_url=redis_url,
        data_dir=base,
        stripe_url=emulator.url,
        BILLING_SHIFTABLE_CLOCK="true",
        **settings,
    )
    system = Stack(
        name=name,
        database_url=database_url,
        redis_url=redis_url,
        workdir=base,
        env=env,
        stripe_url=emulator.url,
    )
    try:
        yield system
    finally:
        system.stop()
        emulator.stop()


@contextlib.contextmanager
def another_api(stack: Stack, name: str, **settings: str) -> Iterator[str]:
    """One more API process of ``stack`` (same database and Redis), with ``settings`` over
    the stack's own; its URL, for as long as the block runs."""
    group = ProcessGroup()
    port = free_port()
    group.start(
        name,
        api_argv("127.0.0.1", port),
        env={**stack.env, **settings},
        log_path=stack.workdir / f"{name}.log",
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(f"{url}/healthz"), 30, name)
        yield url
    finally:
        group.stop()


def cli_output(stack: Stack, *args: str) -> str:
    """What ``billing-worker ARGS`` prints on the stack's settings, as an operator runs it;
    the test fails with its error line if it exits non-zero."""
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli", *args],
        env={**os.environ, **stack.env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout

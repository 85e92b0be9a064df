"""The system one schedule runs on: the processes ``up`` runs (two workers, beat, the API), a
Redis server of its own (so that it can be restarted), a database of its own (SQLite, or one
of the run's PostgreSQL cluster) and a Stripe emulator of its own; and what the schedule
finds there before it starts (plans, subscriptions, organizations, users)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis

from adapters.clock import SystemClock
from adapters.db.migrate import upgrade
from domain.subscriptions.plans import Plan
from stripe_emulator import EmulatorAdmin
from tests.schedules.plan import PLAN_AMOUNTS, PLANS, Schedule
from tests.support.emulator import start_emulator
from tests.support.forwarder import Forwarder
from tests.support.postgres import PostgresCluster, StreamingPair, start_streaming_pair
from tests.support.records import create_organization, create_user
from tests.support.redis_server import RedisServer
from tests.support.stack import Stack, stack_env
from tests.support.subscriptions import Subscribed, new_account, new_plan, operator, subscribe
from worker.local.embedded import REDIS_PASSWORD_FILENAME, redis_password, wait_until
from worker.local.seed import wire_stripe_events
from worker.local.sentinel import replicating

SCHEDULE_SETTINGS = {
    # A killed worker's messages come back within seconds, a stalled command is looked at
    # soon: quiescence within a minute of the last fault.
    "BILLING_BROKER_VISIBILITY_TIMEOUT_SECONDS": "4",
    "BILLING_STALLED_COMMAND_SECONDS": "2",
    "BILLING_HTTP_WAIT_TIMEOUT_SECONDS": "8",
}


@dataclass
class System:
    """One schedule's running system and the names the workload acts on."""

    stack: Stack
    redis: RedisServer
    """The primary."""
    redis_network: Forwarder
    """What the stack reaches Redis through (the nemesis partitions it, and moves it to the
    replica in a failover)."""
    postgres: PostgresCluster | None
    """The PostgreSQL primary (the pair's, after a switchover the new one)."""
    plans: dict[str, Plan] = field(default_factory=dict)
    subscriptions: list[Subscribed] = field(default_factory=list)
    organizations: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    processes: dict[str, Any] = field(default_factory=dict)
    """The worker nodes and beat, by name: what the nemesis kills."""
    hears_from_stripe: bool = False
    """Whether Stripe's webhooks reach the API (else Stripe's own changes, a subscription
    gone ``past_due`` among them, reach us only with the reconciliation sweep's reads)."""
    redis_replica: RedisServer | None = None
    """The primary's replica, when the schedule fails Redis over (``redis_failover``)."""
    postgres_pair: StreamingPair | None = None
    """The schedule's own primary and streaming standby, when it switches PostgreSQL over
    (``postgres_switchover``); the stack is on their multi-host URL."""
    before_redis_empties: list[Callable[[], None]] = field(default_factory=list)
    """What to do before Redis loses its dataset (the stream's consumer reads it up to then:
    entries not yet read are lost with it, a limit of the stream, not of the checker)."""

    def kill(self, name: str) -> None:
        """SIGKILL a process (a worker node, beat, or ``"api"``) and its children."""
        if name == "api":
            pids = [
                child.process.pid
                for child in self.stack.group.children
                if child.name == "api" and child.process.poll() is None
            ]
        else:
            pids = [self.processes[name].pid]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        for child in self.stack.group.children:
            if child.process.pid in pids:
                child.process.wait()

    def start(self, name: str) -> None:
        """Start ``name`` again, as a supervisor would."""
        if name == "api":  # on its port, where Stripe's webhooks are sent
            port = int(self.stack.api_url.rsplit(":", 1)[1]) if self.stack.api_url else None
            self.stack.start_api(port=port)
        elif name == "beat":
            self.processes[name] = self.stack.start_beat()
        else:
            try:
                self.processes[name] = self.stack.start_worker(name, concurrency=1)
            except Exception:  # started, but its ping met Redis coming back: ask again
                [*_, child] = (c for c in self.stack.group.children if c.name == f"worker-{name}")
                self.processes[name] = child.process
                wait_until(lambda: self._answers(name), 30, f"worker {name}")

    def _answers(self, name: str) -> bool:
        try:
            return self.stack._worker_answers(f"{name}-{self.stack.name}")
        except Exception:
            return False

    def price_to_plan(self) -> dict[str, str]:
        return {
            str(plan.provider_price_id): plan.id
            for plan in self.plans.values()
            if plan.provider_price_id
        }


@contextlib.contextmanager
def running_system(
    schedule: Schedule, workdir: Path, database: str, postgres: PostgresCluster | None
) -> Iterator[System]:
    """The system for ``schedule``, set up and running; stopped on the way out."""
    base = workdir / f"seed-{schedule.seed}"
    base.mkdir(parents=True, exist_ok=True)
    redis = RedisServer(base / "redis")
    redis.start()
    redis_network = Forwarder(base / "redis-network", redis.port)
    redis_url = redis.url.replace(f":{redis.port}/", f":{redis_network.port}/")
    name = f"chaos_{schedule.seed}_{uuid.uuid4().hex[:6]}"
    pair = None
    if database == "postgresql":
        assert postgres is not None
        if any(fault.kind == "postgres_switchover" for fault in schedule.faults):
            pair = start_streaming_pair()
            postgres = pair.primary
            database_url = pair.create_database(name)
        else:
            database_url = postgres.create_database(name)
        _commit_synchronously(postgres, name)
    else:
        database_url = f"sqlite:///{base / 'billing.db'}"
    upgrade(database_url)
    emulator = start_emulator(base / "stripe-emulator.log", "--rate-limit", "0")
    env = stack_env(
        database_url=database_url,
        redis_url=redis_url,
        data_dir=base,
        stripe_url=emulator.url,
        BILLING_SHIFTABLE_CLOCK="true",
        **SCHEDULE_SETTINGS,
    )
    stack = Stack(
        name=name,
        database_url=database_url,
        redis_url=redis_url,
        workdir=base,
        env=env,
        stripe_url=emulator.url,
    )
    system = System(
        stack,
        redis,
        redis_network,
        postgres if database == "postgresql" else None,
        postgres_pair=pair,
    )
    servers = [redis]  # every Redis server of the schedule, whatever role a failover left it in
    try:
        if any(fault.kind == "redis_failover" for fault in schedule.faults):
            system.redis_replica = _replica_of(redis, base / "redis-replica")
            servers.append(system.redis_replica)
        _set_up(system, schedule)
        stack.start_api()
        stack.client = stack.new_client("chaos-workload")
        if schedule.stripe_side:
            _hear_from_stripe(system, emulator.url)
        for worker in ("w1", "w2"):
            system.start(worker)
        system.start("beat")
        yield system
    finally:
        stack.stop()
        emulator.stop()
        redis_network.stop()
        for server in servers:
            server.stop()
        if pair is not None:
            pair.stop()


def _replica_of(primary: RedisServer, data_dir: Path) -> RedisServer:
    """A second server (its own append-only file) replicating ``primary``, with its password:
    a managed Redis's replica, which a failover promotes."""
    data_dir.mkdir(parents=True, exist_ok=True)
    password = data_dir / REDIS_PASSWORD_FILENAME
    shutil.copyfile(primary.data_dir / REDIS_PASSWORD_FILENAME, password)
    password.chmod(0o600)
    replica = RedisServer(data_dir)
    replica.start()
    try:
        follow(replica, primary)
    except BaseException:
        replica.stop()
        raise
    return replica


def follow(replica: RedisServer, primary: RedisServer) -> None:
    """Make ``replica`` replicate ``primary`` (they share a password); back once in sync."""
    client = redis.Redis.from_url(replica.url)
    try:
        client.config_set("masterauth", redis_password(primary.data_dir))
        client.replicaof("127.0.0.1", primary.port)
        wait_until(lambda: replicating(client), 30, f"redis on {replica.port} to sync")
    finally:
        client.close()


WEBHOOK_RETRIES = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
"""The emulator's retries of a delivery (two minutes in all): Stripe retries for three days, so
an API killed and started again, or a worker partitioned from Redis, still hears every event."""


def _hear_from_stripe(system: System, emulator_url: str) -> None:
    """Stripe's events sent to the API as a deployment's are (``billing-worker stripe webhooks
    register``): how a change made in Stripe's dashboard reaches us."""
    with EmulatorAdmin(emulator_url) as emulator:
        emulator.set_retry_schedule(WEBHOOK_RETRIES)
    wire_stripe_events(operator(system.stack), f"{system.stack.api_url}/webhooks/stripe")
    system.hears_from_stripe = True


def _commit_synchronously(postgres: PostgresCluster, database: str) -> None:
    """Every session of ``database`` commits synchronously (the run's cluster defaults to
    off, for speed): a commit can then be held inside ``COMMIT`` by naming a synchronous
    standby that never connects (the nemesis' ``postgres_kill_in_commit``)."""
    admin_url = f"postgresql://postgres@{postgres.host}:{postgres.port}/postgres"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{database}" SET synchronous_commit = on')


def _set_up(system: System, schedule: Schedule) -> None:
    """What exists before the schedule starts, made the way an operator makes it."""
    ctx = operator(system.stack)
    clock = SystemClock()
    for plan in PLANS:
        system.plans[plan] = new_plan(ctx, plan, PLAN_AMOUNTS[plan])
    for _ in range(schedule.subscriptions):
        account = new_account(ctx)
        system.subscriptions.append(subscribe(ctx, account, system.plans["starter"]))
    sessions = system.stack.sessions
    system.organizations = [
        create_organization(sessions, clock, name=f"org-{uuid.uuid4().hex[:12]}").id
        for _ in range(schedule.organizations)
    ]
    system.users = [
        str(create_user(sessions, clock, email=f"{uuid.uuid4().hex}@x.io", disabled=True).id)
        for _ in range(schedule.users)
    ]

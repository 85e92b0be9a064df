"""The nemesis: each fault kind of the catalogue (``tests/schedules/plan.py``), done to the
running system. Stripe's faults are the emulator's rules, each for a few requests; a killed
process is started again at once, as a supervisor would; Redis and PostgreSQL come back
after their restart."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from typing import Any

import psycopg
import redis

from adapters.clock import CLOCK_OFFSET_KEY
from tests.schedules.plan import Step
from tests.schedules.system import System, follow
from worker.local.embedded import free_port

HOUR = 3600.0


def inject(system: System, fault: Step) -> str | None:
    """Do ``fault`` to ``system`` (returns once whatever it stopped runs again); returns what
    the fault found as it struck, when that is worth reporting."""
    return FAULTS[fault.kind](system, fault.args)


def _stripe(
    kind: str, *, after_execution: bool = False
) -> Callable[[System, dict[str, Any]], None]:
    def fault(system: System, args: dict[str, Any]) -> None:
        with system.stack.stripe as emulator:
            emulator.add_fault(
                kind,
                "*",
                count=args["count"],
                after_execution=after_execution,
                latency_ms=args.get("latency_ms", 0),
            )

    return fault


def _kill(name: str | None = None) -> Callable[[System, dict[str, Any]], None]:
    def fault(system: System, args: dict[str, Any]) -> None:
        target = name or args["worker"]
        system.kill(target)
        system.start(target)

    return fault


def _redis_restart(system: System, _args: dict[str, Any]) -> None:
    system.redis.stop()
    system.redis.start()


def _redis_kill(system: System, _args: dict[str, Any]) -> None:
    """kill -9 (what its append-only file held of the last second may be lost), then back."""
    system.redis.kill()
    system.redis.start()


def _redis_restart_empty(system: System, _args: dict[str, Any]) -> None:
    """Back with nothing: its data files removed while it was down (a managed Redis replaced).
    The test clock's offset, which only the shiftable clock of the tests keeps in Redis, is
    put back: production's clock is not in Redis."""
    client = redis.Redis.from_url(system.stack.redis_url)
    try:
        offset = client.get(CLOCK_OFFSET_KEY)
    finally:
        client.close()
    for catch_up in system.before_redis_empties:
        catch_up()
    system.redis.stop()
    shutil.rmtree(system.redis.data_dir / "appendonlydir", ignore_errors=True)
    (system.redis.data_dir / "dump.rdb").unlink(missing_ok=True)
    system.redis.start()
    if offset is not None:
        client = redis.Redis.from_url(system.stack.redis_url)
        try:
            client.set(CLOCK_OFFSET_KEY, offset)
        finally:
            client.close()


def _redis_read_only(system: System, args: dict[str, Any]) -> None:
    """The primary demoted in place for ``seconds`` (a managed Redis mid-failover, or one an
    operator turned into a replica by mistake): every connection stays open, writes are
    answered ``READONLY`` and blocked reads ``UNBLOCKED``; then a primary again, its data
    kept (it followed a primary that never answered, so it never synced an empty one)."""
    client = redis.Redis.from_url(system.redis.url)
    try:
        client.replicaof("127.0.0.1", free_port())
        time.sleep(args["seconds"])
        client.replicaof("NO", "ONE")
    finally:
        client.close()


def _redis_failover(system: System, _args: dict[str, Any]) -> None:
    """A managed Redis fails over as ElastiCache and Memorystore do: its replica promoted,
    the stable address moved to it (new connections reach it), and the old primary made its
    replica in place, the connections to it still open (their writes answered ``READONLY``
    until the clients reconnect). What the replica had not received yet is lost, as
    asynchronous replication loses it. The two trade places: a later fault strikes the new
    primary, a later failover flips back."""
    old, new = system.redis, system.redis_replica
    assert new is not None, "redis_failover needs the schedule's replica (running_system)"
    promoted = redis.Redis.from_url(new.url)
    try:
        promoted.replicaof("NO", "ONE")
    finally:
        promoted.close()
    system.redis_network.switch(new.port)
    follow(old, new)
    system.redis, system.redis_replica = new, old


def _redis_partition(system: System, args: dict[str, Any]) -> None:
    """Every process cut from Redis for ``seconds``, Redis itself up (the network between:
    the stack reaches Redis through a forwarder that stops passing bytes)."""
    system.redis_network.partition()
    try:
        time.sleep(args["seconds"])
    finally:
        system.redis_network.heal()


def _postgres_restart(system: System, _args: dict[str, Any]) -> None:
    assert system.postgres is not None, "postgres_restart needs --database postgresql"
    system.postgres.restart()


def _postgres_kill_in_commit(system: System, args: dict[str, Any]) -> str:
    """kill -9 of a worker node while its commits wait inside ``COMMIT`` (each flushed
    locally, then held waiting for a synchronous standby that never connects): the
    transactions end committed, the process that made them never learns it. The commits
    of every other process are held too for that moment. If the node has nothing to commit
    within a few seconds it is killed all the same (a kill between commits). The schedule's
    database commits synchronously (``tests/schedules/system.py``), so a commit can wait."""
    postgres = system.postgres
    assert postgres is not None, "postgres_kill_in_commit needs --database postgresql"
    target = args["worker"]
    admin_url = f"postgresql://postgres@{postgres.host}:{postgres.port}/postgres"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'never_connects'")
        admin.execute("SELECT pg_reload_conf()")
        try:
            deadline = time.monotonic() + COMMIT_WAIT_SECONDS
            while time.monotonic() < deadline and not _commits_waiting(admin):
                time.sleep(0.05)
            waiting = _commits_waiting(admin)
            system.kill(target)
        finally:
            admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
            admin.execute("SELECT pg_reload_conf()")
    system.start(target)
    return f"{waiting} commit(s) waiting when killed"


COMMIT_WAIT_SECONDS = 5.0


def _commits_waiting(admin: psycopg.Connection[Any]) -> int:
    """Commits of any process waiting for the standby now (the killed node's among them
    when it was committing)."""
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
    ).fetchone()
    return int(row[0]) if row else 0


def _postgres_switchover(system: System, _args: dict[str, Any]) -> str:
    """A planned switchover: the primary stopped, its streaming standby promoted; every
    process is on libpq's multi-host URL (``target_session_attrs=read-write``) and finds the
    new primary by itself. The old primary then becomes the new one's standby (a fresh base
    backup), so that a later switchover has one; later PostgreSQL faults strike the new
    primary."""
    pair = system.postgres_pair
    assert pair is not None, "postgres_switchover needs the schedule's pair (running_system)"
    started = time.monotonic()
    pair.switch_over()
    system.postgres = pair.primary
    return f"switched over, the old primary a standby again, in {time.monotonic() - started:.1f}s"


def _clock_jump(system: System, args: dict[str, Any]) -> None:
    system.stack.advance_time(args["hours"] * HOUR)


def month_passes(system: System) -> None:
    """The subscriptions' periods end: both clocks a month and a day on."""
    system.stack.advance_time(32 * 24 * HOUR)


FAULTS: dict[str, Callable[[System, dict[str, Any]], str | None]] = {
    "stripe_latency": _stripe("latency"),
    "stripe_5xx": _stripe("api_error"),
    "stripe_429": _stripe("rate_limit"),
    "stripe_drop_before": _stripe("drop"),
    "stripe_drop_after": _stripe("drop", after_execution=True),
    "kill_worker": _kill(),
    "kill_beat": _kill("beat"),
    "kill_api": _kill("api"),
    "redis_restart": _redis_restart,
    "redis_kill": _redis_kill,
    "redis_restart_empty": _redis_restart_empty,
    "clock_jump": _clock_jump,
    "postgres_restart": _postgres_restart,
    "stripe_latency_across_period_end": _stripe("latency"),
    "redis_read_only": _redis_read_only,
    "redis_partition": _redis_partition,
    "postgres_kill_in_commit": _postgres_kill_in_commit,
    "redis_failover": _redis_failover,
    "postgres_switchover": _postgres_switchover,
}


def calm(system: System) -> None:
    """No fault left in force: Stripe's rules removed (a process killed is already back)."""
    with system.stack.stripe as emulator:
        emulator.clear_faults()
    time.sleep(0.1)

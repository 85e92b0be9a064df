"""The nemesis: each fault kind of the catalogue (``tests/schedules/plan.py``), done to the
running system. Stripe's faults are the emulator's rules, each for a few requests; a killed
process is started again at once, as a supervisor would; Redis and PostgreSQL come back
after their restart."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from typing import Any

import redis

from adapters.clock import CLOCK_OFFSET_KEY
from tests.schedules.plan import Step
from tests.schedules.system import System

HOUR = 3600.0


def inject(system: System, fault: Step) -> None:
    """Do ``fault`` to ``system`` (returns once whatever it stopped runs again)."""
    FAULTS[fault.kind](system, fault.args)


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


def _postgres_restart(system: System, _args: dict[str, Any]) -> None:
    assert system.postgres is not None, "postgres_restart needs --database postgresql"
    system.postgres.restart()


def _clock_jump(system: System, args: dict[str, Any]) -> None:
    system.stack.advance_time(args["hours"] * HOUR)


def month_passes(system: System) -> None:
    """The subscriptions' periods end: both clocks a month and a day on."""
    system.stack.advance_time(32 * 24 * HOUR)


FAULTS: dict[str, Callable[[System, dict[str, Any]], None]] = {
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
}


def calm(system: System) -> None:
    """No fault left in force: Stripe's rules removed (a process killed is already back)."""
    with system.stack.stripe as emulator:
        emulator.clear_faults()
    time.sleep(0.1)

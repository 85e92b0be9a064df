"""``up --ha``'s side of its Sentinel topology (:mod:`worker.local.sentinel`): the topology
kept in the data directory, what ``stack.json`` records of it, and how ``up`` heals it while
it watches (a server or sentinel that died started again, the new primary recorded)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from worker.local.embedded import redis_password
from worker.local.sentinel import SentinelTopology

SENTINEL_PASSWORD_FILENAME = "sentinel-password"  # noqa: S105 - a file name, not a password


def kept_topology(directory: Path) -> SentinelTopology:
    """``up --ha``'s topology: three sentinels, the servers' data and both passwords kept in
    ``directory`` (made once, 0600), so that ``up --ha`` again resumes where it stopped."""
    directory.mkdir(parents=True, exist_ok=True)
    sentinel_password = directory / SENTINEL_PASSWORD_FILENAME
    if not sentinel_password.exists():
        sentinel_password.touch(mode=0o600)
        sentinel_password.write_text(secrets.token_urlsafe(24))
    return SentinelTopology(
        directory,
        sentinel_count=3,
        keep_data=True,
        password=redis_password(directory),
        sentinel_password=sentinel_password.read_text().strip(),
    )


def recorded(topology: SentinelTopology, primary: str | None = None) -> dict[str, Any]:
    """What ``stack.json`` records of the topology (``redis_ha``): its processes (ports, pids,
    which is the primary: ``primary``, else the sentinels' word) and what the CLI needs to find
    the primary (:func:`worker.local.stack_state.with_local_stack`)."""
    return {
        **topology.describe(),
        "primary": primary or topology.primary_name(),
        "sentinel_addresses": topology.sentinel_addresses(),
        "password": topology.password,
        "sentinel_password": topology.sentinel_password,
        "socket_timeout_seconds": topology.socket_timeout_seconds,
    }


def heal(
    topology: SentinelTopology,
    last: dict[str, Any],
    reported: set[int],
    say: Callable[[str], None],
) -> dict[str, Any] | None:
    """One look at the topology from ``up``'s watch: ``say`` what died (once per pid, kept in
    ``reported``), start again what died (:meth:`SentinelTopology.restart_exited`), and
    return what to record now when it changed from ``last`` (``None`` when nothing did)."""
    for server in topology.exited():
        if server.process.pid in reported:
            continue
        reported.add(server.process.pid)
        if server.name == last.get("primary"):
            role = "the primary"
        elif server in topology.sentinels:
            role = "a sentinel"
        else:
            role = "the replica"
        say(
            f"{server.name} (pid {server.process.pid}, {role}) exited with "
            f"{server.process.returncode}; it starts again once the sentinels name a primary"
        )
    changed = False
    for server in topology.restart_exited():
        changed = True
        say(f"{server.name} started again (pid {server.process.pid})")
    primary: str | None
    try:
        primary = topology.primary_name()
    except (redis.RedisError, StopIteration):
        primary = last.get("primary")
    if primary != last.get("primary"):
        changed = True
        say(f"{primary} is the primary now")
    return {**last, **recorded(topology, primary)} if changed else None

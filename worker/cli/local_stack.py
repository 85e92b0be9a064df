"""``billing-worker status`` and ``billing-worker down``: the local stack ``up`` runs on the
data directory, seen and stopped from another terminal."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import click

from worker.cli.base import DATA_DIR, BillingCommand, as_json_option, emit, fail
from worker.local.stack_state import read_stack
from worker.settings import get_settings

DOWN_WAIT_SECONDS = 60.0
"""How long ``down`` waits for every process of the stack to stop (``up`` gives each 15 s)."""


@click.command("status", cls=BillingCommand, settings_env=(DATA_DIR,))
@as_json_option
def status(as_json: bool) -> None:
    """Whether the local stack of the data directory runs, where its API is, and its Redis:
    with `up --ha`, which server is the primary now (as the sentinels say), which the
    replica, and whether each server and sentinel answers."""
    from worker.local.stack_lock import holder

    settings = get_settings()
    stack = read_stack(settings.data_dir)
    where = settings.data_dir.resolve()
    if not stack:
        fail(f"no local stack in {where}: `billing-worker up` starts one")
    running = not stack.get("stopped")
    view: dict[str, Any] = {
        "data_dir": str(where),
        "running": running,
        "up_pid": holder(settings.data_dir).get("pid") if running else None,
        "api_url": stack.get("api_url"),
        "redis": _redis_view(stack) if running else None,
    }
    lines = [
        f"local stack of {where}: "
        + (f"running (`up` pid {view['up_pid']})" if running else "stopped"),
        f"  API      {view['api_url']}",
    ]
    redis_view = view["redis"]
    if redis_view is not None and "primary" in redis_view:
        lines.append(f"  Redis    Sentinel {redis_view['master_name']!r}")
        lines += [
            f"    {member['role']:<8} {member['name']:<11} 127.0.0.1:{member['port']:<6} "
            f"pid {member['pid']:<8} {'up' if member['answers'] else 'DOWN'}"
            for member in redis_view["members"]
        ]
    elif redis_view is not None:
        lines.append(
            f"  Redis    {redis_view['url']}   {'up' if redis_view['answers'] else 'DOWN'}"
        )
    emit(as_json, view, "\n".join(lines))


def _redis_view(stack: dict[str, Any]) -> dict[str, Any]:
    """What answers of the stack's Redis: one server, or each member of ``up --ha``'s
    topology with its role now."""
    import redis

    from worker.settings import masked_url

    ha = stack.get("redis_ha")
    if not ha:
        url = stack.get("redis_url")
        if not url:
            return {"url": None, "answers": False}
        return {
            "url": masked_url(str(url)),
            "answers": _pings(redis.Redis.from_url(str(url), socket_timeout=1)),
        }
    primary_port = None
    members = []
    for name, sentinel in ha["sentinels"].items():
        client: Any = redis.Redis(
            port=sentinel["port"], password=ha["sentinel_password"], socket_timeout=1
        )
        answers = _pings(client)
        if answers and primary_port is None:
            try:
                _host, port = client.sentinel_get_master_addr_by_name(ha["master_name"])
                primary_port = int(port)
            except (redis.RedisError, TypeError):
                pass
        members.append({"role": "sentinel", "name": name, **sentinel, "answers": answers})
    servers = []
    for name, server in ha["servers"].items():
        answers = _pings(
            redis.Redis(port=server["port"], password=ha["password"], socket_timeout=1)
        )
        role = "primary" if server["port"] == primary_port else "replica"
        servers.append({"role": role, "name": name, **server, "answers": answers})
    servers.sort(key=lambda member: member["role"] != "primary")
    primary = next((m["name"] for m in servers if m["role"] == "primary"), None)
    return {"master_name": ha["master_name"], "primary": primary, "members": servers + members}


def _pings(client: Any) -> bool:
    import redis

    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@click.command("down", cls=BillingCommand, settings_env=(DATA_DIR,))
def down() -> None:
    """Stop the local stack `up` runs on the data directory, as Ctrl-C where it runs does,
    and wait until every process it started (with `--ha`, the servers and sentinels too)
    has stopped."""
    from worker.local.stack_lock import holder, is_held

    settings = get_settings()
    where = settings.data_dir.resolve()
    if not is_held(settings.data_dir):
        click.echo(f"no stack runs on {where}")
        return
    pid = holder(settings.data_dir).get("pid")
    if not isinstance(pid, int):
        fail(f"the stack on {where} does not say who runs it: stop it where it runs (Ctrl-C)")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        fail(
            f"`up` (pid {pid}) is gone but processes it started still run on {where}: "
            f"`fuser -v {where / 'up.lock'}` lists them"
        )
    deadline = time.monotonic() + DOWN_WAIT_SECONDS
    while is_held(settings.data_dir):  # held until the last process of the stack exits
        if time.monotonic() > deadline:
            fail(f"the stack on {where} did not stop within {DOWN_WAIT_SECONDS:.0f}s")
        time.sleep(0.2)
    click.echo(f"stopped the stack on {where}")

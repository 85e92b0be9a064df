"""What a running local stack tells a command beside it: ``stack.json``, which ``up`` writes in
the data directory, written and read here and nowhere else.

The settings (:mod:`worker.settings`) are the environment's values only. A command run beside
``up`` (``billing-worker accounts show``, ``clock advance``…) names no Redis, no Stripe key and
no clock of its own: :func:`stack_settings` resolves them once from the stack, so that it
reaches the stack's Redis (or its sentinels, ``up --ha``), its Stripe emulator and its shifted
clock. The processes ``up`` starts are handed all of that in their environment.
Standard library and the settings only.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from worker.local.stack_lock import is_held
from worker.settings import STACK_FILE, Settings, get_settings


def read_stack(data_dir: Path) -> dict[str, Any]:
    """What ``up`` recorded of the processes it started, or ``{}``. Its ``stopped`` is the
    data directory's lock's word where there is one: a stack runs while ``up`` or a
    process it started holds the lock (:mod:`worker.local.stack_lock`)."""
    try:
        loaded = json.loads((data_dir / STACK_FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(loaded, dict):
        return {}
    held = is_held(data_dir)
    return loaded if held is None else {**loaded, "stopped": not held}


def write_stack_file(settings: Settings, stack: dict[str, Any]) -> Path:
    """Record what ``up`` started (``stack.json``, 0600: it holds the Redis URL, password
    included)."""
    path = settings.data_dir / STACK_FILE
    # Written beside it and renamed over it: a reader (a command, a test waiting for the
    # file) never finds it empty or half written.
    fresh = path.with_name(f".{STACK_FILE}.{os.getpid()}.tmp")
    fresh.unlink(missing_ok=True)
    descriptor = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(json.dumps(stack, indent=2, sort_keys=True))
    os.replace(fresh, path)
    return path


def is_running(stack: dict[str, Any]) -> bool:
    return bool(stack) and not stack.get("stopped")


def with_local_stack(settings: Settings) -> Settings:
    """``settings``, with what they leave unset taken from the local stack of their data
    directory: its Redis (``BILLING_REDIS_URL``, or ``up --ha``'s sentinels, master name and
    passwords, when neither ``BILLING_REDIS_URL`` nor ``BILLING_REDIS_SENTINELS`` is set), its
    Stripe emulator (when no key is set: the key while it runs, its URL), its shiftable clock
    and private webhook receivers (while it runs). Without a stack: ``settings`` unchanged."""
    stack = read_stack(settings.data_dir)
    if not stack:
        return settings
    running = is_running(stack)
    update: dict[str, Any] = {}
    if not settings.redis_url and not settings.redis_sentinels:
        if stack.get("redis_url"):
            update["redis_url"] = str(stack["redis_url"])
        update.update(_recorded_sentinels(stack, settings))
    if settings.stripe_api_key is None:
        recorded_key = stack.get("stripe_emulator_api_key")
        if recorded_key and stack.get("stripe_emulator_url") and running:
            update["stripe_api_key"] = SecretStr(str(recorded_key))
        if not settings.stripe_api_base and stack.get("stripe_emulator_url"):
            update["stripe_api_base"] = str(stack["stripe_emulator_url"])
    if not settings.shiftable_clock and stack.get("shiftable_clock") and running:
        update["shiftable_clock"] = True
    if settings.webhook_allow_private_networks is None:
        update["webhook_allow_private_networks"] = running
    return settings.model_copy(update=update) if update else settings


def _recorded_sentinels(stack: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """``up --ha``'s sentinels, master name and passwords, as ``stack.json`` records them."""
    recorded = stack.get("redis_ha")
    if not isinstance(recorded, dict) or not recorded.get("sentinel_addresses"):
        return {}
    return {
        "redis_sentinels": str(recorded["sentinel_addresses"]),
        "redis_master_name": str(recorded["master_name"]),
        "redis_password": SecretStr(str(recorded["password"])),
        "redis_sentinel_password": SecretStr(str(recorded["sentinel_password"])),
        "redis_socket_timeout_seconds": float(
            recorded.get("socket_timeout_seconds", settings.redis_socket_timeout_seconds)
        ),
    }


@lru_cache(maxsize=1)
def stack_settings() -> Settings:
    """The settings of a command beside a local stack: the environment's, completed once
    from the stack of its data directory (:func:`with_local_stack`)."""
    return with_local_stack(get_settings())

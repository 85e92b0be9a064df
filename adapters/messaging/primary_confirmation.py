"""Whether the server a write went to is the primary the sentinels name: what an append to
the event stream must show before the outbox records its events published.

A primary cut off from the sentinels together with some of its clients (a network partition)
goes on taking their writes, still believing itself the primary, while the sentinels on the
majority's side promote a replica; healed, it is demoted and drops what it took. Our clients
keep their pooled connections to it meanwhile. For commands that costs nothing lasting (what
a cut-off worker ran there replays its recorded outcome, and beat's failover sweep publishes
again), but the outbox records an event published once the stream took it: an append to the
old primary, recorded, is gone from the stream for good once beat's failover sweep stops
appending again what was published after a failover (60 s:
``application/handlers/operations/failover.py``), and a partition may last longer.

So with sentinels an append counts only when the server that took it (its ``run_id``, which
the append returns) is the primary a majority of the configured sentinels name, as they said
at most :data:`NAMED_PRIMARY_MAX_AGE_SECONDS` before the append; otherwise
:class:`PrimaryNotConfirmed` is raised, the outbox keeps the events, and a later relay
appends them where the sentinels say. A cut-off node reaches no majority of sentinels, so its
relays fail until the heal. A majority, not the first sentinel that answers: a sentinel cut
off with the old primary still names it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any

import redis

from adapters.messaging.redis_clients import (
    RedisOptions,
    master_options,
    sentinel_options,
    uses_sentinel,
)

NAMED_PRIMARY_MAX_AGE_SECONDS = 1.0
"""How long the sentinels' answer is reused. An append made that long after a promotion may
still count on the old primary: well inside the minute for which beat's failover sweep
appends again what was published after a failover."""


class PrimaryNotConfirmed(redis.ConnectionError):
    """The server that took a write is not (or not known to be) the primary the sentinels
    name: Redis is as good as unreachable for that write, for now."""


Address = tuple[str, int]


class SentinelNamedPrimary:
    """Confirms a server's ``run_id`` against the primary a majority of the sentinels name,
    asking them at most once per :data:`NAMED_PRIMARY_MAX_AGE_SECONDS` while the answer
    agrees. One per process (it keeps the last answer)."""

    def __init__(
        self,
        sentinels: Sequence[redis.Redis],
        master_name: str,
        server_at: Callable[[Address], redis.Redis],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sentinels = list(sentinels)
        self._master_name = master_name
        self._server_at = server_at
        self._monotonic = monotonic
        self._named: tuple[str | None, float] | None = None
        """The ``run_id`` the sentinels named last (``None``: no majority named one), and
        when they were asked."""

    def confirm(self, run_id: str) -> None:
        """Return if ``run_id`` is the named primary's; raise :class:`PrimaryNotConfirmed`
        if not, or if no majority of the sentinels answers."""
        named = self._named
        if (
            named is None
            or named[0] != run_id
            or self._monotonic() - named[1] > NAMED_PRIMARY_MAX_AGE_SECONDS
        ):
            asked_at = self._monotonic()
            named = (self._ask(), asked_at)
            self._named = named
        if named[0] != run_id:
            raise PrimaryNotConfirmed(
                f"the server that took the write (run_id {run_id}) is not the primary "
                f"{self._master_name!r} the sentinels name "
                f"({'no majority answered' if named[0] is None else 'they name ' + named[0]})"
            )

    def _ask(self) -> str | None:
        """The ``run_id`` of the primary a majority of the sentinels name as up, asking them
        in turn until a majority agrees on its address. A sentinel learns a promoted
        primary's ``run_id`` seconds after the promotion (from its next ``INFO``): until then
        the primary at that address is asked."""
        majority = len(self._sentinels) // 2 + 1
        named: Counter[Address] = Counter()
        run_ids: dict[Address, str] = {}
        for sentinel in self._sentinels:
            answer = self._named_by(sentinel)
            if answer is None:
                continue
            address, run_id = answer
            named[address] += 1
            if run_id:
                run_ids[address] = run_id
            if named[address] >= majority:
                return run_ids.get(address) or self._run_id_at(address)
        return None

    def _named_by(self, sentinel: redis.Redis) -> tuple[Address, str] | None:
        with suppress(redis.RedisError, OSError):
            # A dict on a client of one sentinel (redis-py types it for its Sentinel too).
            state: Any = sentinel.sentinel_master(self._master_name)
            if state.get("is_master") and not (state.get("is_sdown") or state.get("is_odown")):
                return (str(state["ip"]), int(state["port"])), str(state.get("runid") or "")
        return None

    def _run_id_at(self, address: Address) -> str | None:
        with suppress(redis.RedisError, OSError):
            return str(self._server_at(address).info("server")["run_id"])
        return None


def named_primary(settings: RedisOptions) -> SentinelNamedPrimary | None:
    """The confirmation the settings' Redis calls for: ``None`` without sentinels (a managed
    Redis demotes its old primary itself, and a single server has no other)."""
    if not uses_sentinel(settings):
        return None
    options = sentinel_options(settings)
    sentinels = [
        redis.Redis(host=host, port=port, **options) for host, port in settings.sentinel_addresses()
    ]
    servers: dict[Address, redis.Redis] = {}

    def server_at(address: Address) -> redis.Redis:
        if address not in servers:
            host, port = address
            servers[address] = redis.Redis(host=host, port=port, **master_options(settings, {}))
        return servers[address]

    return SentinelNamedPrimary(sentinels, settings.redis_master_name, server_at)

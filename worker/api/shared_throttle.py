"""Failed authentications and the attempts in flight, counted in Redis: shared by every API
process on a port, so that a client's (or a source's) failure budget is the same with one
process or ten.

Per key (a source address, a client id from a source, hashed into the key name) two
sorted sets: ``…:failures:{space}:{policy}:{key}`` holds the last ``limit`` failures,
scored by the time they happened (Redis's clock, the same for every process), and
``…:attempts:{space}:{policy}:{key}`` the attempts being verified, scored by the end of
their lease.

Who shares a count: the processes that enforce the same policy (``{policy}`` is the limit
and the window, ``10-in-60s``) in the same Redis database. So every process of one API
(``--workers N``) and every host of one deployment (the same settings) share; another API
given other limits on the same Redis (an internal one, a stricter one for Stripe's
deliveries) counts its own failures, since a failure counted under a limit of 50 means
nothing against a limit of 3; and two deployments never share, since each has a Redis
database of its own (its queues and streams are there too, under the same fixed names). A
change of the limits starts the count afresh for the processes that run the new ones.

An attempt takes its places under its (source, client id)'s and its source's limits in one
script, only if the failures in the window and the attempts in flight leave room under both: guesses
sent at once to several processes cannot overrun the limit either. A process that dies
mid-verification leaves its places until their lease (the failure window) ends.

A Redis that does not answer (an error, or no answer within a second) falls back to each
process's own count (:class:`~worker.api.throttle.FailureThrottle`): the throttle keeps
working, per process, and a warning says so (once a minute). The Redis client is the one
the API builds for its result listener and client shares (``worker/api/app.py``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from worker.api.throttle import FailureThrottle

logger = logging.getLogger(__name__)

KEY_PREFIX = "billing:auth"
REDIS_SECONDS = 1.0
"""How long a check waits for Redis before counting in this process instead (a Redis that
hangs must not hold every login)."""
WARN_EVERY_SECONDS = 60.0
_last_warning = [float("-inf")]


def _unavailable() -> None:
    """Say that Redis is unavailable, at most once a minute (not once per request)."""
    now = time.monotonic()
    if now - _last_warning[0] >= WARN_EVERY_SECONDS:
        _last_warning[0] = now
        logger.warning("the shared authentication throttle is unavailable; counting locally")


# KEYS: pairs (failures, attempts) per limit. ARGV: window, lease, token ("" to check only),
# then each pair's limit. Returns {seconds until the key over its limit may try again ("0":
# none is), the number of the first pair with no place for one more attempt (0: none), the
# failures of each pair}. With a token and room under every limit, the attempt takes a place
# under each.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local window = tonumber(ARGV[1])
local wait = 0
local full = 0
local reply = {'0', 0}
for i = 1, #KEYS / 2 do
  local failures, attempts, limit = KEYS[2 * i - 1], KEYS[2 * i], tonumber(ARGV[3 + i])
  redis.call('ZREMRANGEBYSCORE', failures, '-inf', now - window)
  redis.call('ZREMRANGEBYSCORE', attempts, '-inf', now)
  local failed = redis.call('ZCARD', failures)
  reply[2 + i] = failed
  if failed >= limit then
    local oldest = redis.call('ZRANGE', failures, failed - limit, failed - limit, 'WITHSCORES')
    wait = math.max(wait, tonumber(oldest[2]) + window - now)
  elseif full == 0 and failed + redis.call('ZCARD', attempts) >= limit then
    full = i
  end
end
if wait > 0 then
  reply[1] = tostring(wait)
  return reply
end
reply[2] = full
if full == 0 and ARGV[3] ~= '' then
  local lease = tonumber(ARGV[2])
  for i = 1, #KEYS / 2 do
    redis.call('ZADD', KEYS[2 * i], now + lease, ARGV[3])
    redis.call('PEXPIRE', KEYS[2 * i], math.ceil(lease * 1000))
  end
end
return reply
"""

# KEYS: pairs (failures, attempts). ARGV: window, token, "1" if the attempt failed, then each
# pair's limit. The attempt's places are given back; a failure is counted under each key.
_END = """
for i = 1, #KEYS / 2 do
  redis.call('ZREM', KEYS[2 * i], ARGV[2])
end
if ARGV[3] ~= '1' then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local window = tonumber(ARGV[1])
for i = 1, #KEYS / 2 do
  local failures, limit = KEYS[2 * i - 1], tonumber(ARGV[3 + i])
  redis.call('ZADD', failures, now, ARGV[2])
  redis.call('ZREMRANGEBYRANK', failures, 0, -(limit + 1))
  redis.call('PEXPIRE', failures, math.ceil(window * 1000))
end
return 1
"""


@dataclass(frozen=True)
class Taken:
    """What :meth:`SharedFailures.take` found."""

    retry_after: float | None
    """Seconds until the key over its limit may try again; ``None``: none is."""
    full: int
    """The number (from 1) of the first limit with no place for one more attempt now (its
    failures and attempts in flight fill it); 0: none."""
    failures: tuple[int, ...]
    """The failures in the window, per key asked."""

    @property
    def taken(self) -> bool:
        return self.retry_after is None and self.full == 0


@dataclass
class SharedFailures:
    """One key space's failed authentications (``space``: ``source-client``, ``source``,
    ``stripe-source``), in Redis, with this process's own count to fall back on."""

    redis: Redis
    space: str
    limit: int
    window: float = 60.0
    local: FailureThrottle = field(init=False)

    def __post_init__(self) -> None:
        self.local = FailureThrottle(self.limit, self.window)
        self._take = self.redis.register_script(_TAKE)
        self._end = self.redis.register_script(_END)

    @property
    def policy(self) -> str:
        """The namespace of this limit's counts: the processes enforcing the same limit over
        the same window share them, an API with other limits keeps its own."""
        return f"{self.limit}-in-{self.window:g}s"

    def keys(self, key: str) -> tuple[str, str]:
        # Hashed: bounded key names, and no address or client id in Redis's keyspace.
        digest = hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
        return (
            f"{KEY_PREFIX}:failures:{self.space}:{self.policy}:{digest}",
            f"{KEY_PREFIX}:attempts:{self.space}:{self.policy}:{digest}",
        )

    async def retry_after(self, key: str) -> float | None:
        """Seconds until ``key`` may try again, or ``None`` if it may now."""
        return (await take(((self, key),), token=None)).retry_after

    async def failed(self, key: str) -> None:
        """Count a failure of ``key`` (an attempt that held no place)."""
        await end(((self, key),), uuid.uuid4().hex, failed=True)


async def take(limits: Sequence[tuple[SharedFailures, str]], token: str | None) -> Taken:
    """Check ``limits`` (pairs of a key space and a key, one window for all) and, with a
    ``token``, take a place under each for an attempt, if there is room under all of them."""
    first = limits[0][0]
    keys = [name for failures, key in limits for name in failures.keys(key)]
    try:
        reply: list[Any] = await asyncio.wait_for(
            first._take(
                keys=keys,
                args=[
                    str(first.window),
                    str(first.window),
                    token or "",
                    *(str(failures.limit) for failures, _ in limits),
                ],
            ),
            REDIS_SECONDS,
        )
    except (RedisError, TimeoutError):
        _unavailable()
        waits = [wait for failures, key in limits if (wait := failures.local.retry_after(key))]
        return Taken(
            max(waits) if waits else None,
            0,
            tuple(failures.local.failures(key) for failures, key in limits),
        )
    wait = float(reply[0])
    return Taken(wait if wait > 0 else None, int(reply[1]), tuple(int(n) for n in reply[2:]))


async def end(limits: Sequence[tuple[SharedFailures, str]], token: str, *, failed: bool) -> None:
    """Give back an attempt's places under ``limits``; count a failure under each if it
    ``failed``."""
    first = limits[0][0]
    keys = [name for failures, key in limits for name in failures.keys(key)]
    try:
        await asyncio.wait_for(
            first._end(
                keys=keys,
                args=[
                    str(first.window),
                    token,
                    "1" if failed else "0",
                    *(str(failures.limit) for failures, _ in limits),
                ],
            ),
            REDIS_SECONDS,
        )
    except (RedisError, TimeoutError):
        _unavailable()
        if failed:
            for failures, key in limits:
                failures.local.failed(key)

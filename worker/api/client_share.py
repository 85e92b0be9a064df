"""Each API client's fair share of the workers: a rate of commands per client and
organization, in Redis.

Commands sent over HTTP are interactive: workers take them before any bulk work (the
period end's due changes, published at a lower message priority), so a client sending as
fast as its answers come back (synchronous previews from a few threads) would keep every
worker busy and hold back every organization's period end. Each client may therefore send
``BILLING_CLIENT_COMMANDS_PER_SECOND`` new commands a second for each organization, with a
burst of ``BILLING_CLIENT_COMMAND_BURST`` on top; beyond that, the request is refused before
anything is recorded: ``429`` with ``Retry-After`` and the error body (reason
``CLIENT_COMMAND_RATE_EXCEEDED``). An idempotent replay (a known ``Idempotency-Key``) makes
no new command and is never refused.

The share is counted per client *and organization* (a command that names none, such as
enabling a user, counts under the client alone): fairness is between organizations, so the
platform's own client, acting for every organization, has a share in each, while a flood
aimed at one organization, by a client limited to it or not, is held to one share.

Why not a library: ``limits`` and ``pyrate-limiter`` would do, but the budget of Stripe's
calls (``adapters/provider/rate_budget.py``) already keeps GCRA in one Lua script on the same
Redis; this is the same arithmetic without its priorities, and it tells the caller when its
next token is due (``Retry-After``), shared by every API process. A Redis that does not
answer lets the command through: the limit protects the workers, it must not take the API
down with Redis (the command is recorded in the log and published when Redis is back).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import RedisError

from domain.errors import ErrorCode, error_info
from worker.api.errors import ApiError

logger = logging.getLogger(__name__)

KEY_PREFIX = "billing:client-commands"

# KEYS: the client's theoretical arrival time. ARGV: rate, burst.
# Returns "0" when a token was taken, else the seconds until one is due.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local interval = 1.0 / tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local due = tat - tonumber(ARGV[2]) * interval
if due > now then return tostring(due - now) end
local next_tat = tat + interval
redis.call('SET', KEYS[1], tostring(next_tat), 'PX', math.ceil((next_tat - now) * 1000) + 1000)
return '0'
"""


@dataclass
class ClientShare:
    """The commands per second each client may send (``rate`` 0: no limit)."""

    redis: Redis
    rate: float
    burst: int

    def __post_init__(self) -> None:
        self._take = self.redis.register_script(_TAKE)

    async def take(self, client_id: str, org_id: str | None = None) -> None:
        """Take one of the client's tokens for ``org_id`` (``None``: a command of no
        organization), or raise the 429 saying when the next is due."""
        if self.rate <= 0:
            return
        key = (
            f"{KEY_PREFIX}:{client_id}" if org_id is None else f"{KEY_PREFIX}:{client_id}:{org_id}"
        )
        try:
            answer = await self._take(keys=[key], args=[str(self.rate), str(self.burst)])
            wait = float(answer)
        except RedisError:
            logger.warning("the client command limit is unavailable; letting it through")
            return
        if wait <= 0:
            return
        seconds = max(1, math.ceil(wait))
        raise ApiError(
            ErrorCode.RESOURCE_EXHAUSTED,
            f"this client sends commands faster than {self.rate:g} a second"
            + ("" if org_id is None else f" for organization {org_id!r}")
            + f"; "
            f"try again in {seconds}s",
            details=[error_info("CLIENT_COMMAND_RATE_EXCEEDED", retry_after_seconds=str(seconds))],
            status=429,
            headers={"Retry-After": str(seconds)},
        )

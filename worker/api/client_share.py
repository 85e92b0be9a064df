"""Each API client's fair share of the workers: a rate of commands per client and
organization, and a ceiling per client in all, in Redis.

Commands sent over HTTP are interactive: workers take them before any bulk work (the
period end's due changes, published at a lower message priority), so a client sending as
fast as its answers come back (synchronous previews from a few threads) would keep every
worker busy and hold back every organization's period end. Each client may therefore send
``BILLING_CLIENT_COMMANDS_PER_SECOND`` new commands a second for each organization, with a
burst of ``BILLING_CLIENT_COMMAND_BURST`` on top, and ``BILLING_CLIENT_TOTAL_COMMANDS_PER_SECOND``
(burst ``BILLING_CLIENT_TOTAL_COMMAND_BURST``) in all, whatever the organizations; beyond
either, the request is refused before anything is recorded: ``429`` with ``Retry-After`` and
the error body (reason ``CLIENT_COMMAND_RATE_EXCEEDED``). A command takes a token from both
buckets or from neither (one script), so a refusal by one costs nothing in the other. An
idempotent replay (a known ``Idempotency-Key``) makes no new command and is never refused.

The share per organization is what keeps one organization's flood (of previews: two Stripe
reads each) from taking Stripe's budget and the workers from every other organization's
period end; the ceiling in all is what keeps that share from being multiplied by naming many
organizations (and the API refuses an organization that does not exist before it counts
anything: ``worker/api/organizations.py``). A command of no organization, such as enabling a
user, calls no Stripe and counts in the ceiling only. The defaults and why:
``docs/explanation/fair-share.md``.

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
TOTAL_KEY_PREFIX = "billing:client-commands-total"

# KEYS: the theoretical arrival times of the buckets a command takes a token from.
# ARGV: each bucket's rate and burst, in the order of KEYS. A token is taken from every
# bucket or from none. Returns {0, "0"} when taken, else {the number (from 1) of the bucket
# whose token is due last, the seconds until it is due}.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local next_tats = {}
local refused, wait = 0, 0
for i = 1, #KEYS do
  local interval = 1.0 / tonumber(ARGV[2 * i - 1])
  local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
  if tat < now then tat = now end
  local due = tat - tonumber(ARGV[2 * i]) * interval
  if due - now > wait then
    refused, wait = i, due - now
  end
  next_tats[i] = tat + interval
end
if refused > 0 then return {refused, tostring(wait)} end
for i = 1, #KEYS do
  local ttl = math.ceil((next_tats[i] - now) * 1000) + 1000
  redis.call('SET', KEYS[i], tostring(next_tats[i]), 'PX', ttl)
end
return {0, '0'}
"""


@dataclass(frozen=True)
class _Bucket:
    key: str
    rate: float
    burst: int
    refusal: str
    """What the 429 says is exceeded."""


@dataclass
class ClientShare:
    """The commands per second each client may send in each organization (``rate``, with
    ``burst`` on top) and in all (``total_rate``, ``total_burst``); a rate of 0: no limit
    of that kind."""

    redis: Redis
    rate: float
    burst: int
    total_rate: float = 0.0
    total_burst: int = 0

    def __post_init__(self) -> None:
        self._take = self.redis.register_script(_TAKE)

    def _buckets(self, client_id: str, org_id: str | None) -> list[_Bucket]:
        buckets = []
        if self.total_rate > 0:
            buckets.append(
                _Bucket(
                    f"{TOTAL_KEY_PREFIX}:{client_id}",
                    self.total_rate,
                    self.total_burst,
                    f"faster than {self.total_rate:g} a second in all",
                )
            )
        if self.rate > 0 and org_id is not None:
            buckets.append(
                _Bucket(
                    f"{KEY_PREFIX}:{client_id}:{org_id}",
                    self.rate,
                    self.burst,
                    f"faster than {self.rate:g} a second for organization {org_id!r}",
                )
            )
        return buckets

    async def take(self, client_id: str, org_id: str | None = None) -> None:
        """Take one of the client's tokens, in all and for ``org_id`` (``None``: a command of
        no organization, counted in all only), or raise the 429 saying when the next is
        due."""
        buckets = self._buckets(client_id, org_id)
        if not buckets:
            return
        try:
            refused, wait_text = await self._take(
                keys=[bucket.key for bucket in buckets],
                args=[str(value) for bucket in buckets for value in (bucket.rate, bucket.burst)],
            )
            wait = float(wait_text)
        except RedisError:
            logger.warning("the client command limit is unavailable; letting it through")
            return
        if int(refused) == 0 or wait <= 0:
            return
        seconds = max(1, math.ceil(wait))
        raise ApiError(
            ErrorCode.RESOURCE_EXHAUSTED,
            f"this client sends commands {buckets[int(refused) - 1].refusal}; "
            f"try again in {seconds}s",
            details=[error_info("CLIENT_COMMAND_RATE_EXCEEDED", retry_after_seconds=str(seconds))],
            status=429,
            headers={"Retry-After": str(seconds)},
        )

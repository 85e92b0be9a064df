"""Stripe's rate limit as one budget in Redis, shared by every process using the account.

Why our own script rather than a library: ``limits`` (and ``pyrate-limiter``) answer "may I
call now?" over a window. We need three things they do not give: a *reservation* (the call
learns when its token is due and may wait for it, or hand its process back until then),
*priorities* (beat's bulk calls are paced strictly, interactive calls may use a burst
allowance on top, so they never queue behind the burst), and a rate that *slows down* when
Stripe answers 429 all the same (additive increase, multiplicative decrease, shared by all
processes). That is one small atomic Lua script, GCRA-style:

* the bucket keeps a *theoretical arrival time* (TAT): when the next call would be due if
  calls went out exactly at the rate;
* a call of tolerance ``τ`` is due at ``max(TAT - τ, hold)``; taking it moves TAT one
  interval on. Bulk calls have ``τ = 0`` (strict pacing), interactive calls
  ``τ = burst * interval``; so over any window of ``w`` seconds at most ``rate·w + burst + 1``
  calls go out, whoever makes them;
* a call whose token is further away than ``max_wait`` takes nothing and is told how long
  to stay away (:class:`RateLimited`);
* time is Redis's ``TIME``, so every process on every host reads the same clock.

Reads and writes are separate buckets, as Stripe counts them.
"""

from __future__ import annotations

import hashlib
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any, cast

import redis

from adapters.observability import metrics
from domain.provider.rate_budget import (
    BudgetUsage,
    CallKind,
    KindUsage,
    Priority,
    RateLimited,
)

KEY_PREFIX = "billing:stripe-budget"
STATS_SECONDS = 60
"""The window of "last minute" figures."""
DECREASE_FACTOR = 0.5
"""A 429 halves the shared rate (multiplicative decrease)…"""
RECOVERY_SECONDS = 30.0
"""…which then climbs back to the configured rate linearly over this long (additive
increase)."""
FLOOR_FRACTION = 0.1
"""The rate never drops below this fraction of the configured one."""
DECREASE_GAP_SECONDS = 1.0
"""429s closer together than this are one signal: one burst of them halves the rate once."""

_EFFECTIVE_RATE = """
local function effective_rate(aimd_key, configured, now, recovery)
  local cut = redis.call('HMGET', aimd_key, 'rate', 'at')
  if not cut[1] then return configured end
  local rate = tonumber(cut[1]) + (now - tonumber(cut[2])) * configured / recovery
  if rate >= configured then return configured end
  return rate
end
local function now_seconds()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
"""

# KEYS: tat, aimd, hold, calls-per-second prefix (ARGV-built keys: the budget lives on one
# Redis, never a cluster). ARGV: configured rate, tolerance seconds, max wait, recovery seconds.
_ACQUIRE = (
    _EFFECTIVE_RATE
    + """
local now = now_seconds()
local rate = effective_rate(KEYS[2], tonumber(ARGV[1]), now, tonumber(ARGV[4]))
local interval = 1.0 / rate
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local hold = tonumber(redis.call('GET', KEYS[3]) or '0')
local due = tat - tonumber(ARGV[2])
if hold > due then due = hold end
local wait = due - now
if wait < 0 then wait = 0 end
if wait > tonumber(ARGV[3]) then
  return {0, tostring(wait)}
end
local next_tat = tat
if due > next_tat then next_tat = due end
next_tat = next_tat + interval
redis.call('SET', KEYS[1], tostring(next_tat), 'PX', math.ceil((next_tat - now) * 1000) + 60000)
local second = KEYS[4] .. ':' .. math.floor(now + wait)
redis.call('INCR', second)
redis.call('EXPIRE', second, 180)
return {1, tostring(wait)}
"""
)

# KEYS: aimd, hold, 429-per-second prefix, 429 total. ARGV: configured rate, retry-after
# seconds (or -1), recovery seconds, decrease factor, floor fraction, gap seconds.
_RATE_LIMITED = (
    _EFFECTIVE_RATE
    + """
local now = now_seconds()
local configured = tonumber(ARGV[1])
local at = tonumber(redis.call('HGET', KEYS[1], 'at') or '0')
if now - at >= tonumber(ARGV[6]) then
  local rate = effective_rate(KEYS[1], configured, now, tonumber(ARGV[3])) * tonumber(ARGV[4])
  local floor = configured * tonumber(ARGV[5])
  if rate < floor then rate = floor end
  redis.call('HSET', KEYS[1], 'rate', tostring(rate), 'at', tostring(now))
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])) + 60)
end
local retry_after = tonumber(ARGV[2])
if retry_after > 0 then
  local hold = tonumber(redis.call('GET', KEYS[2]) or '0')
  if now + retry_after > hold then
    redis.call('SET', KEYS[2], tostring(now + retry_after), 'PX', math.ceil(retry_after * 1000))
  end
end
local second = KEYS[3] .. ':' .. math.floor(now)
redis.call('INCR', second)
redis.call('EXPIRE', second, 180)
redis.call('INCR', KEYS[4])
return 1
"""
)

_STATE = (
    _EFFECTIVE_RATE
    + """
local now = now_seconds()
local rate = effective_rate(KEYS[1], tonumber(ARGV[1]), now, tonumber(ARGV[2]))
local tat = tonumber(redis.call('GET', KEYS[2]) or '0')
return {tostring(now), tostring(rate), tostring(tat)}
"""
)


def mode_of(api_key: str) -> str:
    """``live`` or ``test``, from the key's prefix (``sk_live_…``, ``rk_test_…``)."""
    return "live" if "_live_" in api_key[:8] else "test"


def default_rate(api_key: str) -> float:
    """Stripe's published limit per second, for reads and for writes alike."""
    return 100.0 if mode_of(api_key) == "live" else 25.0


def account_key(api_key: str, api_base: str | None) -> str:
    """One budget per Stripe account: the key (and endpoint) names it, never in clear."""
    return hashlib.sha256(f"{api_key}|{api_base or ''}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class BudgetConfig:
    account: str
    mode: str
    rate_per_second: float
    burst: int
    max_wait_seconds: float
    enabled: bool = True

    @property
    def interval(self) -> float:
        return 1.0 / self.rate_per_second

    def tolerance(self, priority: Priority) -> float:
        """How far ahead of the pace a call may go: never for bulk calls, up to the burst
        for interactive ones."""
        return 0.0 if priority is Priority.BULK else self.burst * self.interval


class RedisRateBudget:
    """The :class:`domain.provider.rate_budget.RateBudget` of one Stripe account, kept in Redis."""

    def __init__(
        self,
        client: redis.Redis,
        config: BudgetConfig,
        *,
        sleep: Any = time.sleep,
    ) -> None:
        self._redis = client
        self.config = config
        self._sleep = sleep
        self._acquire = client.register_script(_ACQUIRE)
        self._rate_limited = client.register_script(_RATE_LIMITED)
        self._state = client.register_script(_STATE)

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def _key(self, kind: CallKind, name: str) -> str:
        return f"{KEY_PREFIX}:{self.config.account}:{kind.value}:{name}"

    def acquire(self, kind: CallKind, priority: Priority) -> float:
        if not self.config.enabled:
            self._count(kind, "calls")
            metrics.BUDGET_CALLS.labels(kind.value).inc()
            return 0.0
        granted, raw_wait = cast(
            list[Any],
            self._acquire(
                keys=[
                    self._key(kind, "tat"),
                    self._key(kind, "aimd"),
                    self._key(kind, "hold"),
                    self._key(kind, "calls"),
                ],
                args=[
                    self.config.rate_per_second,
                    self.config.tolerance(priority),
                    self.config.max_wait_seconds,
                    RECOVERY_SECONDS,
                ],
            ),
        )
        wait = float(raw_wait)
        if not int(granted):
            self._count(kind, "deferred")
            raise RateLimited(kind, wait)
        metrics.BUDGET_CALLS.labels(kind.value).inc()
        if wait > 0:
            metrics.BUDGET_WAIT_SECONDS.labels(kind.value).inc(wait)
            self._wait(kind, wait)
        return wait

    def _wait(self, kind: CallKind, seconds: float) -> None:
        waiters = self._key(kind, "waiting")
        me = uuid.uuid4().hex
        # A sorted set scored by when each wait ends: a process killed while waiting drops
        # out of the count once its wait is over.
        pipe = self._redis.pipeline(transaction=False)
        pipe.zadd(waiters, {me: time.time() + seconds})
        pipe.expire(waiters, 600)
        pipe.incrbyfloat(self._key(kind, "wait_seconds"), seconds)
        pipe.execute()
        try:
            self._sleep(seconds)
        finally:
            self._redis.zrem(waiters, me)

    def _count(self, kind: CallKind, name: str) -> None:
        key = f"{self._key(kind, name)}:{int(time.time())}"
        pipe = self._redis.pipeline(transaction=False)
        pipe.incr(key)
        pipe.expire(key, 180)
        pipe.execute()

    def rate_limited(self, kind: CallKind, retry_after: float | None) -> None:
        metrics.STRIPE_RATE_LIMITED.labels(kind.value).inc()
        self._rate_limited(
            keys=[
                self._key(kind, "aimd"),
                self._key(kind, "hold"),
                self._key(kind, "429"),
                self._key(kind, "429_total"),
            ],
            args=[
                self.config.rate_per_second,
                retry_after if retry_after and retry_after > 0 else -1,
                RECOVERY_SECONDS,
                DECREASE_FACTOR,
                FLOOR_FRACTION,
                DECREASE_GAP_SECONDS,
            ],
        )

    def effective_rate(self, kind: CallKind) -> float:
        if not self.config.enabled:
            return self.config.rate_per_second
        return self._snapshot(kind)[1]

    def _snapshot(self, kind: CallKind) -> tuple[float, float, float]:
        now, rate, tat = cast(
            list[Any],
            self._state(
                keys=[self._key(kind, "aimd"), self._key(kind, "tat")],
                args=[self.config.rate_per_second, RECOVERY_SECONDS],
            ),
        )
        return float(now), float(rate), float(tat)

    def _last_minute(self, kind: CallKind, name: str, now: float) -> int:
        second = math.floor(now)
        key = self._key(kind, name)
        keys = [f"{key}:{s}" for s in range(second - STATS_SECONDS + 1, second + 1)]
        return sum(int(value) for value in cast(list[Any], self._redis.mget(keys)) if value)

    def usage(self) -> BudgetUsage:
        kinds = {}
        for kind in CallKind:
            now, rate, tat = self._snapshot(kind)
            kinds[kind] = KindUsage(
                configured_rate=self.config.rate_per_second,
                effective_rate=rate if self.config.enabled else self.config.rate_per_second,
                calls_last_minute=self._last_minute(kind, "calls", now),
                rate_limited_last_minute=self._last_minute(kind, "429", now),
                rate_limited_total=int(
                    cast(Any, self._redis.get(self._key(kind, "429_total"))) or 0
                ),
                waiting=int(
                    cast(Any, self._redis.zcount(self._key(kind, "waiting"), time.time(), "+inf"))
                ),
                deferred_last_minute=self._last_minute(kind, "deferred", now),
                wait_seconds_total=float(
                    cast(Any, self._redis.get(self._key(kind, "wait_seconds"))) or 0.0
                ),
                backlog_seconds=max(0.0, tat - now),
            )
        return BudgetUsage(
            account=self.config.account,
            mode=self.config.mode,
            burst=self.config.burst,
            max_wait_seconds=self.config.max_wait_seconds,
            kinds=kinds,
        )


class UnmeteredBudget:
    """No shared budget (tools and tests that talk to an emulator of their own)."""

    enabled = False

    def acquire(self, kind: CallKind, priority: Priority) -> float:
        return 0.0

    def rate_limited(self, kind: CallKind, retry_after: float | None) -> None:
        return None

    def effective_rate(self, kind: CallKind) -> float:
        return math.inf

    def usage(self) -> BudgetUsage:
        raise NotImplementedError("an unmetered budget keeps no figures")

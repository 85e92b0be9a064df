"""The heartbeats of the system's long-running loops, kept in Redis for every process to read.

Each loop (a worker node's consumer, beat's schedule, each sweep, the failover watch, an API
process's result listener) writes one hash field when it shows it works: its name, and when,
with how often it means to beat. A loop whose last beat is older than its limit (the
configured silence, ``BILLING_LOOP_SILENCE_SECONDS``, or two of its own intervals when it beats
less often, an hourly sweep) is **silent**: beat's gauges (``billing_loop_silent``) and the
API's ``/readyz`` show it, and alert ``BillingLoopSilent`` fires.

The time of a beat is **Redis's** (``TIME``, read in the script that writes it), and a beat is
judged against Redis's time too: one clock for every process on every host, which neither the
application's shiftable clock (``billing-worker clock advance``) nor a host's drifting wall
clock moves. The application's clock is the wrong one here: a beat recorded before
``clock advance 31d`` would look 31 days old.

A loop that stops cleanly takes its field away (:meth:`Heartbeats.forget`); one whose process
was killed stays, silent, until :data:`FORGET_AFTER_SECONDS` (a node that is gone for good
stops alerting after a day; the same node started again beats under its old name at once).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from domain.operations.silent_loops import Silence, limit_of

if TYPE_CHECKING:
    import redis
    import redis.asyncio as aioredis

logger = logging.getLogger(__name__)

KEY = "billing:heartbeats"
FORGET_AFTER_SECONDS = 86_400.0
"""A loop silent this long is forgotten (its process is gone for good)."""

_BEAT = """
local now = redis.call('TIME')
local at = now[1] .. '.' .. string.format('%06d', now[2])
redis.call('HSET', KEYS[1], ARGV[1], at .. ' ' .. ARGV[2])
return 0
"""
_READ = """
local now = redis.call('TIME')
return {now[1] .. '.' .. string.format('%06d', now[2]), redis.call('HGETALL', KEYS[1])}
"""


class Heartbeats:
    """The heartbeats over a client of the broker's Redis (one that follows the primary)."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._beat = client.register_script(_BEAT)
        self._read = client.register_script(_READ)

    def beat(self, loop: str, every: float) -> None:
        """``loop`` works now, and beats again within ``every`` seconds."""
        self._beat(keys=[KEY], args=[loop, repr(float(every))])

    def forget(self, loop: str) -> None:
        """``loop`` stopped on purpose: it is no longer expected to beat."""
        self._client.hdel(KEY, loop)

    def silences(self, silence_seconds: float) -> list[Silence]:
        """Every loop known, by name, with how long it has been silent on Redis's clock and
        its limit (``silence_seconds`` for a loop that beats more often than half of it).
        Loops silent past :data:`FORGET_AFTER_SECONDS` are dropped."""
        now_raw, fields = cast(list[Any], self._read(keys=[KEY]))
        now = float(_text(now_raw))
        silences: list[Silence] = []
        forgotten: list[str] = []
        for index in range(0, len(fields), 2):
            loop = _text(fields[index])
            at, every = _parse(_text(fields[index + 1]))
            seconds = max(0.0, now - at)
            if seconds > FORGET_AFTER_SECONDS:
                forgotten.append(loop)
                continue
            silences.append(Silence(loop, seconds, limit_of(every, silence_seconds)))
        if forgotten:
            self._client.hdel(KEY, *forgotten)
        return sorted(silences, key=lambda silence: silence.loop)


async def beat_async(client: aioredis.Redis, loop: str, every: float) -> None:
    """:meth:`Heartbeats.beat` over an asyncio client (the API's result listener)."""
    await client.eval(_BEAT, 1, KEY, loop, repr(float(every)))


async def forget_async(client: aioredis.Redis, loop: str) -> None:
    await client.hdel(KEY, loop)


def _parse(value: str) -> tuple[float, float]:
    at, _, every = value.partition(" ")
    return float(at), float(every or 0)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class Paced:
    """A loop's heartbeat, recorded at most once every ``every`` seconds however often the
    loop turns (beat ticks several times a second), and never raising: a beat that cannot
    be written is logged, and the silence it leaves shows it."""

    def __init__(self, record: Callable[[], None], every: float, name: str) -> None:
        self._record = record
        self._every = every
        self._name = name
        self._next = float("-inf")

    def __call__(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self._every
        try:
            self._record()
        except Exception as error:
            logger.info("could not record the heartbeat of %s (%s)", self._name, error)


def beat_on_each_tick(scheduler: Any, heartbeat: Callable[[], None]) -> None:
    """Make beat's ``scheduler`` call ``heartbeat`` after each of its ticks (the loop that
    sends the sweeps: a beat whose loop hangs goes silent, its exporter still answering)."""
    tick = scheduler.tick

    def beating_tick(*args: Any, **kwargs: Any) -> Any:
        interval = tick(*args, **kwargs)
        heartbeat()
        return interval

    scheduler.tick = beating_tick

"""The application clock.

Production always uses real time. The local stack and the tests may shift it (never
backwards) by writing an offset into Redis, so that ``billing-worker clock advance 31d`` moves
every process's notion of "now" together with the Stripe emulator's clock.

The offset's key is never deleted (``clock reset`` writes 0), so a key that is gone after a
process read an offset means Redis lost its dataset (restarted empty, a new server behind its
address): the first process to notice writes back the offset it last read
(:meth:`ShiftableClock.offset`), rather than every process falling back to real time, months
behind the data made in shifted time.
"""

from __future__ import annotations

import contextlib
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import redis

    from adapters.messaging.redis_clients import RedisOptions

logger = logging.getLogger(__name__)

CLOCK_OFFSET_KEY = "billing-worker:clock-offset-seconds"
REFRESH_SECONDS = 0.5
"""How stale a process's view of the offset may be."""
UNREADABLE_BACKOFF_SECONDS = 2.0
"""How long a clock that could not read its offset keeps the last one before trying again."""


def shifted_now(client: redis.Redis, shiftable: bool) -> datetime:
    """The application's now read over ``client`` (a Redis connection at hand, as the broker's
    transport has), for stamps made outside the services: real time plus the offset when the
    clock is ``shiftable``, real time otherwise."""
    now = datetime.now(UTC)
    if not shiftable:
        return now
    raw = client.get(CLOCK_OFFSET_KEY)
    return now + timedelta(seconds=float(cast(Any, raw))) if raw is not None else now


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def clock_client(settings: RedisOptions) -> redis.Redis:
    """The Redis client a :class:`ShiftableClock` of these settings reads its offset over."""
    from adapters.messaging.redis_clients import redis_client

    return redis_client(settings, socket_timeout=2)


class ShiftableClock:
    """Real time plus an offset kept in Redis, re-read at most every ``refresh`` seconds,
    over ``client`` (:func:`clock_client`)."""

    def __init__(self, client: redis.Redis | str, refresh: float = REFRESH_SECONDS) -> None:
        if isinstance(client, str):  # a Redis URL: a test's or a benchmark's own server
            import redis

            client = redis.Redis.from_url(client, socket_timeout=2)
        self._redis = client
        self._refresh = refresh
        self._offset = 0.0
        self._has_read = False
        self._read_at = float("-inf")

    def offset(self) -> float:
        """The offset, re-read when stale. While Redis does not answer (restarting, or failing
        over to a replica) the offset last read stands, so that a request recording a command
        meanwhile is stamped as before rather than refused; with none read yet, the error."""
        asked_at = time.monotonic()
        if asked_at - self._read_at >= self._refresh:
            import redis

            try:
                raw = self._redis.get(CLOCK_OFFSET_KEY)
                if raw is None and self._has_read and self._offset:
                    raw = self._restore()
            except redis.RedisError:
                if not self._has_read:
                    raise
                # Not again at each call: a paused server makes each read wait its timeout.
                self._read_at = time.monotonic() + UNREADABLE_BACKOFF_SECONDS
                return self._offset
            self._offset = float(raw) if raw is not None else 0.0
            self._has_read = True
            # Stamped with when it was asked for, not when the answer came: a process held off
            # the CPU between the two must not take an offset read before a move for fresh.
            self._read_at = asked_at
        return self._offset

    def _restore(self) -> Any:
        """The offset written back after Redis lost it (the module's docstring): this
        process's last one, unless another process wrote its own first (``NX``: only an
        absent key is written, never one moved since, nor a reset's 0); what the key holds."""
        if self._redis.set(CLOCK_OFFSET_KEY, repr(self._offset), nx=True):
            logger.warning(
                "the clock's offset was gone from Redis (its dataset lost): wrote back %s s",
                self._offset,
            )
            return repr(self._offset)
        return self._redis.get(CLOCK_OFFSET_KEY)

    def expire(self) -> None:
        """Make the next :meth:`offset` read Redis (a task starts: the worker's hook in
        ``worker/celery_app.py``), so that whatever caused this read, made after the clock
        moved, is never judged against an offset from before the move. (Not while Redis did
        not answer: the back-off stands.)"""
        if self._read_at <= time.monotonic():
            self._read_at = float("-inf")

    def warm(self) -> None:
        """Read the offset now if Redis answers (nothing if it does not), so that a Redis
        restart or failover met before this process's first stamp finds an offset to keep
        (:meth:`offset`) rather than an error."""
        import redis

        with contextlib.suppress(redis.RedisError):
            self.offset()

    def now(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self.offset())

    def advance(self, seconds: float) -> float:
        """Move time forward for every process; returns the new total offset."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        total = float(self._redis.incrbyfloat(CLOCK_OFFSET_KEY, seconds))
        self._offset, self._has_read = total, True  # what it would write back (offset())
        self._read_at = float("-inf")
        return total

    def align(self, seconds: float) -> float:
        """Make the offset ``seconds`` for every process, whatever it was (the local stack's
        one offset is the Stripe emulator's: ``worker/local/stack_clock.py``); the offset it
        replaced (0 when there was none)."""
        if seconds < 0:
            raise ValueError("the clock is never behind real time")
        was = self._redis.set(CLOCK_OFFSET_KEY, repr(float(seconds)), get=True)
        self._offset, self._has_read = float(seconds), True
        self._read_at = float("-inf")
        return float(cast(Any, was)) if was is not None else 0.0

    def reset(self) -> None:
        """Back to real time for every process (``billing-worker clock reset``: time runs
        backwards once, on purpose). An offset of 0, not a deleted key: a key gone is a lost
        dataset, which processes restore (:meth:`offset`)."""
        self._redis.set(CLOCK_OFFSET_KEY, "0")
        self._read_at = float("-inf")

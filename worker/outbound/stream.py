"""Events onto a capped Redis stream, and the lock that keeps one relay at a time.

Each entry's fields: ``id`` (the event id), ``type``, ``subject`` (``type:id``) and ``event``
(the event's JSON). The stream is trimmed to about ``maxlen`` entries (``MAXLEN ~``: Redis
trims whole nodes, which is cheap). Consumers read through consumer groups and acknowledge
what they processed (``XREADGROUP`` / ``XACK``); an entry may come twice (a relay that died
between adding it and recording that it did), so consumers deduplicate by ``id``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence

import redis
from redis.exceptions import LockError

from domain.event_ports import RecordedEvent

RELAY_LOCK_SECONDS = 30.0
"""A relay that died holding the lock frees it after this long."""


class RedisEventStream:
    def __init__(self, client: redis.Redis, key: str, maxlen: int) -> None:
        self._client = client
        self._key = key
        self._maxlen = maxlen

    def append(self, events: Sequence[RecordedEvent]) -> None:
        if not events:
            return
        # One round trip, in order: a transaction, so that a failure adds none of them.
        with self._client.pipeline(transaction=True) as pipe:
            for event in events:
                pipe.xadd(
                    self._key,
                    {
                        "id": event.id,
                        "type": event.type,
                        "subject": event.subject_key,
                        "event": json.dumps(event.document, separators=(",", ":")),
                    },
                    maxlen=self._maxlen,
                    approximate=True,
                )
            pipe.execute()


class RedisRelayLock:
    """redis-py's lock, never waited for: a relay that finds it taken leaves the work to the
    holder (which publishes until nothing is left) and to beat's sweep."""

    def __init__(self, client: redis.Redis, key: str) -> None:
        self._lock = client.lock(key, timeout=RELAY_LOCK_SECONDS, blocking=False)

    def acquire(self) -> bool:
        return bool(self._lock.acquire(blocking=False))

    def release(self) -> None:
        # A lock that expired under a very slow relay is someone else's now: nothing to do.
        with contextlib.suppress(LockError):
            self._lock.release()

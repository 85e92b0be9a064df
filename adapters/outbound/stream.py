"""Events onto a capped Redis stream, and the lock that keeps one relay at a time.

Each entry's fields: ``id`` (the event id), ``type``, ``subject`` (``type:id``) and ``event``
(the event's JSON). The stream is trimmed to about ``maxlen`` entries (``MAXLEN ~``: Redis
trims whole nodes, which is cheap). Consumers read through consumer groups and acknowledge
what they processed (``XREADGROUP`` / ``XACK``); an entry may come twice (a relay that died
between adding it and recording that it did), so consumers deduplicate by ``id``. With
Redis Sentinel, an append counts only on the primary the sentinels name
(:class:`RedisEventStream`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Protocol

import redis

from domain.ports.events import RecordedEvent

RELAY_LOCK_SECONDS = 10.0
"""A relay that died holding the lock frees it after this long: the events committed
meanwhile wait that long, and one beat relay more, for a live relay (a worker killed while
its relay ran held them up to 30 s, longer than a consumer's patience). A live relay that
outlasts it (a step hung on a fault) only lets another publish the same events again, in the
same order: first appearances stay in outbox order, and consumers deduplicate by id."""


_APPEND = """
for i = 3, #ARGV, 4 do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*',
    'id', ARGV[i], 'type', ARGV[i + 1], 'subject', ARGV[i + 2], 'event', ARGV[i + 3])
end
if ARGV[2] == '1' then
  return string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
end
return false
"""
"""Add the events in order, in one step no other command comes between (a connection lost
adds all or none of them), and, when asked (``ARGV[2]``), say which server took them (its
``run_id``)."""


class ServerConfirmation(Protocol):
    def confirm(self, run_id: str) -> None:
        """Return if the server ``run_id`` is the primary in charge; raise a
        ``redis.ConnectionError`` if it is not, or not known to be."""
        ...


class RedisEventStream:
    """:class:`domain.ports.events.EventStream` on a Redis stream. With ``confirmation`` (the
    primary the sentinels name: :mod:`adapters.messaging.primary_confirmation`), an append
    returns only once the server that took it is confirmed as the primary in charge; an
    append to an old primary that a partition left taking writes raises, so that the outbox
    keeps its events for a later relay."""

    def __init__(
        self,
        client: redis.Redis,
        key: str,
        maxlen: int,
        confirmation: ServerConfirmation | None = None,
    ) -> None:
        self._append = client.register_script(_APPEND)
        self._key = key
        self._maxlen = maxlen
        self._confirmation = confirmation

    def append(self, events: Sequence[RecordedEvent]) -> None:
        if not events:
            return
        confirming = self._confirmation is not None
        fields: list[str | int] = [self._maxlen, int(confirming)]
        for event in events:
            fields += [
                event.id,
                event.type,
                event.subject_key,
                json.dumps(event.document, separators=(",", ":")),
            ]
        run_id = self._append(keys=[self._key], args=fields)
        if self._confirmation is not None:
            self._confirmation.confirm(run_id.decode() if isinstance(run_id, bytes) else run_id)


_ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('DEL', KEYS[2])
  return 1
end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return 0
"""
"""Take the lock (and clear the note: this relay looks at the whole outbox now), or leave a
note for its holder; atomic, so that a holder cannot let go between the two."""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
local wanted = redis.call('GET', KEYS[2])
redis.call('DEL', KEYS[2])
return wanted and 1 or 0
"""
"""Let go (unless the lock expired and is another relay's now) and take the note."""


class RedisRelayLock:
    """A lock never waited for, in one round trip each way: a relay that finds it taken
    leaves the work to the holder, with a note the holder reads as it lets go (then looks at
    the outbox again), and beat's sweep is the backstop."""

    def __init__(self, client: redis.Redis, key: str) -> None:
        self._keys = [key, f"{key}:wanted"]
        self._token = uuid.uuid4().hex
        self._acquire = client.register_script(_ACQUIRE)
        self._release = client.register_script(_RELEASE)

    def acquire(self) -> bool:
        ttl_ms = int(RELAY_LOCK_SECONDS * 1000)
        return bool(self._acquire(keys=self._keys, args=[self._token, ttl_ms]))

    def release(self) -> bool:
        return bool(self._release(keys=self._keys, args=[self._token]))

"""Which server acts as the broker's primary, seen from the inside: the sighting the failover
sweep compares (``domain.ports.broker``).

Each sighting writes the primary's ``run_id`` (a server's id for the life of its process: a
promoted replica has its own), the time, and when that primary took over (written when the
sweep settles a change) into one key, on the primary itself, after reading
what the key held before: one script, atomic on one server. A sighting that finds another
``run_id`` there writes nothing: the change is reported again until the sweep settles it, so
a sweep that fails half-way is run again by the next one.

The key replicates like our messages do, so after a failover the new primary holds the last
sighting that reached it before the old primary went: its ``run_id`` is not the new primary's,
and its time is the last moment our writes are known to have survived.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from domain.ports.broker import PrimarySighting

if TYPE_CHECKING:
    import redis

PRIMARY_KEY = "billing-worker:broker-primary"

_RUN_ID = "string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')"

_SIGHT = f"""
local run_id = {_RUN_ID}
local previous = redis.call('GET', KEYS[1])
local failed_over_at = nil
if previous then
    local seen = cjson.decode(previous)
    if seen.run_id ~= run_id then
        return {{run_id, previous, 1}}
    end
    failed_over_at = seen.failed_over_at
end
redis.call('SET', KEYS[1], cjson.encode({{
    run_id = run_id, seen_at = ARGV[1], failed_over_at = failed_over_at
}}))
return {{run_id, previous or '', 0}}
"""
_SETTLE = f"""
if {_RUN_ID} == ARGV[1] then
    redis.call('SET', KEYS[1], cjson.encode({{
        run_id = ARGV[1], seen_at = ARGV[2], failed_over_at = ARGV[2]
    }}))
end
return 0
"""


class RedisPrimaryWatch:
    """:class:`domain.ports.broker.BrokerPrimary` over a client of the broker's Redis (one
    that follows the primary: ``adapters.messaging.redis_clients.redis_client``). Each look is
    one script, atomic on one server."""

    def __init__(self, client: redis.Redis) -> None:
        self._sight = client.register_script(_SIGHT)
        self._settle = client.register_script(_SETTLE)

    def sight(self, now: datetime) -> PrimarySighting:
        run_id, raw, changed = cast(
            list[Any], self._sight(keys=[PRIMARY_KEY], args=[now.isoformat()])
        )
        primary = _text(run_id)
        if not raw:  # the first sighting ever
            return PrimarySighting(primary=primary, changed=False)
        previous = json.loads(raw)
        previous_seen_at = datetime.fromisoformat(previous["seen_at"])
        if int(changed):
            return PrimarySighting(primary=primary, changed=True, previous_seen_at=previous_seen_at)
        failed_over_at = previous.get("failed_over_at")
        return PrimarySighting(
            primary=primary,
            changed=False,
            previous_seen_at=previous_seen_at,
            failed_over_at=datetime.fromisoformat(failed_over_at) if failed_over_at else None,
        )

    def settle(self, sighting: PrimarySighting, now: datetime) -> None:
        self._settle(keys=[PRIMARY_KEY], args=[sighting.primary, now.isoformat()])


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value

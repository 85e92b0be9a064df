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

A Redis restarted with an empty dataset holds no key at all, as on the very first sighting.
So the watch also remembers its own last sighting, in the process (beat's, which keeps one
watch): a primary with no key though this watch saw another primary is a lost dataset
(:attr:`~domain.ports.broker.PrimarySighting.dataset_lost`), reported until it is settled. A
beat started after such a restart has nothing to remember: what the restart lost then waits
for the stalled-command sweep.
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
        self._seen: tuple[str, datetime] | None = None
        """This watch's last sighting recorded on the primary: its ``run_id`` and time."""

    def sight(self, now: datetime) -> PrimarySighting:
        run_id, raw, changed = cast(
            list[Any], self._sight(keys=[PRIMARY_KEY], args=[now.isoformat()])
        )
        primary = _text(run_id)
        previous = json.loads(raw) if raw else None
        if self._dataset_lost(primary, previous):
            assert self._seen is not None
            return PrimarySighting(
                primary=primary, changed=True, previous_seen_at=self._seen[1], dataset_lost=True
            )
        if previous is None:  # the first sighting ever
            self._seen = (primary, now)
            return PrimarySighting(primary=primary, changed=False)
        previous_seen_at = datetime.fromisoformat(previous["seen_at"])
        if int(changed):
            return PrimarySighting(primary=primary, changed=True, previous_seen_at=previous_seen_at)
        self._seen = (primary, now)
        failed_over_at = previous.get("failed_over_at")
        return PrimarySighting(
            primary=primary,
            changed=False,
            previous_seen_at=previous_seen_at,
            failed_over_at=datetime.fromisoformat(failed_over_at) if failed_over_at else None,
        )

    def _dataset_lost(self, primary: str, previous: dict[str, Any] | None) -> bool:
        """Whether the primary is another server than this watch saw last, and its key says
        nothing of it: none at all (an empty dataset), or the first sighting the script
        wrote there since (no ``failed_over_at``: the loss was not settled yet)."""
        if self._seen is None or self._seen[0] == primary:
            return False
        return previous is None or (
            previous.get("run_id") == primary and not previous.get("failed_over_at")
        )

    def settle(self, sighting: PrimarySighting, now: datetime) -> None:
        self._settle(keys=[PRIMARY_KEY], args=[sighting.primary, now.isoformat()])
        self._seen = (sighting.primary, now)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value

"""The broker's primary, as the failover sweep sees it.

Redis replicates asynchronously: when a replica is promoted (a Sentinel failover), what the old
primary acknowledged but had not yet sent to the replica is gone, queued messages included. The
sweep that republishes them (``application/handlers/operations/failover.py``) needs to know two
things, which :class:`BrokerPrimary` tells it: that the server acting as the primary is not the
one it saw last, and the last moment a write of ours reached the primary that is in charge now
(what was written after that moment may be lost).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class PrimarySighting:
    """What one look at the broker's primary found."""

    primary: str
    """The id of the server acting as the primary (for :meth:`BrokerPrimary.settle`)."""
    changed: bool
    """Another server acts as the primary than at the sighting this one replaced (a replica
    promoted); ``False`` on the very first sighting (nothing to compare with)."""
    previous_seen_at: datetime | None = None
    """The time of the sighting this one replaced. When ``changed``: the last sighting the new
    primary holds (it reached the old primary and was replicated before the failover); writes
    acknowledged after it may have been lost."""
    failed_over_at: datetime | None = None
    """When the primary seen took over, as :meth:`BrokerPrimary.settle` recorded it (``None``
    for a primary that never replaced another, and when ``changed``)."""
    dataset_lost: bool = False
    """When ``changed``: the new primary held no sighting at all, though this process saw
    another primary before: its dataset is new (Redis restarted empty, a new server behind the
    same address), so every message the broker held is gone, not only the latest writes;
    ``previous_seen_at`` is this process's own last sighting."""


class BrokerPrimary(Protocol):
    def sight(self, now: datetime) -> PrimarySighting:
        """Compare the current primary with the sighting recorded on it before; if it is the
        same server, record that it was seen at ``now`` (the application's clock). A change
        stays unrecorded (every sighting reports it) until :meth:`settle`."""
        ...

    def settle(self, sighting: PrimarySighting, now: datetime) -> None:
        """Record the primary of ``sighting`` as seen at ``now``, and as having taken over at
        ``now``, once what its change called for is done (unless yet another server is the
        primary now: that change is reported next)."""
        ...

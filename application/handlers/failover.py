"""Beat's failover sweep: what a broker failover dropped is published again at once.

Redis replicates asynchronously, so a Sentinel failover loses what the old primary had
acknowledged but not yet sent to the replica it promoted: messages the API published (the
command is recorded ``queued``, its message is gone) and apply commands of due plan changes
(the change is claimed under a lease, its command is gone). The stalled-command sweep and the
claims' leases would bring them back, but only after their thresholds (minutes). This sweep
runs every beat interval, in a thread of beat's (``worker/messaging/failover_watch.py``),
and looks at the broker's primary (``domain.ports.broker``); when another server has become
the primary, it republishes every command still ``queued`` that was
recorded since the last sighting the new primary holds (minus :data:`CLOCK_SKEW_MARGIN`), and
the apply command of every plan change claimed since then (the claim's own command: no new
claim, no second apply). Most of those messages were not lost: a command published twice
runs once (the runner's idempotency by command id), the duplicate costs a look-up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from application.handlers.due_changes import apply_command_for
from application.handlers.outbox import publish_recorded
from application.handlers.sweeps import BULK_MESSAGE_PRIORITY
from application.requests.sweeps import RecoverFromFailover
from domain.ports.application import FailoverContext
from domain.ports.commands import CommandMessage

logger = logging.getLogger(__name__)

CLOCK_SKEW_MARGIN = timedelta(seconds=10)
"""Taken before the last sighting: the sighting's time is one process's clock, a command's
another's."""

REPUBLISH_LIMIT = 10_000
"""The most commands one failover republishes (the oldest first); the stalled-command sweep
takes any beyond."""


@dataclass(frozen=True)
class FailoverRecovery:
    """What one run of the sweep did: whether the primary changed, and what went out again."""

    failed_over: bool = False
    republished: int = 0
    reclaimed: int = 0
    """Claimed plan changes whose apply command went out again."""


def recover_from_failover(sweep: RecoverFromFailover, app: FailoverContext) -> FailoverRecovery:
    """Look at the broker's primary; after a failover, republish what it may have dropped."""
    now = app.clock.now()
    watch = app.broker_primary()
    sighting = watch.sight(now)
    if not sighting.changed or sighting.previous_seen_at is None:
        return FailoverRecovery()
    since = sighting.previous_seen_at - CLOCK_SKEW_MARGIN
    queued = app.commands.queued_since(since, REPUBLISH_LIMIT)
    publisher = app.publisher()
    for record in queued:
        publish_recorded(record, publisher, app.commands)
    with app.unit_of_work() as uow:
        claims = uow.scheduled_changes.claimed_since(
            since, app.billing.change_lease, REPUBLISH_LIMIT
        )
    with publisher.batch() as batch:
        for claim in claims:
            # The claim's own command again (not a new claim): where its message survived, the
            # duplicate is the same command in the log, and costs a look-up.
            batch.publish(
                CommandMessage.of(apply_command_for(claim), priority=BULK_MESSAGE_PRIORITY)
            )
    watch.settle(sighting, app.clock.now())
    logger.warning(
        "the broker's primary changed (last seen before at %s): republished %d queued "
        "commands and the apply commands of %d plan changes claimed since %s",
        sighting.previous_seen_at.isoformat(),
        len(queued),
        len(claims),
        since.isoformat(),
    )
    return FailoverRecovery(failed_over=True, republished=len(queued), reclaimed=len(claims))

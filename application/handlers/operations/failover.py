"""Beat's failover sweep: what a broker failover dropped is published again at once.

Redis replicates asynchronously, so a Sentinel failover loses what the old primary had
acknowledged but not yet sent to the replica it promoted: messages the API published (the
command is recorded ``queued``, its message is gone), a worker's later attempts (recorded
``retrying``) and apply commands of due plan changes (the change is claimed under a lease, its
command is gone). The stalled-command sweep and the claims' leases would bring them back, but
only after their thresholds (minutes). This sweep runs every beat interval, in a thread of
beat's (``adapters/messaging/failover_watch.py``), and looks at the broker's primary
(``domain.ports.broker``); when another server has become the primary, it republishes every
command awaiting its next message (``queued``, or ``retrying``/``waiting``: a later attempt's
message) that entered that state since the last sighting the new primary holds (minus
:data:`CLOCK_SKEW_MARGIN`), and the apply command of every plan change claimed since then (the
claim's own command: no new claim, no second apply). For :data:`SETTLING` after, each look also
republishes the retries recorded and the changes claimed since the look before (an old primary
not killed takes writes until it is demoted). Most of those messages were not lost: a command
published twice runs once (the runner's idempotency by command id), the duplicate costs a
look-up.

A Redis restarted with an empty dataset (or a new server behind the same address) is a change
of primary too, one that lost every message, not only the latest writes
(``PrimarySighting.dataset_lost``): the sweep then republishes what entered those states in
the :data:`LOST_DATASET_LOOKBACK` before its last sighting.

The event stream lives on the same Redis, and the outbox records an event published once the
stream took it: what the failover or the empty restart took from the stream, the outbox no
longer holds for the relay. The sweep appends those events again (published since the same
instant, the latest :data:`RESTREAM_LIMIT`, in outbox order, under the relay's lock so that
no relay appends a later event of a subject between them); consumers deduplicate by event id,
as they do after a relay that died between the stream and its record. Webhook deliveries are
rows of the database, not Redis: nothing of theirs was lost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from application.handlers.operations.outbox import publish_recorded
from application.handlers.operations.sweeps import BULK_MESSAGE_PRIORITY
from application.handlers.subscriptions.due_changes import apply_command_for
from application.requests.sweeps import RecoverFromFailover
from domain.messages import AWAITING_DELIVERY, AWAITING_RETRY, CommandStatus
from domain.ports.application import FailoverContext
from domain.ports.commands import CommandMessage, retries_used

logger = logging.getLogger(__name__)

CLOCK_SKEW_MARGIN = timedelta(seconds=10)
"""Taken before the last sighting: the sighting's time is one process's clock, a command's
another's."""

SETTLING = timedelta(seconds=60)
"""How long after a failover each look also republishes the retries recorded, and the plan changes
claimed, since the look before. Until Sentinel demotes it, an old primary that was paused or cut
off (not killed) still takes writes from connections opened before the failover: a worker's
later attempt sent there, once it is back, is gone with it when it becomes a replica, and the
command, ``retrying`` in the log, would wait for the stalled-command sweep (minutes)."""

LOOK_MARGIN = timedelta(seconds=2)
"""Taken before the previous look in :data:`SETTLING`: the look's time is beat's clock, a
retry's a worker's, and a retry is recorded just before its message goes."""

LOST_DATASET_LOOKBACK = timedelta(days=1)
"""After a Redis restarted with an empty dataset, how far back the sweep republishes: every
message the broker held is gone, not only the latest writes. Older commands are the
stalled-command sweep's (its threshold is minutes)."""

REPUBLISH_LIMIT = 10_000
"""The most commands one failover republishes (the oldest first); the stalled-command sweep
takes any beyond."""

RESTREAM_LIMIT = 10_000
"""The most events one failover appends to the stream again: the latest (a consumer most
likely read the older ones before the fault)."""

RESTREAM_BATCH = 500

LOCK_PATIENCE_SECONDS = 15.0
"""How long the sweep waits for the relay's lock before appending the events again: beyond a
relay's run, and the life of a lock whose relay died (10 s)."""


@dataclass(frozen=True)
class FailoverRecovery:
    """What one run of the sweep did: whether the primary changed, and what went out again."""

    failed_over: bool = False
    republished: int = 0
    reclaimed: int = 0
    """Claimed plan changes whose apply command went out again."""
    restreamed: int = 0
    """Events appended to the stream again."""


def recover_from_failover(sweep: RecoverFromFailover, app: FailoverContext) -> FailoverRecovery:
    """Look at the broker's primary; after a failover, republish what it may have dropped."""
    watch = app.broker_primary()
    sighting = watch.sight(app.clock.now())
    if sighting.previous_seen_at is None:
        return FailoverRecovery()
    if not sighting.changed:
        settling = sighting.failed_over_at is not None and (
            app.clock.now() - sighting.failed_over_at <= SETTLING
        )
        if not settling:
            return FailoverRecovery()
        late = _republish(app, sighting.previous_seen_at - LOOK_MARGIN, AWAITING_RETRY)
        if late.republished or late.reclaimed or late.restreamed:
            logger.warning(
                "within %ss of a failover: republished %d commands that went retrying or "
                "waiting and the apply commands of %d plan changes claimed since %s, and "
                "appended %d events to the stream again",
                SETTLING.total_seconds(),
                late.republished,
                late.reclaimed,
                sighting.previous_seen_at.isoformat(),
                late.restreamed,
            )
        return late
    lookback = LOST_DATASET_LOOKBACK if sighting.dataset_lost else CLOCK_SKEW_MARGIN
    since = sighting.previous_seen_at - lookback
    recovery = _republish(app, since, AWAITING_DELIVERY)
    watch.settle(sighting, app.clock.now())
    logger.warning(
        "the broker's primary changed%s (last seen before at %s): republished %d commands "
        "awaiting delivery and the apply commands of %d plan changes claimed since %s, and "
        "appended %d events to the stream again",
        ", its dataset empty" if sighting.dataset_lost else "",
        sighting.previous_seen_at.isoformat(),
        recovery.republished,
        recovery.reclaimed,
        since.isoformat(),
        recovery.restreamed,
    )
    return FailoverRecovery(
        failed_over=True,
        republished=recovery.republished,
        reclaimed=recovery.reclaimed,
        restreamed=recovery.restreamed,
    )


def _republish(
    app: FailoverContext, since: datetime, statuses: Sequence[CommandStatus]
) -> FailoverRecovery:
    """Publish again the commands that went into ``statuses`` at ``since`` or later, and the
    apply command of every plan change claimed since then."""
    awaiting = app.commands.awaiting_delivery_since(since, REPUBLISH_LIMIT, statuses)
    publisher = app.publisher()
    for record in awaiting:
        publish_recorded(record, publisher, app.commands, retries=retries_used(record))
    with app.unit_of_work() as uow:
        claims = uow.scheduled_changes.claimed_since(
            since, app.billing.change_lease, REPUBLISH_LIMIT
        )
    with publisher.batch() as batch:
        for claim in claims:
            # The claim's own command again (not a new claim): where its message survived, the
            # duplicate is the same command in the log, and costs a look-up.
            batch.publish(
                CommandMessage.of(
                    apply_command_for(claim), priority=BULK_MESSAGE_PRIORITY, result_kept=False
                )
            )
    restreamed = _restream_events(app, since)
    return FailoverRecovery(republished=len(awaiting), reclaimed=len(claims), restreamed=restreamed)


def _restream_events(app: FailoverContext, since: datetime) -> int:
    """Append again the events published at ``since`` or later (the latest
    :data:`RESTREAM_LIMIT`), holding the relay's lock: a relay appending a later event of a
    subject meanwhile would put it before the earlier one. Without the lock (a relay still
    holds it after :data:`LOCK_PATIENCE_SECONDS`) they go anyway: late and twice is better
    than lost, and a consumer keeps the first of each id."""
    with app.unit_of_work() as uow:
        events = uow.events.published_since(since, RESTREAM_LIMIT)
    if not events:
        return 0
    lock = app.relay_lock()
    deadline = time.monotonic() + LOCK_PATIENCE_SECONDS
    locked = lock.acquire()
    while not locked and time.monotonic() < deadline:
        time.sleep(0.2)
        locked = lock.acquire()
    try:
        stream = app.event_stream()
        for start in range(0, len(events), RESTREAM_BATCH):
            stream.append(events[start : start + RESTREAM_BATCH])
    finally:
        if locked:
            lock.release()
    return len(events)

"""Webhook deliveries: made by the relay (one per endpoint that wants an event), sent by the
``webhooks.deliver`` task, retried through beat's sweep.

A delivery is taken for an attempt with a claim (a lease and a number); its message carries
the number, so a message of an older claim (a duplicate, or one whose lease ran out and was
taken again) does nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from domain.ports import Application, RecordedEvent, UnitOfWork
from domain.webhooks import DeliveryClaim, DeliveryPolicy, WebhookDelivery, WebhookEndpoint

logger = logging.getLogger(__name__)

DELIVER_WEBHOOK = "webhooks.deliver"
"""The delivery task (a public name: never renamed)."""
WEBHOOKS_QUEUE = "webhooks"
"""Deliveries have their own queue: a slow receiver never holds up billing commands."""


def fan_out(
    uow: UnitOfWork,
    events: Sequence[RecordedEvent],
    endpoints: Sequence[WebhookEndpoint],
    now: datetime,
    policy: DeliveryPolicy,
) -> list[DeliveryClaim]:
    """One delivery per event and endpoint that wants it, taken at once for its first
    attempt (the caller commits, then publishes the claims)."""
    claims: list[DeliveryClaim] = []
    for event in events:
        for endpoint in endpoints:
            if not endpoint.wants(event.type):
                continue
            delivery = WebhookDelivery.of(
                event.id, event.type, event.sequence, event.subject_key, endpoint.id, now
            )
            claims.append(DeliveryClaim(delivery.id, delivery.claim(now, policy.lease)))
            uow.webhook_deliveries.add(delivery)
    return claims


def publish_deliveries(app: Application, claims: Sequence[DeliveryClaim]) -> int:
    """Send each claim's message; one that cannot go is left to the sweep (its lease runs
    out and it is taken again). Returns how many went."""
    publisher = app.publisher()
    sent = 0
    for claim in claims:
        try:
            publisher.publish(
                DELIVER_WEBHOOK,
                {"delivery_id": claim.delivery_id, "claim": claim.number},
                command_id=f"deliver:{claim.delivery_id}:{claim.number}",
                queue=WEBHOOKS_QUEUE,
            )
        except Exception:
            logger.warning(
                "could not publish delivery %s; the sweep sends it",
                claim.delivery_id,
                exc_info=True,
            )
            continue
        sent += 1
    return sent

"""Webhook deliveries: made by the relay (one per endpoint that wants an event), sent by the
``webhooks.deliver`` task, retried through beat's sweep.

A delivery is taken for an attempt with a claim (a lease and a number); its message carries
the number, so a message of an older claim (a duplicate, or one whose lease ran out and was
taken again) does nothing.

Retries are scheduled on the delivery's row (``next_attempt_at``), never as Celery
countdowns: Redis hands an ETA message to another worker once it is older than the broker's
visibility timeout, and a message cannot wait a day. Beat's sweep (``send_due_deliveries``)
claims what fell due and publishes it.

Every answer but a 2xx is retried (4xx included, 410 Gone too): a receiver's deployment gone
wrong answers 404 or 410 as readily as 500, and a day of retries costs little, whereas a
delivery given up is lost to the receiver until an operator replays it. A delivery that
fails for the whole budget disables its endpoint, with the reason recorded, and its other
unfinished deliveries fail with it (replayable).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from application.handlers.events.webhook_endpoints import MAX_REASON, disable_endpoint
from application.requests.operator_requests import DisableEndpoint
from application.requests.sweeps import PublishDeliveries, SendDueDeliveries
from application.retry import RetryPolicy
from domain.errors import NotFound
from domain.ports.application import OutboxContext
from domain.ports.commands import CommandMessage
from domain.ports.events import RecordedEvent, WebhookResponse
from domain.ports.repositories import UnitOfWork
from domain.webhooks import (
    DeliveryClaim,
    DeliveryMessage,
    DeliveryPolicy,
    DeliveryState,
    WebhookDelivery,
    WebhookEndpoint,
)

logger = logging.getLogger(__name__)

DELIVER_WEBHOOK = "webhooks.deliver"
"""The delivery task (a public name: never renamed)."""
SEND_DUE_DELIVERIES = "webhooks.send_due_deliveries"
"""Beat's sweep of deliveries whose next attempt fell due (on the maintenance queue)."""
WEBHOOKS_QUEUE = "webhooks"
"""Deliveries have their own queue: a slow receiver never holds up billing commands."""
DUE_DELIVERIES_BATCH = 500
"""Deliveries one sweep claims at most; the next sweep takes the rest."""


class Outcome(StrEnum):
    """What one delivery message did (the task's result, counted by the worker's metrics)."""

    SUCCEEDED = "succeeded"
    """The receiver answered 2xx."""
    RETRYING = "retrying"
    """The attempt failed; the next one is scheduled."""
    FAILED = "failed"
    """The attempt failed and the budget is spent: the endpoint is disabled."""
    ABANDONED = "abandoned"
    """Not attempted: the endpoint is disabled or gone, or the event is."""
    WAITING = "waiting"
    """Not attempted: an earlier delivery of its subject is unfinished."""
    STALE = "stale"
    """Nothing done: the message's claim is not the delivery's current one, or it finished."""


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


def publish_deliveries(request: PublishDeliveries, app: OutboxContext) -> int:
    """Send each claim's message; one that cannot go is left to the sweep (its lease runs
    out and it is taken again). Returns how many went."""
    if not request.claims:
        return 0
    sent = 0
    try:
        with app.publisher().batch() as publisher:
            for claim in request.claims:
                try:
                    publisher.publish(
                        CommandMessage(
                            id=f"deliver:{claim.delivery_id}:{claim.number}",
                            type=DELIVER_WEBHOOK,
                            payload={"delivery_id": claim.delivery_id, "claim": claim.number},
                            queue=WEBHOOKS_QUEUE,
                        )
                    )
                except Exception:
                    logger.warning(
                        "could not publish delivery %s; the sweep sends it",
                        claim.delivery_id,
                        exc_info=True,
                    )
                    continue
                sent += 1
    except Exception:
        # Any of them may have gone; those that did not are taken again when their leases end.
        logger.warning("could not publish %d deliveries; the sweep sends them", sent, exc_info=True)
        return 0
    return sent


def send_due_deliveries(sweep: SendDueDeliveries, app: OutboxContext) -> int:
    """Beat's sweep: claim the deliveries that are due (a retry's time came, a predecessor
    finished, a worker died holding one) and publish them; returns how many were claimed.
    Sweeps may overlap: a delivery is claimed by one of them."""
    now = app.clock.now()
    with app.unit_of_work() as uow:
        claims = uow.webhook_deliveries.claim_due(
            now, now + app.deliveries.lease, DUE_DELIVERIES_BATCH
        )
        uow.commit()
    if claims:
        sent = publish_deliveries(PublishDeliveries(claims), app)
        logger.info("claimed %d due webhook deliveries, published %d", len(claims), sent)
    return len(claims)


def event_body(document: dict[str, Any]) -> bytes:
    """The request body: the event's document as compact JSON with sorted keys, so that
    every attempt of an event sends the same bytes (whatever order the database kept)."""
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def backoff(policy: DeliveryPolicy) -> RetryPolicy:
    """The project's backoff with the deliveries' bounds. The budget is a duration
    (``WebhookDelivery.attempt_failed``), so the attempt count never runs out here."""
    return RetryPolicy(
        max_attempts=2**31,
        base_delay=policy.base_delay.total_seconds(),
        max_delay=policy.max_delay.total_seconds(),
    )


@dataclass(frozen=True)
class _Attempt:
    url: str
    message_id: str
    body: bytes
    secrets: list[str]


def deliver(message: DeliveryMessage, app: OutboxContext) -> Outcome:
    """Attempt the delivery under the message's claim: POST the event to its endpoint and
    record the answer. Never raises for what the receiver did; a database error is raised
    (the task retries it, and the lease makes a second message harmless)."""
    delivery_id, claim = message.delivery_id, message.claim
    attempt = _prepare(app, delivery_id, claim)
    if isinstance(attempt, Outcome):
        return attempt
    # Outside any transaction: a receiver may take its whole timeout, and the claim's lease
    # keeps the delivery ours meanwhile.
    try:
        response = app.webhook_sender().send(
            attempt.url,
            message_id=attempt.message_id,
            body=attempt.body,
            secrets=attempt.secrets,
            timeout_seconds=app.deliveries.timeout.total_seconds(),
        )
    except Exception as error:  # the port never raises; an adapter's bug must not stall it
        logger.exception("webhook sender failed on delivery %s", delivery_id)
        response = WebhookResponse(status=None, error=f"sender error: {type(error).__name__}")
    return _record(app, delivery_id, claim, response)


def _prepare(app: OutboxContext, delivery_id: str, claim: int) -> Outcome | _Attempt:
    """Check the claim, the endpoint and the order: the request to send, or what was done
    instead of an attempt."""
    now = app.clock.now()
    with app.unit_of_work() as uow:
        deliveries = uow.webhook_deliveries
        delivery = deliveries.get(delivery_id, for_update=True)
        if delivery is None or not delivery.holds(claim):
            logger.info("delivery %s claim %d is stale; nothing to do", delivery_id, claim)
            return Outcome.STALE
        endpoint = uow.webhook_endpoints.get(delivery.endpoint_id)
        if endpoint is None or not endpoint.is_enabled:
            reason = "endpoint deleted" if endpoint is None else endpoint.disabled_reason
            delivery.abandon(f"endpoint disabled: {reason}", now)
            deliveries.save(delivery)
            uow.commit()
            return Outcome.ABANDONED
        earlier = deliveries.earlier_unfinished(delivery)
        if earlier is not None:
            # Not an attempt: no budget used. The predecessor's success claims this one at
            # once; the time set here is when the sweep looks again otherwise.
            delivery.postpone(max(_next_move(earlier), now), now)
            deliveries.save(delivery)
            uow.commit()
            logger.info("delivery %s waits for %s of its subject", delivery.id, earlier.id)
            return Outcome.WAITING
        event = uow.events.get(delivery.event_id)
        if event is None:
            delivery.abandon(f"event {delivery.event_id} no longer exists", now)
            deliveries.save(delivery)
            uow.commit()
            return Outcome.ABANDONED
        # The lease runs from the attempt, not from the claim: a message that waited in a
        # busy queue is not overtaken by a sweep while it talks to the receiver.
        delivery.renew(now, app.deliveries.lease)
        deliveries.save(delivery)
        uow.commit()
        # The webhook-id is the event's: the same on every retry and replay (receivers
        # deduplicate by it).
        return _Attempt(
            url=endpoint.url,
            message_id=event.id,
            body=event_body(event.document),
            secrets=endpoint.signing_secrets(now),
        )


def _next_move(earlier: WebhookDelivery) -> datetime:
    """When the earlier delivery next moves: its lease ends, or its retry falls due."""
    if earlier.state is DeliveryState.DELIVERING and earlier.lease_until is not None:
        return earlier.lease_until
    return earlier.next_attempt_at


def _record(app: OutboxContext, delivery_id: str, claim: int, response: WebhookResponse) -> Outcome:
    policy = app.deliveries
    now = app.clock.now()
    with app.unit_of_work() as uow:
        deliveries = uow.webhook_deliveries
        delivery = deliveries.get(delivery_id, for_update=True)
        # The claim still holds unless another took the delivery (or it was abandoned): a
        # lease that ran out while the receiver answered is still ours if nobody took it.
        if (
            delivery is None
            or delivery.state is not DeliveryState.DELIVERING
            or delivery.claims != claim
        ):
            logger.warning(
                "delivery %s was taken from claim %d during its attempt; its answer (%s) is "
                "dropped",
                delivery_id,
                claim,
                response.status,
            )
            return Outcome.STALE
        if response.ok:
            assert response.status is not None
            delivery.succeeded(response.status, now)
            deliveries.save(delivery)
            follower = _claim_next(uow, delivery, now, policy.lease)
            uow.commit()
            if follower is not None:
                publish_deliveries(PublishDeliveries([follower]), app)
            return Outcome.SUCCEEDED
        retry_at = now + timedelta(
            seconds=backoff(policy).delay(delivery.attempts, response.retry_after)
        )
        error = response.error or f"HTTP {response.status}"
        given_up = delivery.attempt_failed(response.status, error, now, retry_at, policy.budget)
        deliveries.save(delivery)
        uow.commit()
    if given_up:
        _disable_endpoint(app, delivery, policy.budget)
        logger.warning(
            "delivery %s of %s failed for its whole budget; endpoint %s disabled",
            delivery.id,
            delivery.event_id,
            delivery.endpoint_id,
        )
        return Outcome.FAILED
    logger.info(
        "delivery %s attempt %d failed (%s); next at %s",
        delivery.id,
        delivery.attempts,
        response.status if response.status is not None else "no answer",
        retry_at.isoformat(),
    )
    return Outcome.RETRYING


def _claim_next(
    uow: UnitOfWork, delivery: WebhookDelivery, now: datetime, lease: timedelta
) -> DeliveryClaim | None:
    """Take the subject's next delivery if it is waiting, so that ordered deliveries follow
    each other at once rather than at the next sweep. One under a live claim is left alone:
    its message runs and finds nothing earlier unfinished now."""
    follower = uow.webhook_deliveries.next_of_subject(delivery)
    if follower is None:
        return None
    follower = uow.webhook_deliveries.get(follower.id, for_update=True)
    if follower is None or follower.state is not DeliveryState.PENDING:
        return None
    number = follower.claim(now, lease)
    uow.webhook_deliveries.save(follower)
    return DeliveryClaim(follower.id, number)


def _disable_endpoint(app: OutboxContext, delivery: WebhookDelivery, budget: timedelta) -> None:
    """The budget is spent: the endpoint is disabled with the reason, and its other
    unfinished deliveries fail (each can be replayed once the receiver is back), as an
    operator disables it (the endpoint locked first, then each delivery)."""
    reason = (
        f"delivery {delivery.id} of {delivery.event_id} failed for {duration(budget)}: "
        f"{delivery.last_error}"
    )
    try:
        disable_endpoint(DisableEndpoint(delivery.endpoint_id, reason[:MAX_REASON]), app)
    except NotFound:
        logger.warning("endpoint %s of delivery %s is gone", delivery.endpoint_id, delivery.id)


def duration(span: timedelta) -> str:
    """``24h``, ``90m``, ``2s``: a budget as operators set it."""
    seconds = span.total_seconds()
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"

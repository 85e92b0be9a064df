"""Webhook delivery tasks. Task names are a public contract.

``webhooks.deliver`` makes one attempt of one delivery; its retries are scheduled on the
delivery's row and sent by beat's ``webhooks.send_due_deliveries`` (never as Celery
countdowns, which Redis cannot hold for a day). Neither raises for what a receiver did.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from celery import shared_task
from pydantic import ValidationError

from application.handlers.events.webhook_deliveries import (
    DELIVER_WEBHOOK,
    SEND_DUE_DELIVERIES,
    WEBHOOKS_QUEUE,
    deliver,
    send_due_deliveries,
)
from application.requests.sweeps import SendDueDeliveries
from application.retry import RetryPolicy
from domain.ports.application import Application
from domain.webhooks import DeliveryMessage
from tasks.runtime import ApplicationTask, SweepTask

__all__ = ["DELIVER_WEBHOOK", "SEND_DUE_DELIVERIES", "deliver_webhook", "send_due"]

logger = logging.getLogger(__name__)

REFUSED = "refused"
"""What a message that is not a delivery does (kept as a dead letter)."""


@shared_task(name=DELIVER_WEBHOOK, base=ApplicationTask, bind=True, ignore_result=True)
def deliver_webhook(self: ApplicationTask, *args: Any, **kwargs: Any) -> str:
    """One attempt of the delivery under claim ``claim``; returns what it did (counted by
    the worker's metrics). A message that is not a delivery (other arguments) is kept as a
    dead letter and does nothing: the queue is Redis's, and anyone there may publish."""
    app = self.application
    try:
        if args:
            raise ValueError("positional arguments")
        message = DeliveryMessage.model_validate(kwargs)
    except (ValidationError, ValueError) as error:
        return _refused(self, app, args, kwargs, error)
    try:
        return deliver(message, app).value
    except Exception as error:
        if not app.is_transient(error):
            raise
        # A busy or unreachable database: look again shortly with the same claim. Should
        # the lease run out first, the sweep takes the delivery and this message goes stale.
        policy = app.policy
        delay = RetryPolicy(
            policy.retry_max_attempts,
            policy.retry_base_delay_seconds,
            policy.retry_max_delay_seconds,
        ).delay(self.request.retries)
        raise self.retry(countdown=delay) from error


def _refused(
    task: ApplicationTask,
    app: Application,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    error: Exception,
) -> str:
    reason = f"not a webhook delivery: {error}".replace("\n", " ")[:500]
    logger.error("message %s refused: %s", task.request.id, reason)
    try:
        app.dead_letters().add(
            json.dumps({"args": list(args), "kwargs": kwargs}, default=str).encode(),
            queue=WEBHOOKS_QUEUE,
            reason=reason,
            task=task.name,
            task_id=str(task.request.id),
        )
    except Exception:
        logger.warning("could not keep the dead letter of %s", task.request.id)
    return REFUSED


@shared_task(name=SEND_DUE_DELIVERIES, base=SweepTask, bind=True, ignore_result=True)
def send_due(self: SweepTask) -> int:
    """Beat's sweep: claim the deliveries that fell due and publish them."""
    return send_due_deliveries(SendDueDeliveries(), self.application)

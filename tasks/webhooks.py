"""Webhook delivery tasks. Task names are a public contract.

``webhooks.deliver`` makes one attempt of one delivery; its retries are scheduled on the
delivery's row and sent by beat's ``webhooks.send_due_deliveries`` (never as Celery
countdowns, which Redis cannot hold for a day). Neither raises for what a receiver did.
"""

from __future__ import annotations

from celery import shared_task

from tasks.handlers.webhook_deliveries import (
    DELIVER_WEBHOOK,
    SEND_DUE_DELIVERIES,
    deliver,
    send_due_deliveries,
)
from tasks.retry import RetryPolicy
from tasks.runtime import ApplicationTask

__all__ = ["DELIVER_WEBHOOK", "SEND_DUE_DELIVERIES", "deliver_webhook", "send_due"]


@shared_task(name=DELIVER_WEBHOOK, base=ApplicationTask, bind=True, ignore_result=True)
def deliver_webhook(self: ApplicationTask, delivery_id: str, claim: int) -> str:
    """One attempt of the delivery under claim ``claim``; returns what it did (counted by
    the worker's metrics)."""
    app = self.application
    try:
        return deliver(app, delivery_id, claim).value
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


@shared_task(name=SEND_DUE_DELIVERIES, base=ApplicationTask, bind=True, ignore_result=True)
def send_due(self: ApplicationTask) -> int:
    """Beat's sweep: claim the deliveries that fell due and publish them."""
    return send_due_deliveries(self.application)

"""Celery tasks for subscription commands and beat's sweep of due plan changes.

Task names are a public contract: never rename one.
"""

from __future__ import annotations

import logging
from typing import Any

from domain.rate_budget import CallKind
from domain.subscriptions import ApplyScheduledChange, ChangeSubscriptionPlan
from tasks.base import CommandTask
from tasks.handlers.subscriptions import (
    apply_command_for,
    change_subscription_plan,
    claim_due_changes,
    release_claim,
)
from tasks.handlers.subscriptions import (
    apply_scheduled_change as handle_apply_scheduled_change,
)
from worker.bootstrap import services
from worker.celery_app import BULK_MESSAGE_PRIORITY, ENQUEUE_DUE_CHANGES, app

logger = logging.getLogger(__name__)

SWEEP_SLACK_SECONDS = 3.0
"""Work claimed beyond the next sweeps, for a sweep that runs late."""


@app.task(name=ChangeSubscriptionPlan.TASK_NAME, base=CommandTask, bind=True)
def change_plan(self: CommandTask, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return self.run_command(ChangeSubscriptionPlan, change_subscription_plan, args, kwargs)


@app.task(name=ApplyScheduledChange.TASK_NAME, base=CommandTask, bind=True)
def apply_scheduled_change(self: CommandTask, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return self.run_command(ApplyScheduledChange, handle_apply_scheduled_change, args, kwargs)


@app.task(name=ENQUEUE_DUE_CHANGES, ignore_result=True)
def enqueue_due_changes() -> int:
    """Claim the plan changes that fell due, with a lease, and publish one apply command for
    each. Any number of beats may schedule this sweep and any number of workers may run it at
    once: a change is claimed by one sweep, and claimed again only once its lease ran out."""
    svc = services()
    settings = svc.settings
    budget = svc.rate_budget()
    claims = claim_due_changes(
        svc,
        settings.scheduled_changes_batch_size,
        # One provider call applies a change; feed the workers what the budget can apply
        # before the sweep after next (and a late sweep), so they never idle and no claim
        # waits out its lease.
        apply_rate=budget.effective_rate(CallKind.WRITE) if budget.enabled else None,
        horizon_seconds=2 * settings.scheduled_changes_interval_seconds + SWEEP_SLACK_SECONDS,
    )
    published = 0
    for claim in claims:
        command = apply_command_for(claim)
        try:
            app.send_task(
                command.TASK_NAME,
                kwargs=command.model_dump(mode="json"),
                task_id=command.command_id,
                queue=command.QUEUE,
                # Behind interactive commands on the same queue (Redis serves 0 first).
                priority=BULK_MESSAGE_PRIORITY,
                retry=True,
                retry_policy={"max_retries": 2, "interval_start": 0.1, "interval_step": 0.2},
            )
        except Exception:
            logger.warning("could not publish %s; releasing it", command.command_id, exc_info=True)
            release_claim(claim, svc)
            continue
        published += 1
    if claims:
        logger.info("claimed %d due plan changes, published %d", len(claims), published)
    return published

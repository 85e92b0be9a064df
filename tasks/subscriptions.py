"""Celery tasks for subscription commands and beat's sweep of due plan changes.

Task names are a public contract: never rename one.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from application.handlers.operations.sweeps import publish_due_changes
from application.handlers.subscriptions.plan_changes import change_subscription_plan
from application.handlers.subscriptions.previews import preview_plan_change
from application.handlers.subscriptions.scheduled_changes import (
    apply_scheduled_change as handle_apply_scheduled_change,
)
from application.handlers.subscriptions.staged_withdrawals import (
    finish_staged_withdrawal as handle_finish_staged_withdrawal,
)
from application.requests.sweeps import ENQUEUE_DUE_CHANGES, PublishDueChanges
from domain.subscriptions.change_commands import (
    ApplyScheduledChange,
    ChangeSubscriptionPlan,
    FinishStagedWithdrawal,
)
from domain.subscriptions.change_previews import PreviewPlanChange
from tasks.base import CommandTask
from tasks.runtime import SweepTask

logger = logging.getLogger(__name__)


@shared_task(name=ChangeSubscriptionPlan.TASK_NAME, base=CommandTask, bind=True)
def change_plan(self: CommandTask, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return self.run_command(ChangeSubscriptionPlan, change_subscription_plan, args, kwargs)


@shared_task(name=PreviewPlanChange.TASK_NAME, base=CommandTask, bind=True)
def preview_change(self: CommandTask, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return self.run_command(PreviewPlanChange, preview_plan_change, args, kwargs)


@shared_task(name=ApplyScheduledChange.TASK_NAME, base=CommandTask, bind=True)
def apply_scheduled_change(self: CommandTask, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return self.run_command(ApplyScheduledChange, handle_apply_scheduled_change, args, kwargs)


@shared_task(name=FinishStagedWithdrawal.TASK_NAME, base=CommandTask, bind=True)
def finish_staged_withdrawal(self: CommandTask, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return self.run_command(FinishStagedWithdrawal, handle_finish_staged_withdrawal, args, kwargs)


@shared_task(name=ENQUEUE_DUE_CHANGES, base=SweepTask, bind=True, ignore_result=True)
def enqueue_due_changes(self: SweepTask, claimed_this_tick: int = 0) -> int:
    """Beat's sweep: publish an apply command for each plan change that fell due. A run whose
    time ran out with due work left sends the next run at once, with what this tick claimed
    so far (beat sends none), so that a burst is fed as fast as one long run would feed it and
    no run holds its process long."""
    application = self.application
    outcome = publish_due_changes(PublishDueChanges(claimed_before=claimed_this_tick), application)
    if outcome.more:
        # As long as beat's own runs wait: a follow-up that waited longer is superseded.
        interval = application.policy.due_changes_interval_seconds
        try:
            self.run_again_now(
                args=(claimed_this_tick + outcome.claimed,), expires=max(interval * 4, 2.0)
            )
        except Exception:  # the broker away: beat's next tick takes the rest
            logger.warning("could not send the due-changes sweep's next run", exc_info=True)
    return outcome.published

"""Celery tasks of Stripe's truth flowing in: one command per Stripe event, and beat's
reconciliation sweep. Task names are a public contract: never rename one."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from application.handlers.provider.reconcile import reconcile_with_stripe
from application.handlers.provider.sync import sync_stripe_object
from application.requests.sweeps import RECONCILE_WITH_STRIPE, ReconcileWithStripe
from domain.provider.sync import SyncStripeObject
from tasks.base import CommandTask
from tasks.runtime import SweepTask


@shared_task(name=SyncStripeObject.TASK_NAME, base=CommandTask, bind=True)
def sync_object(self: CommandTask, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return self.run_command(SyncStripeObject, sync_stripe_object, args, kwargs)


@shared_task(name=RECONCILE_WITH_STRIPE, base=SweepTask, bind=True, ignore_result=True)
def reconcile(self: SweepTask) -> dict[str, int]:
    """Beat's sweep: re-read what was read longest ago; returns the drift found, by kind."""
    app = self.application
    return reconcile_with_stripe(ReconcileWithStripe(app.policy.reconcile_reads_per_sweep), app)

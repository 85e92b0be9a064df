"""Celery tasks for billing account commands. Task names are a public contract: never rename."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from domain.billing import CreateBillingAccount, RegisterBillingAccount
from tasks.base import CommandTask
from tasks.handlers.billing import create_billing_account, register_billing_account


@shared_task(name=CreateBillingAccount.TASK_NAME, base=CommandTask, bind=True)
def create_account(self: CommandTask, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return self.run_command(CreateBillingAccount, create_billing_account, args, kwargs)


@shared_task(name=RegisterBillingAccount.TASK_NAME, base=CommandTask, bind=True)
def register_account(self: CommandTask, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return self.run_command(RegisterBillingAccount, register_billing_account, args, kwargs)

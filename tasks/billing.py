"""Celery tasks for billing account commands, and beat's re-drive of accounts stuck pending.
Task names are a public contract: never rename."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from application.handlers.billing.accounts import create_billing_account, register_billing_account
from application.handlers.operations.sweeps import redrive_pending_accounts as redrive
from application.requests.sweeps import REDRIVE_PENDING_ACCOUNTS, RedrivePendingAccounts
from domain.billing.account_commands import CreateBillingAccount, RegisterBillingAccount
from tasks.base import CommandTask
from tasks.runtime import SweepTask


@shared_task(name=CreateBillingAccount.TASK_NAME, base=CommandTask, bind=True)
def create_account(self: CommandTask, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return self.run_command(CreateBillingAccount, create_billing_account, args, kwargs)


@shared_task(name=RegisterBillingAccount.TASK_NAME, base=CommandTask, bind=True)
def register_account(self: CommandTask, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return self.run_command(RegisterBillingAccount, register_billing_account, args, kwargs)


@shared_task(name=REDRIVE_PENDING_ACCOUNTS, base=SweepTask, bind=True, ignore_result=True)
def redrive_pending_accounts(self: SweepTask) -> int:
    """Beat's sweep: send the registration of each account pending too long again."""
    return redrive(RedrivePendingAccounts(), self.application)

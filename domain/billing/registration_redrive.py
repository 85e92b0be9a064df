"""The redrive of registrations stuck ``pending``: the sweep sends each such account's
registration again, one command per period, so that a lost or exhausted registration is not
left waiting for an operator."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from domain.billing.account_commands import RegisterBillingAccount
from domain.billing.accounts import BillingAccount, BillingAccountState

REDRIVE_COMMAND_PREFIX = "redrive"


def redrive_registration(
    account: BillingAccount, now: datetime, after: timedelta
) -> RegisterBillingAccount | None:
    """The command that sends the registration of an account stuck ``pending`` again, once
    it has been pending for ``after`` (its registration exhausted its retries, or its message
    was lost); ``None`` for any other account.

    Its id names the account and the attempt, the number of whole ``after`` periods since
    the account was opened: every sweep within one period sends the same command, which the
    command log runs once (a duplicate replays its outcome); the next period sends the next
    attempt."""
    if account.state is not BillingAccountState.PENDING or account.is_registered:
        return None
    age = now - account.created_at
    if age < after or after <= timedelta(0):
        return None
    attempt = int(age / after)
    command_id = f"{REDRIVE_COMMAND_PREFIX}:{account.id}:{attempt}"
    if len(command_id) > 64:  # a command id's longest; an account id may be 128 long
        digest = uuid.uuid5(uuid.NAMESPACE_URL, f"billing-worker:{account.id}").hex
        command_id = f"{REDRIVE_COMMAND_PREFIX}:{digest}:{attempt}"
    return RegisterBillingAccount(
        command_id=command_id, org_id=account.org_id, billing_account_id=account.id
    )

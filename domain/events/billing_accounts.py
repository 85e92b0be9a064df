"""Events of billing accounts: one opened, registered with the provider or refused by it
for good, its registration sent again or abandoned (offline), and its customer deleted at the
provider. The catalog (``domain.events.catalog``) knows them by name.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Self

from pydantic import Field

from domain.billing.accounts import BillingAccount
from domain.events.base import Event, Subject
from domain.messages import Message
from domain.redaction import redact


class BillingAccountData(Message):
    billing_account_id: str
    org_id: str
    state: str = Field(
        description="pending, active or disabled; removed when a refused registration "
        "removed a pending account (billing_account.registration_failed)."
    )
    offline: bool = Field(description="Whether it is not (yet) known to the provider.")
    currency: str
    provider: str | None = None
    provider_customer_id: str | None = None


class BillingAccountRegistrationFailedData(BillingAccountData):
    error: dict[str, Any] = Field(description="The error body (personal data masked).")


def _account_data(account: BillingAccount) -> dict[str, Any]:
    return {
        "billing_account_id": account.id,
        "org_id": account.org_id,
        "state": account.state.value,
        "offline": not account.is_registered,
        "currency": account.currency,
        "provider": account.provider,
        "provider_customer_id": account.provider_id,
    }


def _account_subject(account: BillingAccount) -> Subject:
    return Subject(type="billing_account", id=account.id)


class _BillingAccountEvent(Event):
    data: BillingAccountData

    @classmethod
    def of(cls, account: BillingAccount, *, command_id: str | None, now: datetime) -> Self:
        # Each concrete subclass defaults its own ``type``.
        return cls(  # type: ignore[call-arg]
            occurred_at=now,
            command_id=command_id,
            subject=_account_subject(account),
            data=BillingAccountData.model_validate(_account_data(account)),
        )


class BillingAccountCreated(_BillingAccountEvent):
    """An organization's billing account was opened (``pending`` until registered online,
    ``active`` offline)."""

    TYPE = "billing_account.created"
    type: Literal["billing_account.created"] = "billing_account.created"


class BillingAccountRegistered(_BillingAccountEvent):
    """The account got its customer at the provider."""

    TYPE = "billing_account.registered"
    type: Literal["billing_account.registered"] = "billing_account.registered"


class BillingAccountCustomerDeleted(_BillingAccountEvent):
    """The account's customer was deleted at the provider (its subscriptions end with it)."""

    TYPE = "billing_account.customer_deleted"
    type: Literal["billing_account.customer_deleted"] = "billing_account.customer_deleted"


class BillingAccountRegistrationRetried(_BillingAccountEvent):
    """An operator sent a pending account's registration again now; the registration runs as
    the command of this event's ``command_id``."""

    TYPE = "billing_account.registration_retried"
    type: Literal["billing_account.registration_retried"] = "billing_account.registration_retried"


class BillingAccountMarkedOffline(_BillingAccountEvent):
    """An operator made a pending account offline: ``active`` without the provider, its
    registration abandoned (it can be registered later)."""

    TYPE = "billing_account.marked_offline"
    type: Literal["billing_account.marked_offline"] = "billing_account.marked_offline"


class BillingAccountRegistrationFailed(Event):
    """The provider refused the account for good. A ``pending`` account is removed (its
    ``state`` here is ``removed``); an offline one stays as it was."""

    TYPE = "billing_account.registration_failed"
    type: Literal["billing_account.registration_failed"] = "billing_account.registration_failed"
    data: BillingAccountRegistrationFailedData

    @classmethod
    def of(
        cls,
        account: BillingAccount,
        error: dict[str, Any],
        *,
        removed: bool,
        command_id: str | None,
        now: datetime,
    ) -> Self:
        values = _account_data(account)
        if removed:
            values["state"] = "removed"
        return cls(
            occurred_at=now,
            command_id=command_id,
            subject=_account_subject(account),
            data=BillingAccountRegistrationFailedData.model_validate(
                {**values, "error": redact(error)}
            ),
        )

"""The commands that open a billing account and register it with the provider (spec sections
3 and 4.1), and the create request's result."""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from pydantic import StrictBool, model_validator

from domain.billing.account_details import BillingDetails
from domain.messages import Command, ResourceId, Result


def _account_id_for(command_id: str) -> str:
    return "ba_" + uuid.uuid5(uuid.NAMESPACE_URL, f"billing-worker:{command_id}").hex


class CreateBillingAccount(Command):
    """Create an organization's billing account (``POST .../organizations/{org_id}/billing``).

    ``billing_account_id`` may be chosen by the publisher; by default it is derived from
    ``command_id``, so a redelivered command always reaches the same account.
    """

    TASK_NAME: ClassVar[str] = "billing.create_account"
    QUEUE: ClassVar[str] = "billing"
    OMITTABLE: ClassVar[frozenset[str]] = frozenset({"command_id", "billing_account_id"})

    org_id: ResourceId
    billing_account_id: ResourceId
    account: BillingDetails
    offline: StrictBool = False

    @model_validator(mode="before")
    @classmethod
    def _default_account_id(cls, data: Any) -> Any:
        if isinstance(data, dict) and "billing_account_id" not in data:
            command_id = data.get("command_id")
            if isinstance(command_id, str) and command_id:
                return {**data, "billing_account_id": _account_id_for(command_id)}
        return data


class RegisterBillingAccount(Command):
    """Register an offline (or still pending) billing account with the provider."""

    TASK_NAME: ClassVar[str] = "billing.register_account"
    QUEUE: ClassVar[str] = "billing"

    org_id: ResourceId
    billing_account_id: ResourceId


class BillingAccountReady(Result):
    """The account as it now stands, with its organization (the create response)."""

    billing_account: dict[str, Any]
    organization: dict[str, Any]

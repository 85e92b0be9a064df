"""Billing accounts (spec sections 2.1, 3 and 4.1): the account, its states and its
registration with the provider, and what the provider is told about it
(:class:`ProviderCustomer`).

What a caller may send is validated in :mod:`domain.billing.account_details`; the commands are
in :mod:`domain.billing.account_commands`.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from domain.billing.account_details import Address, BillingDetails, TaxEntry
from domain.billing.organizations import Organization
from domain.errors import FailedPrecondition, error_info
from domain.messages import json_value


class BillingAccountState(StrEnum):
    """``pending``: being registered with the provider; ``active``: usable (registered, or
    offline); ``disabled``: closed, no longer counts as the organization's account;
    ``deleted``: its customer was deleted at the provider (Stripe's ``customer.deleted``, or
    the reconciliation found it so): it bills nothing more, its subscriptions ended with it,
    commands on it are refused (``BILLING_ACCOUNT_CUSTOMER_DELETED``), and it no longer
    counts as the organization's account, which may open a new one."""

    PENDING = "pending"
    ACTIVE = "active"
    DISABLED = "disabled"
    DELETED = "deleted"

    @property
    def is_live(self) -> bool:
        """Whether it counts as its organization's account (``pending`` or ``active``)."""
        return self in (BillingAccountState.PENDING, BillingAccountState.ACTIVE)


@dataclass(frozen=True)
class ProviderCustomer:
    """What the provider is told about an account (values only, no provider objects)."""

    billing_account_id: str
    org_id: str
    name: str
    email: str
    phone: str
    address: Address
    tax_ids: tuple[TaxEntry, ...]
    metadata: dict[str, str]


_NOT_SHOWN = frozenset({"registration_key", "registration_started_at", "synced_at"})


@dataclass
class BillingAccount:
    id: str
    org_id: str
    name: str
    email: str
    phone: str
    address: Address
    currency: str
    tax_data: list[TaxEntry]
    metadata: dict[str, Any]
    state: BillingAccountState
    created_at: datetime
    updated_at: datetime
    provider: str | None = None
    provider_id: str | None = None
    registration_key: str | None = None
    registration_started_at: datetime | None = None
    customer_deleted_at: datetime | None = None
    """When the provider's customer was found deleted (by a webhook or the sweep)."""
    synced_at: datetime | None = None
    """When the provider's customer was last read (the reconciliation sweep's order)."""

    @classmethod
    def open(
        cls,
        account_id: str,
        organization: Organization,
        details: BillingDetails,
        *,
        offline: bool,
        default_currency: str,
        now: datetime,
    ) -> BillingAccount:
        """A new account: ``active`` at once offline, ``pending`` until registered online."""
        account = cls(
            id=account_id,
            org_id=organization.id,
            name=details.name,
            email=details.email,
            phone=details.phone,
            address=details.address,
            currency=details.currency or default_currency,
            tax_data=details.resolved_tax_data(),
            metadata=dict(details.metadata),
            state=BillingAccountState.ACTIVE if offline else BillingAccountState.PENDING,
            created_at=now,
            updated_at=now,
        )
        if not offline:
            account.begin_registration(now)
        return account

    @property
    def is_registered(self) -> bool:
        return self.provider_id is not None

    def begin_registration(self, now: datetime) -> str:
        """The idempotency key of this registration, made (and to be persisted) once.

        Every retry of one registration uses the same key, so the provider makes one
        customer however often the call is repeated within its idempotency window.
        """
        if self.registration_key is None:
            self.registration_key = f"{self.id}:create-customer:{uuid.uuid4().hex[:12]}"
            self.registration_started_at = now
            self.updated_at = now
        return self.registration_key

    def registration_outlived(self, window: timedelta, now: datetime) -> bool:
        """Whether the provider may have forgotten the key: search before creating again."""
        started = self.registration_started_at
        return started is not None and now - started >= window

    def abandon_registration(self, now: datetime) -> None:
        """The provider refused the registration for good; a later one gets a new key."""
        self.registration_key = None
        self.registration_started_at = None
        self.updated_at = now

    def ensure_registration_pending(self) -> None:
        """Only a ``pending`` account waits for its registration (an operator's retry)."""
        if self.state is not BillingAccountState.PENDING or self.is_registered:
            shown = "registered" if self.is_registered else self.state.value
            raise FailedPrecondition(
                f"billing account {self.id!r} is {shown}: no registration is pending",
                details=[error_info("REGISTRATION_NOT_PENDING", billing_account_id=self.id)],
            )

    def mark_offline(self, now: datetime) -> bool:
        """A ``pending`` account becomes ``active`` without the provider (an operator gave
        up on registering it for now); returns whether it changed (an offline one stays)."""
        if self.state is BillingAccountState.ACTIVE and not self.is_registered:
            return False
        self.ensure_registration_pending()
        self.state = BillingAccountState.ACTIVE
        self.abandon_registration(now)
        return True

    def registered(self, provider: str, provider_id: str, now: datetime) -> None:
        self.provider = provider
        self.provider_id = provider_id
        self.registration_key = None
        if self.state is BillingAccountState.PENDING:
            self.state = BillingAccountState.ACTIVE
        self.updated_at = now

    def customer_deleted(self, now: datetime) -> bool:
        """The provider's customer is gone: the account is ``deleted``; returns whether that
        is news."""
        if self.customer_deleted_at is not None and self.state is BillingAccountState.DELETED:
            return False
        self.customer_deleted_at = self.customer_deleted_at or now
        self.state = BillingAccountState.DELETED
        self.updated_at = now
        return True

    def ensure_customer_exists(self) -> None:
        """Refuse a command that needs the provider's customer once it was deleted there."""
        if self.state is BillingAccountState.DELETED:
            raise FailedPrecondition(
                f"billing account {self.id!r} is deleted: its Stripe customer "
                f"{self.provider_id} was deleted at Stripe"
                + (
                    f" ({self.customer_deleted_at.isoformat()})"
                    if self.customer_deleted_at is not None
                    else ""
                )
                + "; open a new billing account for the organization",
                details=[
                    error_info(
                        "BILLING_ACCOUNT_CUSTOMER_DELETED",
                        billing_account_id=self.id,
                        customer_id=self.provider_id or "",
                    )
                ],
            )

    def provider_customer(self) -> ProviderCustomer:
        metadata = {key: _metadata_text(value) for key, value in self.metadata.items()}
        metadata.update(org_id=self.org_id, billing_account_id=self.id)
        return ProviderCustomer(
            billing_account_id=self.id,
            org_id=self.org_id,
            name=self.name,
            email=self.email,
            phone=self.phone,
            address=self.address,
            tax_ids=tuple(self.tax_data),
            metadata=metadata,
        )

    def to_view(self) -> dict[str, Any]:
        """The billing account object of the API (spec section 2.1): every field but the
        registration's bookkeeping, so a new field is shown without another line here."""
        view = {
            field.name: json_value(getattr(self, field.name))
            for field in fields(self)
            if field.name not in _NOT_SHOWN
        }
        view["provider"] = self.provider or ""
        view["provider_id"] = self.provider_id or ""
        return view


def _metadata_text(value: Any) -> str:
    """Provider metadata values are strings: ``true``, ``42``, ``1.5`` as JSON writes them."""
    return value if isinstance(value, str) else json.dumps(value)

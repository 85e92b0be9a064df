"""Billing accounts (spec sections 2.1, 3 and 4.1).

The command messages validate what can be judged from the message alone: formats, sizes,
whether a tax type can be resolved. Everything that needs the database (does the organization
exist, is it enabled, does it already have an account) is decided by the handler.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Self

import phonenumbers
import pycountry
from pydantic import (
    Field,
    StrictBool,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from domain.billing.currencies import currency_code
from domain.billing.organizations import Organization
from domain.billing.tax_ids import resolve_tax_type
from domain.errors import FailedPrecondition, error_info
from domain.messages import Command, Message, ResourceId, Result, json_value
from domain.rules import normalized_email

PROVIDER_METADATA_KEYS = ("org_id", "billing_account_id")
"""Metadata keys we set on the provider's customer; callers may not use them."""

MAX_METADATA_KEYS = 50 - len(PROVIDER_METADATA_KEYS)  # Stripe allows 50 keys in all
MAX_METADATA_KEY_LENGTH = 40
MAX_METADATA_VALUE_LENGTH = 500
MAX_TAX_ENTRIES = 25

Line = Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)]


def _error(kind: str, message: str) -> PydanticCustomError:
    return PydanticCustomError(kind, message)


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


class Address(Message):
    line1: Line = ""
    line2: Line = ""
    city: Line = ""
    state: Line = ""
    postal_code: Annotated[str, StringConstraints(strip_whitespace=True, max_length=20)] = ""
    country: Annotated[str, StringConstraints(strip_whitespace=True, to_upper=True)] = ""

    @field_validator("country")
    @classmethod
    def _iso_country(cls, value: str) -> str:
        if value and (len(value) != 2 or pycountry.countries.get(alpha_2=value) is None):
            raise _error("country", "must be an ISO 3166-1 alpha-2 country code, such as US or DE")
        return value

    @property
    def is_empty(self) -> bool:
        return not any(self.model_dump().values())


class TaxEntry(Message):
    type: Annotated[
        str, StringConstraints(strip_whitespace=True, to_lower=True, min_length=1, max_length=32)
    ]
    id: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]


class BillingDetails(Message):
    """The ``body`` of a create request: the billing account as the caller describes it.

    ``name`` and ``email`` are required (an invoice needs both); the rest is optional.
    Fields are declared in dependency order: ``phone`` and ``tax_data`` read the country.
    """

    name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]
    email: Annotated[str, StringConstraints(strip_whitespace=True, max_length=320)]
    address: Address = Field(default_factory=Address)
    phone: Annotated[str, StringConstraints(strip_whitespace=True, max_length=32)] = ""
    currency: str | None = Field(
        default=None,
        description="ISO 4217, one Stripe accepts (usd, EUR); stored lower case; default: "
        "configured",
    )
    tax_data: list[TaxEntry] = Field(default_factory=list, max_length=MAX_TAX_ENTRIES)
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="Flat: string, number or boolean values (the provider keeps strings).",
    )

    @field_validator("email")
    @classmethod
    def _email(cls, value: str) -> str:
        return normalized_email(value)

    @field_validator("phone")
    @classmethod
    def _phone(cls, value: str, info: ValidationInfo) -> str:
        """Stored in E.164; a national number is read in the address country."""
        if not value:
            return value
        address = info.data.get("address")
        region = address.country if isinstance(address, Address) and address.country else None
        try:
            number = phonenumbers.parse(value, region)
        except phonenumbers.NumberParseException:
            number = None
        if number is None or not phonenumbers.is_valid_number(number):
            raise _error(
                "phone",
                "must be a valid phone number in E.164 form (+14155550123), or a national "
                "number of the address country",
            )
        return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)

    @field_validator("currency")
    @classmethod
    def _currency(cls, value: str | None) -> str | None:
        return None if value is None else currency_code(value)

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        if len(value) > MAX_METADATA_KEYS:
            raise _error("metadata", f"at most {MAX_METADATA_KEYS} keys")
        for key in value:
            if key in PROVIDER_METADATA_KEYS:
                raise _error("metadata", f"the key {key!r} is reserved")
            if not key or len(key) > MAX_METADATA_KEY_LENGTH or "[" in key or "]" in key:
                raise _error(
                    "metadata",
                    f"keys are 1 to {MAX_METADATA_KEY_LENGTH} characters without square "
                    f"brackets: {key[:50]!r}",
                )
            item = value[key]
            if isinstance(item, str):
                if len(item) > MAX_METADATA_VALUE_LENGTH:
                    raise _error(
                        "metadata",
                        f"the value of {key!r} is longer than {MAX_METADATA_VALUE_LENGTH} "
                        "characters",
                    )
            elif item is None or not isinstance(item, (int, float)):
                raise _error(
                    "metadata", f"the value of {key!r} must be a string, a number or a boolean"
                )
        return value

    @model_validator(mode="after")
    def _tax_types_resolve(self) -> Self:
        problems: list[InitErrorDetails] = []
        seen: set[tuple[str, str]] = set()
        for index, entry in enumerate(self.tax_data):
            try:
                resolved = resolve_tax_type(entry.type, self.address.country or None)
            except ValueError as error:
                problems.append(
                    InitErrorDetails(
                        type=_error("tax_type", str(error)),
                        loc=("tax_data", index, "type"),
                        input=entry.type,
                    )
                )
                continue
            if (resolved, entry.id) in seen:
                problems.append(
                    InitErrorDetails(
                        type=_error("tax_id", "the same tax id is listed twice"),
                        loc=("tax_data", index, "id"),
                        input=entry.id,
                    )
                )
            seen.add((resolved, entry.id))
        if problems:
            raise ValidationError.from_exception_data(type(self).__name__, problems)
        return self

    def resolved_tax_data(self) -> list[TaxEntry]:
        """The tax entries with Stripe's own types (validated to resolve)."""
        country = self.address.country or None
        return [
            TaxEntry(type=resolve_tax_type(entry.type, country), id=entry.id)
            for entry in self.tax_data
        ]


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

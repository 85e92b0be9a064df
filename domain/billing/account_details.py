"""The billing account as a caller describes it (spec section 2.1): :class:`BillingDetails`, the
``account`` of a create request, with its address and tax entries.

They validate what can be judged from the message alone: formats, sizes, whether a tax type can
be resolved. Everything that needs the database (does the organization exist, is it enabled,
does it already have an account) is decided by the handler.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

import phonenumbers
import pycountry
from pydantic import (
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from domain.billing.currencies import currency_code
from domain.billing.tax_ids import resolve_tax_type
from domain.messages import Message
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

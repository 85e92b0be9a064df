"""Plans: what a subscription is billed for (spec section 2.3), and their provider prices."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Self

from pydantic import Field, StringConstraints, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from domain.billing.currencies import amount_refusal, currency_code
from domain.errors import FailedPrecondition, error_info
from domain.messages import ID_PATTERN, Message

PlanName = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True,
        to_lower=True,
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$",
    ),
]
"""A plan's unique name, such as ``starter`` or ``team-annual``."""


class PlanInterval(StrEnum):
    MONTH = "month"
    YEAR = "year"


PlanRef = Annotated[
    str,
    StringConstraints(min_length=1, max_length=128, pattern=ID_PATTERN),
]
"""A plan's id (``plan_…``) or its name."""


class PlanSpec(Message):
    """What an operator gives to create a plan (``billing-worker plans create``)."""

    name: PlanName
    title: Annotated[str, StringConstraints(strip_whitespace=True, max_length=255)] = ""
    amount: int = Field(
        ge=0,
        le=99_999_999,
        description="Price per interval, in minor units of the currency (cents; whole yen for "
        "zero-decimal currencies).",
    )
    currency: str = Field(description="ISO 4217, one Stripe accepts (usd, EUR); stored lower case.")
    interval: PlanInterval = PlanInterval.MONTH

    @model_validator(mode="before")
    @classmethod
    def _default_title(cls, data: Any) -> Any:
        if isinstance(data, dict) and not str(data.get("title") or "").strip():
            name = str(data.get("name") or "").strip()
            return {**data, "title": name.replace("-", " ").replace("_", " ").title()}
        return data

    @field_validator("currency")
    @classmethod
    def _currency(cls, value: str) -> str:
        return currency_code(value)

    @model_validator(mode="after")
    def _amount_in_the_currency(self) -> Self:
        """An amount Stripe takes in this currency (a three-decimal one ends in 0)."""
        refusal = amount_refusal(self.amount, self.currency)
        if refusal is not None:
            raise ValidationError.from_exception_data(
                type(self).__name__,
                [
                    InitErrorDetails(
                        type=PydanticCustomError("amount", refusal),
                        loc=("amount",),
                        input=self.amount,
                    )
                ],
            )
        return self


@dataclass(frozen=True)
class ProviderPlan:
    """What the provider is told about a plan: one product with one recurring price."""

    plan_id: str
    name: str
    title: str
    amount: int
    currency: str
    interval: str


@dataclass(frozen=True)
class ProviderPrice:
    product_id: str
    price_id: str


@dataclass
class Plan:
    id: str
    name: str
    title: str
    interval: PlanInterval
    amount: int
    currency: str
    active: bool
    created_at: datetime
    updated_at: datetime
    provider: str | None = None
    provider_product_id: str | None = None
    provider_price_id: str | None = None

    @classmethod
    def new(cls, plan_id: str, spec: PlanSpec, now: datetime) -> Plan:
        return cls(
            id=plan_id,
            name=spec.name,
            title=spec.title,
            interval=spec.interval,
            amount=spec.amount,
            currency=spec.currency,
            active=True,
            created_at=now,
            updated_at=now,
        )

    @property
    def is_registered(self) -> bool:
        return self.provider_price_id is not None

    @property
    def registration_key(self) -> str:
        """One product and price per plan, however often the creation is retried."""
        return f"{self.id}:create-price"

    def matches(self, spec: PlanSpec) -> bool:
        return (self.name, self.title, self.interval, self.amount, self.currency) == (
            spec.name,
            spec.title,
            spec.interval,
            spec.amount,
            spec.currency,
        )

    def provider_plan(self) -> ProviderPlan:
        return ProviderPlan(
            plan_id=self.id,
            name=self.name,
            title=self.title,
            amount=self.amount,
            currency=self.currency,
            interval=self.interval.value,
        )

    def registered(self, provider: str, price: ProviderPrice, now: datetime) -> None:
        self.provider = provider
        self.provider_product_id = price.product_id
        self.provider_price_id = price.price_id
        self.updated_at = now

    def ensure_available(self, field: str = "plan") -> None:
        """A subscription can be moved to this plan (a 400 otherwise)."""
        if not self.active or not self.is_registered:
            raise FailedPrecondition(
                f"plan {self.name!r} is not available",
                details=[error_info("PLAN_NOT_AVAILABLE", plan_id=self.id, field=field)],
            )

    def to_view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "title": self.title,
            "interval": self.interval.value,
            "amount": self.amount,
            "currency": self.currency,
            "active": self.active,
            "provider": self.provider or "",
            "provider_product_id": self.provider_product_id or "",
            "provider_price_id": self.provider_price_id or "",
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }

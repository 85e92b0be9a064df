"""The HTTP contract as pydantic models: what the OpenAPI document says each route takes and
answers.

Requests are parsed by the API's strict JSON reader and validated by the command messages
themselves; the request models here reuse those messages' own parts (``BillingDetails``,
``Address``, ``TaxEntry``, ``Phase``), so that the document and the validation are one
definition. Schemathesis checks every answer against these models in CI.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from domain.billing import Address, BillingAccountState, BillingDetails, TaxEntry
from domain.messages import ID_PATTERN, CommandStatus
from domain.organizations import OrganizationState
from domain.subscriptions import Phase


class _Closed(BaseModel):
    """A JSON object that admits no other field."""

    model_config = ConfigDict(extra="forbid")


# --- requests ---------------------------------------------------------------------------------


class EmptyRequest(_Closed):
    """``{}``: the operation takes nothing in its body."""


class CreateBillingAccountRequest(_Closed):
    """Spec 4.1."""

    body: BillingDetails = Field(description="The billing account to create.")
    offline: bool = Field(
        default=False, description="Keep the account off the provider (no Stripe customer)."
    )


PlanRef = Annotated[
    str,
    Field(
        min_length=1,
        max_length=128,
        pattern=ID_PATTERN,
        description="The plan's id (`plan_…`) or its name (`team`).",
    ),
]


class PlanChange(_Closed):
    plan: PlanRef | None = Field(default=None, description="The plan to move to.")
    immediate: bool | None = Field(
        default=None,
        description="`true`: now, with proration; `false` or absent: at the period's end.",
    )


class PhaseChange(_Closed):
    cancel_upcoming_changes: bool | None = Field(
        default=None, description="`true`: cancel the change scheduled for the period's end."
    )


class ChangeSubscriptionPlanRequest(_Closed):
    """Spec 4.3. Give `plan_change` (or the deprecated `plan`/`immediate`), or
    `phase_change.cancel_upcoming_changes`; `plan_change` wins over the deprecated fields
    when they agree, and a contradiction is a 400."""

    plan_change: PlanChange | None = None
    phase_change: PhaseChange | None = None
    plan: PlanRef | None = Field(default=None, deprecated=True, description="Use plan_change.plan.")
    immediate: bool | None = Field(
        default=None, deprecated=True, description="Use plan_change.immediate."
    )


# --- answers ----------------------------------------------------------------------------------

Timestamp = Annotated[datetime, Field(description="RFC 3339, UTC.")]
MetadataValue = str | int | float | bool


class BillingAccountView(BaseModel):
    """Spec 2.1."""

    id: str
    org_id: str
    name: str
    email: str
    phone: str = Field(description="E.164, or empty.")
    address: Address
    provider_id: str = Field(description="The Stripe customer id (`cus_…`); empty offline.")
    provider: Literal["stripe", ""]
    currency: str = Field(description="ISO 4217, lower case.")
    state: BillingAccountState
    tax_data: list[TaxEntry]
    metadata: dict[str, MetadataValue]
    created_at: Timestamp
    updated_at: Timestamp


class OrganizationView(BaseModel):
    """Spec 2.2."""

    id: str
    name: str
    title: str
    metadata: dict[str, Any]
    created_at: Timestamp
    updated_at: Timestamp
    state: OrganizationState
    avatar: str = Field(description="A base64 image, or empty.")


class BillingAccountAnswer(BaseModel):
    billing_account: BillingAccountView
    organization: OrganizationView


class EmptyAnswer(_Closed):
    """``{}``."""


class PhaseAnswer(BaseModel):
    """The subscription's phase after the request: spec 2.3."""

    phase: Phase


class CommandAccepted(BaseModel):
    """202: the command is recorded and queued, and its outcome is at ``Location``."""

    command_id: str
    status: CommandStatus


class RetryView(BaseModel):
    """One transient failure, and the delay drawn before the next attempt."""

    at: Timestamp
    attempt: int
    reason: str
    delay_seconds: float
    backoff_ceiling_seconds: float
    retry_after_seconds: float | None = Field(description="The dependency's own hint, if any.")


class ErrorDetailView(BaseModel):
    """A google.rpc error detail in its JSON form, named by ``@type``."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    type: str = Field(alias="@type")


class ErrorBody(BaseModel):
    """Spec 7: every error."""

    code: int = Field(json_schema_extra={"format": "int32"}, description="A gRPC status code.")
    message: str
    details: list[ErrorDetailView]


class CommandView(BaseModel):
    """``GET /v1beta1/commands/{id}``."""

    command_id: str
    type: str
    status: CommandStatus
    attempts: int
    created_at: Timestamp
    updated_at: Timestamp
    finished_at: Timestamp | None
    result: dict[str, Any] | None = None
    error: ErrorBody | None = None
    retries: list[RetryView] | None = None

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

from domain.billing.account_details import Address, BillingDetails, TaxEntry
from domain.billing.accounts import BillingAccountState
from domain.billing.organizations import OrganizationState
from domain.events.catalog import EVENT_TYPES
from domain.messages import ID_PATTERN, CommandStatus
from domain.subscriptions.subscription import Phase
from domain.webhooks import ALL_EVENTS, DeliveryState, EndpointState


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
    proration_date: datetime | None = Field(
        default=None,
        description="With `immediate: true`: prorate as of this time, which must be the "
        "`proration_date` a preview of this same change (subscription, current plan, target "
        "plan) answered at most 5 minutes ago, else `400` naming this field; the change then "
        "invoices what the preview showed, to the cent. Default: now.",
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


class PreviewPlanChangeRequest(_Closed):
    """What an immediate change to `plan` would invoice (nothing is changed)."""

    plan: PlanRef = Field(description="The plan to move to: its id or its name.")


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
    customer_deleted_at: Timestamp | None = Field(
        description="When the Stripe customer was found deleted (by Stripe's webhook or the "
        "reconciliation sweep); null while it exists."
    )


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


class RequiredAction(BaseModel):
    """What the customer must do before an immediate change takes effect: pay its invoice on
    Stripe's hosted page, authenticating the payment (3-D Secure). Stripe holds the change
    until then; it takes effect when paid (event `subscription.plan_changed`) and lapses at
    `expires_at` (event `subscription.plan_change.skipped`, reason `payment_not_completed`)."""

    type: Literal["pay_invoice"] = "pay_invoice"
    url: str | None = Field(description="Stripe's hosted page of the change's invoice.")
    expires_at: Timestamp | None = Field(description="When Stripe drops the change unpaid.")
    change_id: str


class PhaseAnswer(BaseModel):
    """The subscription's phase after the request: spec 2.3. With `required_action`, an
    immediate change waits for the customer (the phase is the one it stays in until then)."""

    phase: Phase
    required_action: RequiredAction | None = Field(
        default=None,
        description="Only when an immediate change waits for the customer's payment.",
    )


class PreviewLineView(BaseModel):
    description: str
    amount: int = Field(
        description="Minor units of the currency (cents; whole yen for zero-decimal "
        "currencies); a credit is negative."
    )
    proration: bool
    period_start: Timestamp
    period_end: Timestamp
    price_id: str | None = Field(description="The Stripe price the line bills.")
    discount: int = Field(
        default=0,
        description="What discounts at Stripe (a coupon on the subscription) take off "
        "`amount`; a credit's is negative. The line costs `amount - discount`.",
    )


class ChangePreviewAnswer(BaseModel):
    """What an immediate change would invoice, as Stripe's `invoices.create_preview` answers.
    Send the same `proration_date` with the change (`plan_change.proration_date`), within 5
    minutes, to be invoiced exactly these amounts."""

    subscription_id: str
    plan_id: str
    proration_date: Timestamp
    proration_behavior: Literal["create_prorations", "always_invoice", "none"]
    billed: Literal["now", "next_invoice"] = Field(
        description="`now`: the change invoices these lines at once (`always_invoice`, "
        "which an upgrade always is unless proration is `none`); `next_invoice`: they wait "
        "for the next renewal (`create_prorations`: a downgrade's credit)."
    )
    currency: str
    amount_due: int = Field(description="Minor units of the currency.")
    subtotal: int
    total: int = Field(description="`subtotal` less `total_discount`.")
    total_discount: int = Field(
        default=0,
        description="What discounts at Stripe (a coupon on the subscription) take off the "
        "subtotal.",
    )
    starting_balance: int = Field(
        default=0,
        description="The customer's balance the invoice takes in (negative: a credit, "
        "positive: an amount carried from an earlier invoice); `amount_due` is `total` plus it "
        "(never below 0).",
    )
    lines: list[PreviewLineView]
    charged_now: int | None = Field(
        description="What the change charges the customer's card at once: `amount_due` when "
        "billed `now`, unless it is below Stripe's minimum charge for the currency (0.50 USD, "
        "0.30 GBP, 50 JPY...), which is never charged; 0 when billed at the next invoice. "
        "`null` in a currency whose minimum follows the day's exchange rate."
    )
    carried_to_balance: int = Field(
        description="An amount due below the minimum charge: Stripe marks the invoice paid "
        "and adds this to the customer's balance, to be paid with the next invoice. The "
        "change is made even if the card would decline."
    )


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


# --- webhooks (configuration: answered at once, never a command) -----------------------------

EventTypeName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=100,
        description="An event type of the catalog, or `*` for every event.",
        json_schema_extra={"enum": [*EVENT_TYPES, ALL_EVENTS]},
    ),
]


class AddWebhookRequest(_Closed):
    """A new endpoint: where to send, and which events."""

    url: str = Field(
        min_length=1,
        max_length=2048,
        description="An http or https URL; it receives each event as a signed POST.",
        json_schema_extra={"format": "uri"},
    )
    events: list[EventTypeName] | None = Field(
        default=None,
        min_length=1,
        description="The event types to send; absent or `null`: every event.",
    )
    description: str = Field(default="", max_length=255, description="A note for operators.")
    reason: str = Field(
        default="", max_length=200, description="Why, optional; kept in the audit trail."
    )


class OptionalReasonRequest(_Closed):
    """An operator's action whose reason is optional: ``{}``, or why."""

    reason: str = Field(
        default="", max_length=200, description="Why, optional; kept in the audit trail."
    )


class OperatorActionRequest(_Closed):
    """An operator's action (``/v1beta1/operations/…``): why."""

    reason: str = Field(
        min_length=1,
        max_length=200,
        description="Why (required); kept in the audit trail with who took the action, and "
        "with the change where it has a reason of its own.",
    )


class DisableWebhookRequest(_Closed):
    reason: str | None = Field(
        default=None,
        max_length=500,
        description="Why; kept with the endpoint, its abandoned deliveries and the audit "
        "trail. Default: `disabled by an operator`.",
    )


class WebhookEndpointView(BaseModel):
    """An endpoint as operators see it: never its secret."""

    id: str
    url: str
    events: list[str] = Field(description='Event types, or `["*"]` for every event.')
    description: str
    state: EndpointState
    disabled_reason: str | None = Field(
        description="Why it is disabled: an operator's reason, or the delivery that failed "
        "for the whole retry budget."
    )
    disabled_at: Timestamp | None
    created_at: Timestamp
    updated_at: Timestamp


class NewWebhookEndpoint(WebhookEndpointView):
    secret: str = Field(
        description="The signing secret (`whsec_…`, Standard Webhooks): shown this once."
    )


class RotatedWebhookSecret(WebhookEndpointView):
    secret: str = Field(description="The new signing secret: shown this once.")
    previous_secret_expires_at: Timestamp = Field(
        description="Until then the previous secret signs too (each delivery carries both "
        "signatures)."
    )


class DisabledWebhook(WebhookEndpointView):
    abandoned_deliveries: int = Field(
        description="Unfinished deliveries marked failed by this request (replay them once "
        "the endpoint is enabled again)."
    )


class WebhookEndpointList(BaseModel):
    webhooks: list[WebhookEndpointView]


class WebhookDeliveryView(BaseModel):
    """One event's delivery to one endpoint."""

    id: str
    event_id: str = Field(description="The event (its `webhook-id`).")
    event_type: str
    endpoint_id: str
    subject: str = Field(description="`type:id` of the resource the event is about.")
    state: DeliveryState
    attempts: int
    next_attempt_at: Timestamp
    last_status: int | None = Field(description="The receiver's last HTTP status, if any.")
    last_error: str | None
    delivered_at: Timestamp | None
    created_at: Timestamp


class WebhookDeliveryList(BaseModel):
    deliveries: list[WebhookDeliveryView] = Field(description="Newest first.")

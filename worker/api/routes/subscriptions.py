"""``POST …/subscriptions/{id}/change``: change a subscription's plan (spec 4.3 and 9)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from domain.errors import CommandError, InvalidArgument
from domain.messages import is_id
from domain.permissions import Scope
from domain.subscriptions.change_commands import ChangeSubscriptionPlan
from domain.subscriptions.change_previews import PreviewPlanChange
from domain.subscriptions.change_states import ChangeState
from worker.api.auth import Caller, permitted
from worker.api.body import Body, PathId
from worker.api.change_request import resolve_change_request
from worker.api.contract import (
    ChangePreviewAnswer,
    ChangeSubscriptionPlanRequest,
    PhaseAnswer,
    PreviewPlanChangeRequest,
)
from worker.api.errors import ApiError
from worker.api.openapi import command_operation
from worker.api.state import State

router = APIRouter(tags=["subscriptions"])

DEPRECATED_FIELDS_USED = {"Deprecation": "true"}
"""Answered when a request used the deprecated top-level ``plan``/``immediate`` (spec 9)."""


def _phase(result: dict[str, Any]) -> dict[str, Any]:
    change = result.get("change") or {}
    if change.get("state") != ChangeState.AWAITING_PAYMENT.value:
        return {"phase": result["phase"]}
    return {
        "phase": result["phase"],
        "required_action": {
            "type": "pay_invoice",
            "url": change.get("payment_url"),
            "expires_at": change.get("payment_expires_at"),
            "change_id": change["id"],
        },
    }


@router.post(
    "/v1beta1/organizations/{org_id}/billing/{billing_id}/subscriptions/{id}/change",
    operation_id="change_subscription_plan",
    summary="Change a subscription's plan now or at the period's end (spec 4.3)",
    description="Changes the plan now (`plan_change.immediate: true`, prorated) or at the "
    "end of the current period (the default; a newer request replaces a pending one), or "
    "cancels the pending change (`phase_change.cancel_upcoming_changes: true`). Needs the "
    "`subscriptions:change` scope.",
    **command_operation(
        request=ChangeSubscriptionPlanRequest,
        answer=PhaseAnswer,
        answer_description="The phase the subscription is in, or will be in at the period's end.",
        errors=[503],
        answer_headers={
            "Deprecation": {
                "description": "`true` when the request used the deprecated top-level "
                "`plan` or `immediate` (spec 9).",
                "schema": {"type": "string"},
            }
        },
        examples={
            "at period end": {"plan_change": {"plan": "team"}},
            "now": {"plan_change": {"plan": "team", "immediate": True}},
            "cancel the pending change": {"phase_change": {"cancel_upcoming_changes": True}},
        },
    ),
)
async def change_subscription_plan(
    org_id: PathId,
    billing_id: PathId,
    id: PathId,
    client: Annotated[Caller, permitted(Scope.SUBSCRIPTIONS_CHANGE)],
    body: Body,
    request: Request,
    state: State,
) -> Response:
    try:
        resolved = resolve_change_request(body)
    except CommandError as error:
        raise ApiError.of(error) from None
    return await state.gateway.submit(
        request,
        client.client_id,
        ChangeSubscriptionPlan,
        {
            "org_id": org_id,
            "billing_account_id": billing_id,
            "subscription_id": id,
            **resolved.command_fields(),
        },
        _phase,
        field_names={
            "billing_account_id": "billing_id",
            "subscription_id": "id",
            **resolved.field_names(),
        },
        headers=DEPRECATED_FIELDS_USED if resolved.used_deprecated_fields else None,
    )


def _preview(result: dict[str, Any]) -> dict[str, Any]:
    return result


@router.post(
    "/v1beta1/organizations/{org_id}/billing/{billing_id}/subscriptions/{id}/change/preview",
    operation_id="preview_subscription_plan_change",
    summary="What an immediate plan change would invoice (changes nothing)",
    description="Asks Stripe (`invoices.create_preview`) what changing the plan now would "
    "invoice: the amount due, the currency, the lines (prorations as credits and debits, in "
    "minor units) and the `proration_date` they are computed at. An immediate change sent "
    "with that `plan_change.proration_date` within 5 minutes invoices the same amounts to the "
    "cent (a proration date no preview of that change answered is a `400`). A preview asked "
    "while Stripe rolls the subscription's period over is a 409 `ABORTED` (reason "
    "`BILLING_PERIOD_ROLLING_OVER`): ask again in a few seconds. Needs the "
    "`subscriptions:change` scope.",
    **command_operation(
        request=PreviewPlanChangeRequest,
        answer=ChangePreviewAnswer,
        answer_description="The invoice the change would make.",
        errors=[409, 503],
        examples={"to team": {"plan": "team"}},
    ),
)
async def preview_subscription_plan_change(
    org_id: PathId,
    billing_id: PathId,
    id: PathId,
    client: Annotated[Caller, permitted(Scope.SUBSCRIPTIONS_CHANGE)],
    body: Body,
    request: Request,
    state: State,
) -> Response:
    violations = [(name, "unknown field") for name in sorted(set(body) - {"plan"})]
    plan = body.get("plan")
    if not is_id(plan):
        violations.append(("plan", "required: a plan id or name, 1 to 128 of [A-Za-z0-9_.:-]"))
    if violations:
        raise ApiError.of(InvalidArgument.for_fields("the request is invalid", violations))
    return await state.gateway.submit(
        request,
        client.client_id,
        PreviewPlanChange,
        {"org_id": org_id, "billing_account_id": billing_id, "subscription_id": id, "plan": plan},
        _preview,
        field_names={"billing_account_id": "billing_id", "subscription_id": "id"},
    )

"""Billing accounts: create (spec 4.1) and register an offline one with the provider."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from domain.billing.account_commands import CreateBillingAccount, RegisterBillingAccount
from domain.permissions import Scope
from worker.api.auth import Caller, permitted
from worker.api.body import Body, PathId, require_empty
from worker.api.contract import (
    BillingAccountAnswer,
    CreateBillingAccountRequest,
    EmptyRequest,
)
from worker.api.openapi import command_operation
from worker.api.state import State

router = APIRouter(tags=["billing accounts"])


def _as_is(result: dict[str, Any]) -> dict[str, Any]:
    return result


@router.post(
    "/v1beta1/organizations/{org_id}/billing",
    operation_id="create_billing_account",
    summary="Create a billing account (spec 4.1)",
    description="Creates the organization's billing account, registered with Stripe unless "
    "`offline`. An organization has at most one account that is not `disabled`. Needs the "
    "`billing:create` scope.",
    **command_operation(
        request=CreateBillingAccountRequest,
        answer=BillingAccountAnswer,
        answer_description="The account, with its organization.",
        errors=[409, 503],
        examples={
            "online": {
                "body": {
                    "name": "Acme Ltd",
                    "email": "billing@acme.example",
                    "phone": "+442079460958",
                    "address": {
                        "line1": "1 High Street",
                        "city": "London",
                        "postal_code": "EC1A 1BB",
                        "country": "GB",
                    },
                    "currency": "gbp",
                    "tax_data": [{"type": "uk_vat", "id": "GB123456789"}],
                    "metadata": {"plan": "team"},
                },
                "offline": False,
            },
            "offline": {
                "body": {"name": "Offline Co", "email": "billing@offline.example"},
                "offline": True,
            },
        },
    ),
)
async def create_billing_account(
    org_id: PathId,
    client: Annotated[Caller, permitted(Scope.BILLING_CREATE)],
    body: Body,
    request: Request,
    state: State,
) -> Response:
    # Every violation at once: the unknown fields with what the command finds wrong.
    violations = [(name, "unknown field") for name in sorted(set(body) - {"body", "offline"})]
    if "body" not in body:
        violations.append(("body", "required: the billing account"))
    fields = {"org_id": org_id, "offline": body.get("offline", False)}
    if "body" in body:
        fields["account"] = body["body"]
    return await state.gateway.submit(
        request,
        client.client_id,
        CreateBillingAccount,
        fields,
        _as_is,
        violations=violations,
        field_names={"account": "body"},
    )


@router.post(
    "/v1beta1/organizations/{org_id}/billing/{id}/register",
    operation_id="register_billing_account",
    summary="Register an offline billing account with the provider",
    description="Registers an offline account with Stripe, or finishes a registration left "
    "`pending`; a registered account is answered unchanged. Needs the `billing:register` "
    "scope.",
    **command_operation(
        request=EmptyRequest,
        answer=BillingAccountAnswer,
        answer_description="The account, with its organization.",
        errors=[503],
        examples={"empty": {}},
    ),
)
async def register_billing_account(
    org_id: PathId,
    id: PathId,
    client: Annotated[Caller, permitted(Scope.BILLING_REGISTER)],
    body: Body,
    request: Request,
    state: State,
) -> Response:
    require_empty(body)
    return await state.gateway.submit(
        request,
        client.client_id,
        RegisterBillingAccount,
        {"org_id": org_id, "billing_account_id": id},
        _as_is,
        field_names={"billing_account_id": "id"},
    )

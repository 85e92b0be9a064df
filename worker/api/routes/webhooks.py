"""``/v1beta1/webhooks``: webhook endpoints, their secrets and their deliveries.

These are configuration, not billing commands: each route runs its handler
(``application.handlers.events.webhook_endpoints``) synchronously, in a thread, and answers with the
outcome; nothing is journalled in the command log or published on a queue, so there is no
``202``, ``Idempotency-Key`` or ``Command-Id`` here. Every route needs the
``webhooks:manage`` scope, which is not limited to organizations (an endpoint receives the
events of every organization).

A secret is in the answer of the create and rotate-secret routes only (with
``Cache-Control: no-store``); every other answer leaves it out.

Adding, disabling, enabling an endpoint and rotating its secret are operator actions of the
table (``application/operator_actions.py``, :data:`ACTION_ROUTES`): taken through its
``take``, each is kept in the audit trail with the client that took it (never the secret).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from anyio import to_thread
from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from application.handlers.events import webhook_endpoints as handlers
from application.operator_actions import Surface, action, take
from application.requests.operator_requests import (
    GetEndpoint,
    ListDeliveries,
    ListEndpoints,
    ReplayDeliveries,
)
from domain.errors import CommandError, violations_of
from domain.messages import ID_PATTERN
from domain.permissions import Scope
from domain.webhooks import DeliveryState
from worker.api.auth import Caller, permitted
from worker.api.body import Body, require_empty
from worker.api.contract import (
    AddWebhookRequest,
    DisabledWebhook,
    DisableWebhookRequest,
    EmptyRequest,
    NewWebhookEndpoint,
    OperatorActionRequest,
    OptionalReasonRequest,
    RotatedWebhookSecret,
    WebhookDeliveryList,
    WebhookDeliveryView,
    WebhookEndpointList,
    WebhookEndpointView,
)
from worker.api.errors import ApiError
from worker.api.openapi import direct_operation
from worker.api.state import ApiState, State

router = APIRouter(tags=["webhooks"])
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

Manager = Annotated[Caller, permitted(Scope.WEBHOOKS_MANAGE)]
ResourceIdPath = Annotated[str, Path(min_length=1, max_length=128, pattern=ID_PATTERN)]

GET_WEBHOOK = "get_webhook"
NO_STORE = {"Cache-Control": "no-store"}
NO_STORE_HEADER = {
    "Cache-Control": {
        "description": "`no-store`: the answer holds a secret.",
        "schema": {"type": "string"},
    }
}
ENDPOINT_LINKS = {
    "GetWebhook": {"operationId": GET_WEBHOOK, "parameters": {"id": "$response.body#/id"}},
    "DisableWebhook": {
        "operationId": "disable_webhook",
        "parameters": {"id": "$response.body#/id"},
    },
    "EnableWebhook": {"operationId": "enable_webhook", "parameters": {"id": "$response.body#/id"}},
    "RotateWebhookSecret": {
        "operationId": "rotate_webhook_secret",
        "parameters": {"id": "$response.body#/id"},
    },
    "ListWebhookDeliveries": {
        "operationId": "list_webhook_deliveries",
        "parameters": {"id": "$response.body#/id"},
    },
}


ACTION_ROUTES = {
    "add-webhook": "create_webhook",
    "disable-webhook": "disable_webhook",
    "enable-webhook": "enable_webhook",
    "rotate-webhook-secret": "rotate_webhook_secret",
}
"""The operation of each operator action (of the table) these routes offer, by kind."""


def _take(
    kind: str,
    client: Caller,
    state: ApiState,
    target: str,
    reason: str = "",
    options: dict[str, Any] | None = None,
) -> Any:
    return take(
        action(kind),
        state.svc,
        [target],
        reason,
        by=client.client_id,
        surface=Surface.API,
        options=options,
    )


async def _run(call: Callable[[], T]) -> T:
    """The handler's outcome; a domain error becomes its answer in the spec's body."""
    try:
        return await to_thread.run_sync(call)
    except CommandError as refused:
        raise ApiError.of(refused) from None


def _parsed(model: type[M], body: dict[str, Any]) -> M:
    try:
        return model.model_validate(body)
    except ValidationError as error:
        raise ApiError.bad_request(
            "the request is invalid", violations_of(error.errors(include_url=False))
        ) from None


@router.post(
    "/v1beta1/webhooks",
    status_code=201,
    operation_id="create_webhook",
    summary="Add a webhook endpoint",
    description="Adds an enabled endpoint that receives the events it names (every event by "
    "default), each signed with its secret (Standard Webhooks). The secret is in this answer "
    "only; a `reason`, optional, is kept in the audit trail with the client that added it. "
    "Needs the `webhooks:manage` scope.",
    **direct_operation(
        request=AddWebhookRequest,
        answer=NewWebhookEndpoint,
        status=201,
        answer_description="The endpoint, with its signing secret (shown this once).",
        answer_headers={
            "Location": {"description": "`/v1beta1/webhooks/{id}`", "schema": {"type": "string"}},
            **NO_STORE_HEADER,
        },
        links=ENDPOINT_LINKS,
        examples={
            "every event": {"url": "https://hooks.example/billing"},
            "some events": {
                "url": "https://hooks.example/plans",
                "events": ["subscription.plan_change.applied", "command.failed"],
                "description": "plan changes for the CRM",
                "reason": "the CRM follows plan changes",
            },
        },
    ),
)
async def create_webhook(client: Manager, body: Body, state: State) -> JSONResponse:
    request = _parsed(AddWebhookRequest, body)
    options = {
        "events": request.events or [],
        "description": request.description,
        "allow_private_networks": state.svc.settings.resolved_webhook_allow_private_networks(),
    }
    added = await _run(
        lambda: _take("add-webhook", client, state, request.url, request.reason, options)
    )
    return JSONResponse(
        {**added.endpoint.to_view(), "secret": added.secret},
        status_code=201,
        headers={"Location": f"/v1beta1/webhooks/{added.endpoint.id}", **NO_STORE},
    )


@router.get(
    "/v1beta1/webhooks",
    operation_id="list_webhooks",
    summary="Every webhook endpoint",
    description="Oldest first, never a secret. Needs the `webhooks:manage` scope.",
    **direct_operation(answer=WebhookEndpointList, answer_description="The endpoints."),
)
async def list_webhooks(client: Manager, state: State) -> JSONResponse:
    found = await _run(lambda: handlers.list_endpoints(ListEndpoints(), state.svc))
    return JSONResponse({"webhooks": [endpoint.to_view() for endpoint in found]})


@router.get(
    "/v1beta1/webhooks/{id}",
    operation_id=GET_WEBHOOK,
    summary="A webhook endpoint",
    description="Never its secret. Needs the `webhooks:manage` scope.",
    **direct_operation(answer=WebhookEndpointView, answer_description="The endpoint."),
)
async def get_webhook(id: ResourceIdPath, client: Manager, state: State) -> JSONResponse:
    endpoint = await _run(lambda: handlers.get_endpoint(GetEndpoint(id), state.svc))
    return JSONResponse(endpoint.to_view())


@router.post(
    "/v1beta1/webhooks/{id}/disable",
    operation_id="disable_webhook",
    summary="Disable a webhook endpoint",
    description="Nothing more is sent to it; its unfinished deliveries are marked failed "
    "(`endpoint disabled: <reason>`), to be replayed once it is enabled again. Disabling a "
    "disabled endpoint keeps its first reason. Needs the `webhooks:manage` scope.",
    **direct_operation(
        request=DisableWebhookRequest,
        answer=DisabledWebhook,
        answer_description="The endpoint, disabled.",
        examples={"with a reason": {"reason": "receiver moved"}, "empty": {}},
    ),
)
async def disable_webhook(
    id: ResourceIdPath, client: Manager, body: Body, state: State
) -> JSONResponse:
    request = _parsed(DisableWebhookRequest, body)
    disabled = await _run(lambda: _take("disable-webhook", client, state, id, request.reason or ""))
    return JSONResponse({**disabled.endpoint.to_view(), "abandoned_deliveries": disabled.abandoned})


@router.post(
    "/v1beta1/webhooks/{id}/enable",
    operation_id="enable_webhook",
    summary="Enable a webhook endpoint",
    description="New events are sent to it again; deliveries that failed meanwhile stay "
    'failed until replayed. Body `{}`, or `{"reason": …}`: why, kept in the audit trail. '
    "Needs the `webhooks:manage` scope.",
    **direct_operation(
        request=OptionalReasonRequest,
        answer=WebhookEndpointView,
        answer_description="The endpoint, enabled.",
        examples={"empty": {}, "with a reason": {"reason": "the receiver is back"}},
    ),
)
async def enable_webhook(
    id: ResourceIdPath, client: Manager, body: Body, state: State
) -> JSONResponse:
    reason = _parsed(OptionalReasonRequest, body).reason
    endpoint = await _run(lambda: _take("enable-webhook", client, state, id, reason))
    return JSONResponse(endpoint.to_view())


@router.post(
    "/v1beta1/webhooks/{id}/rotate-secret",
    operation_id="rotate_webhook_secret",
    summary="Give a webhook endpoint a new secret",
    description="The previous secret keeps signing beside the new one for "
    "`BILLING_WEBHOOK_SECRET_GRACE_SECONDS` (24 h), so that the receiver can switch. Body "
    '`{"reason": …}`: why, required, kept in the audit trail with the client that rotated it '
    "(never the secret). Needs the `webhooks:manage` scope.",
    **direct_operation(
        request=OperatorActionRequest,
        answer=RotatedWebhookSecret,
        answer_description="The endpoint, with its new secret (shown this once).",
        answer_headers=NO_STORE_HEADER,
        examples={"with a reason": {"reason": "the secret was pasted in a ticket"}},
    ),
)
async def rotate_webhook_secret(
    id: ResourceIdPath, client: Manager, body: Body, state: State
) -> JSONResponse:
    reason = _parsed(OperatorActionRequest, body).reason
    grace = state.svc.settings.webhook_secret_grace_seconds
    rotated = await _run(
        lambda: _take("rotate-webhook-secret", client, state, id, reason, {"grace_seconds": grace})
    )
    return JSONResponse(
        {
            **rotated.endpoint.to_view(),
            "secret": rotated.secret,
            "previous_secret_expires_at": rotated.previous_valid_until.isoformat(),
        },
        headers=NO_STORE,
    )


@router.get(
    "/v1beta1/webhooks/{id}/deliveries",
    operation_id="list_webhook_deliveries",
    summary="A webhook endpoint's deliveries",
    description="Newest first, by state (`failed`: those to replay) and event. Needs the "
    "`webhooks:manage` scope.",
    **direct_operation(answer=WebhookDeliveryList, answer_description="The deliveries."),
)
async def list_webhook_deliveries(
    id: ResourceIdPath,
    client: Manager,
    state: State,
    delivery_state: Annotated[
        DeliveryState | None, Query(alias="state", description="Only in this state.")
    ] = None,
    event_id: Annotated[
        str | None,
        Query(min_length=1, max_length=128, pattern=ID_PATTERN, description="Only of this event."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=handlers.MAX_LIST_LIMIT)] = 100,
) -> JSONResponse:
    found = await _run(
        lambda: handlers.list_deliveries(
            ListDeliveries(state=delivery_state, endpoint_id=id, event_id=event_id, limit=limit),
            state.svc,
        )
    )
    return JSONResponse({"deliveries": [delivery.to_view() for delivery in found]})


@router.post(
    "/v1beta1/webhooks/deliveries/{id}/replay",
    operation_id="replay_webhook_delivery",
    summary="Send a failed delivery again",
    description="The delivery becomes `pending`, due now, with a new retry budget; the sweep "
    "sends it within seconds. Only a `failed` delivery replays, and only while its endpoint "
    "is enabled (else `400` `FAILED_PRECONDITION`). Body `{}`. Needs the `webhooks:manage` "
    "scope.",
    **direct_operation(
        request=EmptyRequest,
        answer=WebhookDeliveryView,
        answer_description="The delivery, pending.",
        examples={"empty": {}},
    ),
)
async def replay_webhook_delivery(
    id: ResourceIdPath, client: Manager, body: Body, state: State
) -> JSONResponse:
    require_empty(body)
    (replayed,) = await _run(lambda: handlers.replay_deliveries(ReplayDeliveries([id]), state.svc))
    return JSONResponse(replayed.to_view())

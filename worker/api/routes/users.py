"""``POST /v1beta1/users/{id}/enable`` (spec 4.2)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request
from fastapi.responses import Response

from domain.permissions import Scope
from domain.users import EnableUser
from worker.api.auth import Caller, permitted
from worker.api.body import Body, PathId, require_empty
from worker.api.contract import EmptyAnswer, EmptyRequest
from worker.api.openapi import command_operation
from worker.api.state import State

router = APIRouter(tags=["users"])


@router.post(
    "/v1beta1/users/{id}/enable",
    operation_id="enable_user",
    summary="Enable a user (spec 4.2)",
    description="Enables the user so that they can log in again. Enabling an enabled user "
    "succeeds again. Needs the `users:enable` scope.",
    **command_operation(
        request=EmptyRequest,
        answer=EmptyAnswer,
        answer_description="The user is enabled: `{}`.",
        errors=[503],
        examples={"empty": {}},
    ),
)
async def enable_user(
    id: PathId,
    client: Annotated[Caller, permitted(Scope.USERS_ENABLE)],
    body: Body,
    request: Request,
    state: State,
) -> Response:
    require_empty(body)
    return await state.gateway.submit(
        request,
        client.client_id,
        EnableUser,
        {"user_id": id},
        lambda _result: {},
        field_names={"user_id": "id"},
    )

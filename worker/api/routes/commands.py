"""``GET /v1beta1/commands/{id}``: a command's status, result or error, for its client."""

from __future__ import annotations

from typing import Annotated

from anyio import to_thread
from fastapi import APIRouter
from fastapi.responses import JSONResponse

from domain.errors import ErrorCode
from domain.permissions import Scope
from worker.api.auth import Caller, permitted
from worker.api.body import PathId
from worker.api.contract import CommandView
from worker.api.errors import ApiError
from worker.api.gateway import record_view
from worker.api.openapi import COMMON_ERRORS, GET_COMMAND, error_responses
from worker.api.state import State

router = APIRouter(tags=["commands"])


@router.get(
    "/v1beta1/commands/{id}",
    operation_id=GET_COMMAND,
    summary="A command's status, result or error",
    description="Only the client that sent a command sees it. Needs the `commands:read` scope.",
    responses={
        200: {"model": CommandView, "description": "The command as the log records it."},
        **error_responses(COMMON_ERRORS),
    },
)
async def get_command(
    id: PathId, client: Annotated[Caller, permitted(Scope.COMMANDS_READ)], state: State
) -> JSONResponse:
    record = await to_thread.run_sync(state.svc.commands.get, id)
    if record is None or record.client_id != client.client_id:
        raise ApiError(ErrorCode.NOT_FOUND, f"command {id!r} not found")
    return JSONResponse(record_view(record))

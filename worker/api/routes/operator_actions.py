"""``POST /v1beta1/operations/…``: the operator's actions the API offers, one route for each
action of the table (``application/operator_actions.py``) offered by the API.

Only the path is this module's own (:data:`ROUTES`, keyed by the action's kind); the scope
the route needs, its wording and what it answers are the table's. An action is taken at once,
in a thread, through the table's ``take`` (the one every surface takes it through), and the
route answers what it did. Nothing here is a command of the log.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from anyio import to_thread
from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from application.operator_actions import ActionKind, Surface, offered_by, take
from application.requests.operator_actions import ActionTaken
from domain.errors import CommandError, ErrorCode, TransientError, violations_of
from domain.messages import ID_PATTERN
from worker.api.auth import Caller, permitted
from worker.api.body import Body
from worker.api.contract import OperatorActionRequest
from worker.api.errors import ApiError
from worker.api.openapi import direct_operation
from worker.api.state import ApiState, State

router = APIRouter(tags=["operations"])
T = TypeVar("T")

PREFIX = "/v1beta1/operations"
ACTION_ERRORS = (503,)


@dataclass(frozen=True)
class Route:
    """Where the API offers an action: its path under :data:`PREFIX` (the target is ``{id}``),
    its operation's id, and the longest id it takes."""

    path: str
    operation_id: str
    id_max_length: int = 128


ROUTES = {
    "retry-registration": Route(
        "/billing-accounts/{id}/retry-registration", "retry_billing_account_registration"
    ),
    "mark-offline": Route("/billing-accounts/{id}/mark-offline", "mark_billing_account_offline"),
    "retry-command": Route("/commands/{id}/retry", "retry_command_now", id_max_length=64),
    "skip-change": Route("/scheduled-changes/{id}/skip", "skip_scheduled_change"),
}
"""The path of each action the API offers, by kind."""


async def run_action(call: Callable[[], T]) -> T:
    """The handler's outcome; a domain error becomes its answer in the spec's body."""
    try:
        return await to_thread.run_sync(call)
    except CommandError as refused:
        raise ApiError.of(refused) from None
    except TransientError as unavailable:
        raise ApiError(ErrorCode.UNAVAILABLE, unavailable.message) from None


def _reason(body: dict[str, object]) -> str:
    try:
        return OperatorActionRequest.model_validate(body).reason
    except ValidationError as error:
        raise ApiError.bad_request(
            "the request is invalid", violations_of(error.errors(include_url=False))
        ) from None


def _documented(action: ActionKind[Any, Any], route: Route) -> dict[str, Any]:
    return {
        "operation_id": route.operation_id,
        "summary": action.summary,
        "description": f'{action.does} Body `{{"reason": …}}`: why, required, kept in the '
        f"audit trail with who took it. Needs the `{action.scope.value}` scope.",
        **direct_operation(
            request=OperatorActionRequest,
            answer=ActionTaken,
            answer_description="What the action did.",
            errors=ACTION_ERRORS,
            examples={"with a reason": {"reason": "Stripe is back"}},
        ),
    }


def _offer(action: ActionKind[Any, Any]) -> None:
    route = ROUTES[action.kind]

    async def endpoint(id: str, client: Caller, body: dict[str, Any], state: ApiState) -> Any:
        reason = _reason(body)
        done = await run_action(
            lambda: take(action, state.svc, [id], reason, by=client.client_id, surface=Surface.API)
        )
        return JSONResponse(action.view(done))

    # The parameters' annotations are this action's (its scope, its id's length): FastAPI
    # reads them from the signature.
    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                "id",
                keyword,
                annotation=Annotated[
                    str,
                    Path(min_length=1, max_length=route.id_max_length, pattern=ID_PATTERN),
                ],
            ),
            inspect.Parameter(
                "client", keyword, annotation=Annotated[Caller, permitted(action.scope)]
            ),
            inspect.Parameter("body", keyword, annotation=Body),
            inspect.Parameter("state", keyword, annotation=State),
        ],
        return_annotation=JSONResponse,
    )
    endpoint.__name__ = route.operation_id
    router.post(f"{PREFIX}{route.path}", **_documented(action, route))(endpoint)


for _action in offered_by(Surface.API):
    # The webhook endpoints' actions have routes of their own (``webhooks.py``'s
    # ``ACTION_ROUTES``): their bodies and answers are those of /v1beta1/webhooks.
    if _action.kind in ROUTES:
        _offer(_action)

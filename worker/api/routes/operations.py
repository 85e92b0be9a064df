"""``/v1beta1/operations``: the operator console over HTTP, the same reads and actions as
``billing-worker accounts``, ``subscriptions``, ``commands``, ``orgs`` and ``users``.

Reads need the ``operations:read`` scope, actions ``operations:write``; both span every
organization, so a client limited to organizations holds neither. Reads answer the console's views
(``domain/operations/console.py``), the stories with personal data masked as the console's pages
and the logs mask it (``domain/redaction.py``); the actions are the
table's (``application/operator_actions.py``), offered by ``operator_actions.py``. Nothing here is a
command of the log.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse

from application.handlers.operations import actions as handlers
from application.handlers.operations.stories import ShowAccount, account_story
from application.requests.operator_actions import ShowSubscription
from domain.errors import (
    NotFound,
    found,
)
from domain.messages import ID_PATTERN
from domain.operations.console import (
    DEFAULT_PAGE_SIZE,
    IN_FLIGHT_STATUSES,
    MAX_PAGE_SIZE,
    AccountStory,
    BillingAccountPage,
    CommandPage,
    OrganizationPage,
    SubscriptionPage,
    SubscriptionStory,
    UserPage,
)
from domain.permissions import Scope
from domain.redaction import redact
from worker.api.auth import Caller, permitted
from worker.api.errors import ApiError
from worker.api.openapi import direct_operation
from worker.api.routes.operator_actions import PREFIX, run_action
from worker.api.state import State

router = APIRouter(tags=["operations"])

Reader = Annotated[Caller, permitted(Scope.OPERATIONS_READ)]
IdPath = Annotated[str, Path(min_length=1, max_length=128, pattern=ID_PATTERN)]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="Rows in a page.")]
After = Annotated[
    str | None,
    Query(min_length=1, max_length=512, description="The `next_cursor` of the page before."),
]
IdFilter = Annotated[str | None, Query(min_length=1, max_length=128, pattern=ID_PATTERN)]


@router.get(
    f"{PREFIX}/billing-accounts/{{org_or_account}}",
    operation_id="get_billing_account_story",
    summary="A billing account's story",
    description="The account (by its id, or its organization's id), its Stripe customer and "
    "state, its subscriptions' stories (phases, plan changes, invoices from Stripe), every "
    "command that named it or its organization, each Stripe call made for them "
    "(operation, idempotency key, attempt, outcome, error), and its events. Personal data is "
    "masked as the console shows it (the account's name `A***`, its email `b***@acme.example`, "
    "emails and phones in errors and events). Needs the `operations:read` scope.",
    **direct_operation(answer=AccountStory, answer_description="The account's story."),
)
async def get_billing_account_story(
    org_or_account: IdPath, client: Reader, state: State
) -> JSONResponse:
    story = await run_action(lambda: account_story(ShowAccount(org_or_account), state.svc))
    if story is None:
        raise ApiError.of(NotFound.resource("billing_account", org_or_account))
    return JSONResponse(redact(story.model_dump(mode="json")))


@router.get(
    f"{PREFIX}/subscriptions/{{id}}",
    operation_id="get_subscription_story",
    summary="A subscription's story",
    description="Its phases, its plan changes with their apply lag, its newest invoices at "
    "Stripe (or why they could not be read), and its commands, Stripe calls and events. "
    "Personal data is masked as the console shows it. Needs the `operations:read` scope.",
    **direct_operation(answer=SubscriptionStory, answer_description="The subscription's story."),
)
async def get_subscription_story(id: IdPath, client: Reader, state: State) -> JSONResponse:
    svc = state.svc

    def told() -> SubscriptionStory:
        read = found(svc.console().subscription_story(id), "subscription", id)
        return handlers.subscription_story(ShowSubscription(read), svc)

    story = await run_action(told)
    return JSONResponse(redact(story.model_dump(mode="json")))


@router.get(
    f"{PREFIX}/organizations",
    operation_id="list_organizations",
    summary="Organizations, by id",
    description="A page; `next_cursor` asks for the next. Needs the `operations:read` scope.",
    **direct_operation(answer=OrganizationPage, answer_description="A page of organizations."),
)
async def list_organizations(
    client: Reader,
    state: State,
    org_state: Annotated[Literal["enabled", "disabled"] | None, Query(alias="state")] = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    after: After = None,
) -> JSONResponse:
    page = await run_action(
        lambda: state.svc.console().organizations(state=org_state, limit=limit, after=after)
    )
    return JSONResponse(page.model_dump(mode="json"))


@router.get(
    f"{PREFIX}/users",
    operation_id="list_users",
    summary="Users, by id",
    description="A page; `next_cursor` asks for the next. Needs the `operations:read` scope.",
    **direct_operation(answer=UserPage, answer_description="A page of users."),
)
async def list_users(
    client: Reader,
    state: State,
    user_state: Annotated[Literal["enabled", "disabled"] | None, Query(alias="state")] = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    after: After = None,
) -> JSONResponse:
    page = await run_action(
        lambda: state.svc.console().users(state=user_state, limit=limit, after=after)
    )
    return JSONResponse(page.model_dump(mode="json"))


@router.get(
    f"{PREFIX}/billing-accounts",
    operation_id="list_billing_accounts",
    summary="Billing accounts, by id",
    description="A page; `next_cursor` asks for the next. Needs the `operations:read` scope.",
    **direct_operation(answer=BillingAccountPage, answer_description="A page of accounts."),
)
async def list_billing_accounts(
    client: Reader,
    state: State,
    account_state: Annotated[
        Literal["pending", "active", "disabled"] | None, Query(alias="state")
    ] = None,
    org_id: IdFilter = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    after: After = None,
) -> JSONResponse:
    page = await run_action(
        lambda: state.svc.console().billing_accounts(
            state=account_state, org_id=org_id, limit=limit, after=after
        )
    )
    return JSONResponse(page.model_dump(mode="json"))


@router.get(
    f"{PREFIX}/subscriptions",
    operation_id="list_subscriptions",
    summary="Subscriptions, by id",
    description="A page, each with its pending plan change; `next_cursor` asks for the next. "
    "Needs the `operations:read` scope.",
    **direct_operation(answer=SubscriptionPage, answer_description="A page of subscriptions."),
)
async def list_subscriptions(
    client: Reader,
    state: State,
    subscription_state: Annotated[
        Literal["active", "trialing", "past_due", "canceled", "ended"] | None,
        Query(alias="state"),
    ] = None,
    billing_account_id: IdFilter = None,
    plan_id: IdFilter = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    after: After = None,
) -> JSONResponse:
    page = await run_action(
        lambda: state.svc.console().subscriptions(
            state=subscription_state,
            billing_account_id=billing_account_id,
            plan_id=plan_id,
            limit=limit,
            after=after,
        )
    )
    return JSONResponse(page.model_dump(mode="json"))


CommandStatusName = Literal["queued", "running", "retrying", "waiting", "succeeded", "failed"]


@router.get(
    f"{PREFIX}/commands",
    operation_id="list_commands",
    summary="Commands in flight, oldest first",
    description="Queued, running, retrying and waiting commands (or those of `status`, "
    "repeated), each with its attempts, last error and next retry. Needs the "
    "`operations:read` scope.",
    **direct_operation(answer=CommandPage, answer_description="A page of commands."),
)
async def list_commands(
    client: Reader,
    state: State,
    status: Annotated[list[CommandStatusName] | None, Query()] = None,
    command_type: Annotated[
        str | None, Query(alias="type", min_length=1, max_length=64, pattern=ID_PATTERN)
    ] = None,
    limit: Limit = DEFAULT_PAGE_SIZE,
    after: After = None,
) -> JSONResponse:
    statuses = list(status or IN_FLIGHT_STATUSES)
    page = await run_action(
        lambda: state.svc.console().commands(
            statuses=statuses, command_type=command_type, limit=limit, after=after
        )
    )
    return JSONResponse(page.model_dump(mode="json"))

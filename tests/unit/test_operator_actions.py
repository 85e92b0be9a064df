"""The operator's actions are written once (``application/operator_actions.py``) and offered by
the operations API, the console and the command line from that table: each surface offers
exactly the actions the table says it does, each action builds the request its handler takes,
and every action is taken through one place that logs it with its reason (its audit entry:
``tests/unit/test_audit_trail.py``)."""

from __future__ import annotations

import inspect
import logging
import typing
from typing import Any

import click
import pytest

from application.operator_actions import (
    OPERATOR_ACTIONS,
    ActionKind,
    Call,
    ReasonUse,
    Surface,
    offered_by,
    take,
)
from application.requests.operator_actions import OperatorAction
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount
from tests.support.fakes.application import FakeApplication
from tests.support.fakes.data import an_organization
from worker.api.app import ROUTERS
from worker.api.console import actions as console
from worker.api.console.action_kinds import SUBJECTS
from worker.api.routes import operator_actions as routes
from worker.api.routes import webhooks as webhook_routes
from worker.cli import actions as cli
from worker.cli import main

KINDS = [action.kind for action in OPERATOR_ACTIONS]


def kinds(surface: Surface) -> set[str]:
    return {action.kind for action in offered_by(surface)}


def test_each_action_has_a_kind_of_its_own() -> None:
    assert len(set(KINDS)) == len(KINDS)


def test_the_api_has_a_route_for_each_action_the_table_offers_there_and_no_other() -> None:
    posted = {
        (route.path, route.operation_id)  # type: ignore[attr-defined]
        for route in routes.router.routes
    }

    assert set(routes.ROUTES) | set(webhook_routes.ACTION_ROUTES) == kinds(Surface.API)
    assert not set(routes.ROUTES) & set(webhook_routes.ACTION_ROUTES)
    assert posted == {
        (f"{routes.PREFIX}{where.path}", where.operation_id) for where in routes.ROUTES.values()
    }
    assert routes.router in ROUTERS


def test_the_webhook_routes_offer_the_endpoints_actions_the_table_offers_on_the_api() -> None:
    operations = {
        route.endpoint.__name__: route  # type: ignore[attr-defined]
        for route in webhook_routes.router.routes
    }

    for kind, operation in webhook_routes.ACTION_ROUTES.items():
        assert Surface.API in entry(kind).surfaces
        assert operations[operation].methods == {"POST"}  # type: ignore[attr-defined]
        assert scope_of(operations[operation]) is entry(kind).scope


def test_an_api_route_asks_for_the_scope_the_table_gives_its_action() -> None:
    for route in routes.router.routes:
        kind = next(k for k, where in routes.ROUTES.items() if route.path.endswith(where.path))  # type: ignore[attr-defined]

        assert scope_of(route) is entry(kind).scope


def scope_of(route: Any) -> Any:
    """The scope the route's ``client`` parameter is checked for."""
    annotation = inspect.signature(route.endpoint).parameters["client"].annotation
    if isinstance(annotation, str):  # a route written in its module: its annotations' names
        annotation = typing.get_type_hints(route.endpoint, include_extras=True)["client"]
    check = typing.get_args(annotation)[1].dependency
    assert check.__qualname__.startswith("permitted.")
    return inspect.getclosurevars(check).nonlocals["scope"]


def test_the_console_offers_each_action_the_table_offers_there_and_can_show_what_it_acts_on() -> (
    None
):
    assert set(console.ACTION_KINDS) == kinds(Surface.CONSOLE)
    assert {action.target.subject for action in offered_by(Surface.CONSOLE)} <= set(SUBJECTS)


def test_the_command_line_has_a_command_for_each_action_the_table_offers_there() -> None:
    assert set(cli.COMMANDS) == kinds(Surface.CLI)
    for kind, where in cli.COMMANDS.items():
        group = main.commands[where.group.name or ""]
        assert isinstance(group, click.Group)
        command = group.commands[where.name]
        options = {name for param in command.params for name in param.opts}

        assert command.help is not None
        assert entry(kind).summary in command.help
        assert {"--reason", "--operator"} <= options
        assert "--json" in options


@pytest.mark.parametrize("kind", KINDS)
def test_an_action_builds_the_request_its_handler_takes(kind: str) -> None:
    action = entry(kind)
    request = action.request(Call("op-test-1", ("cmd_1",), "Stripe is back"))
    module, _, name = action.handler.partition(":")
    handler = getattr(__import__(f"application.handlers.{module}", fromlist=[name]), name)
    first = next(iter(inspect.signature(handler).parameters))

    assert typing.get_type_hints(handler)[first] is type(request)
    if isinstance(request, OperatorAction) or action.reason is ReasonUse.KEPT:
        assert request.reason == "Stripe is back"


def test_an_action_is_taken_through_one_place_that_logs_who_took_it_and_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = FakeApplication()
    organization = an_organization("org_1")
    app.db.seed(
        organization,
        BillingAccount.open(
            "ba_1",
            organization,
            BillingDetails(name="Acme", email="billing@acme.example"),
            offline=False,
            default_currency="usd",
            now=app.clock.now(),
        ),
    )
    action = entry("mark-offline")

    with caplog.at_level(logging.INFO, logger="application.operator_actions"):
        taken = take(action, app, ["ba_1"], "  Stripe\tis down ", by="ops", surface=Surface.API)

    assert action.said(taken) == "ba_1 marked offline"
    assert taken.command_id.startswith("op-mark-offline-")
    [line] = [r.getMessage() for r in caplog.records if r.name == "application.operator_actions"]
    assert line == (
        f"operator action mark-offline {taken.command_id} on ba_1 by ops (api): Stripe is down"
    )


def test_a_dead_letter_replayed_says_the_queue_it_went_back_on() -> None:
    app = FakeApplication()
    app.replayable["1700000000000-0"] = "billing"
    action = entry("replay-dead-letter")

    taken = take(action, app, ["1700000000000-0"], "unknown task", by="ann", surface=Surface.CLI)

    assert action.said(taken) == "dead letter 1700000000000-0 put back on billing"


def entry(kind: str) -> ActionKind[Any, Any]:
    return next(action for action in OPERATOR_ACTIONS if action.kind == kind)

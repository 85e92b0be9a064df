"""The console's lists: ``orgs list``, ``users list``, ``accounts list``, ``subscriptions
list`` and ``commands list`` (in flight), and what every list shares.

Each prints a header row, then a row per item, or says that there is none ("no
subscriptions"); ``--json`` prints the page (``items`` and ``next_cursor``). A page holds
``--limit`` rows; when more follow, the last line says how to ask for them
(``--after CURSOR``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from domain.operations.console import (
    DEFAULT_PAGE_SIZE,
    IN_FLIGHT_STATUSES,
    MAX_PAGE_SIZE,
    BillingAccountItem,
    OrganizationItem,
    SubscriptionItem,
    UserItem,
)
from worker.cli.base import DATABASE_ENV, as_json_option, emit, services
from worker.cli.command_log import commands
from worker.cli.orgs import orgs
from worker.cli.subscriptions import subscriptions
from worker.cli.tables import COMMAND_HEADERS, command_row, table, when
from worker.cli.users import users

F = TypeVar("F", bound=Callable[..., Any])
STATUSES = ("queued", "running", "retrying", "waiting", "succeeded", "failed")


def print_page(
    as_json: bool,
    page: Any,
    headers: Sequence[str],
    row: Callable[[Any], Sequence[str]],
    nothing: str,
) -> None:
    """A page of a list: its table (or ``nothing``), and how to see the next page."""
    if as_json:
        emit(True, page.model_dump(mode="json"), "")
        return
    items = page.items
    click.echo(table(headers, [row(item) for item in items]))
    if not items:
        click.echo(nothing)
    if page.next_cursor:
        click.echo(f"more: --after {page.next_cursor}")


def paged(command: F) -> F:
    """``--limit``, ``--after`` and ``--json``."""
    command = click.option(
        "--after", default=None, metavar="CURSOR", help="The cursor the page before printed."
    )(command)
    command = click.option(
        "--limit",
        type=click.IntRange(1, MAX_PAGE_SIZE),
        default=DEFAULT_PAGE_SIZE,
        show_default=True,
        help="Rows in a page.",
    )(command)
    return as_json_option(command)


ORGANIZATION_HEADERS = ("ID", "NAME", "TITLE", "STATE", "CREATED")


def _organization_row(item: OrganizationItem) -> list[str]:
    return [item.id, item.name, item.title, item.state, when(item.created_at)]


@orgs.command("list", settings_env=DATABASE_ENV)
@click.option("--state", type=click.Choice(["enabled", "disabled"]), default=None)
@paged
def orgs_list(state: str | None, limit: int, after: str | None, as_json: bool) -> None:
    """Organizations, by id."""
    page = services().console().organizations(state=state, limit=limit, after=after)
    print_page(as_json, page, ORGANIZATION_HEADERS, _organization_row, "no organizations")


USER_HEADERS = ("ID", "EMAIL", "NAME", "STATE", "CREATED")


def _user_row(item: UserItem) -> list[str]:
    return [item.id, item.email, item.name, item.state, when(item.created_at)]


@users.command("list", settings_env=DATABASE_ENV)
@click.option("--state", type=click.Choice(["enabled", "disabled"]), default=None)
@paged
def users_list(state: str | None, limit: int, after: str | None, as_json: bool) -> None:
    """Users, by id."""
    page = services().console().users(state=state, limit=limit, after=after)
    print_page(as_json, page, USER_HEADERS, _user_row, "no users")


ACCOUNT_HEADERS = ("ID", "ORG", "STATE", "STRIPE CUSTOMER", "CURRENCY", "CREATED")


def account_row(item: BillingAccountItem) -> list[str]:
    customer = item.provider_id or "(offline)"
    if item.customer_deleted_at is not None:
        customer += " (deleted)"
    return [item.id, item.org_id, item.state, customer, item.currency, when(item.created_at)]


SUBSCRIPTION_HEADERS = ("ID", "ACCOUNT", "PLAN", "STATE", "STRIPE ID", "PERIOD END", "PENDING")


def _subscription_row(item: SubscriptionItem) -> list[str]:
    return [
        item.id,
        item.billing_account_id,
        item.plan_id,
        item.state,
        item.provider_id,
        when(item.current_period_end),
        item.pending_change or "",
    ]


@subscriptions.command("list", settings_env=DATABASE_ENV)
@click.option(
    "--state",
    type=click.Choice(["active", "trialing", "past_due", "canceled", "ended"]),
    default=None,
)
@click.option("--account", "billing_account_id", default=None, help="Of this billing account.")
@click.option("--plan", "plan_id", default=None, help="On this plan (its id).")
@paged
def subscriptions_list(
    state: str | None,
    billing_account_id: str | None,
    plan_id: str | None,
    limit: int,
    after: str | None,
    as_json: bool,
) -> None:
    """Subscriptions, by id, with their pending plan change."""
    page = (
        services()
        .console()
        .subscriptions(
            state=state,
            billing_account_id=billing_account_id,
            plan_id=plan_id,
            limit=limit,
            after=after,
        )
    )
    print_page(as_json, page, SUBSCRIPTION_HEADERS, _subscription_row, "no subscriptions")


@commands.command("list", settings_env=DATABASE_ENV)
@click.option(
    "--status",
    "statuses",
    type=click.Choice(STATUSES),
    multiple=True,
    help="Only in this status (repeat for several) [default: queued, running, retrying, "
    "waiting: the commands in flight].",
)
@click.option("--type", "command_type", default=None, help="Only of this type (its task name).")
@paged
def commands_list(
    statuses: tuple[str, ...],
    command_type: str | None,
    limit: int,
    after: str | None,
    as_json: bool,
) -> None:
    """Commands in flight (or in --status), oldest first."""
    page = (
        services()
        .console()
        .commands(
            statuses=list(statuses or IN_FLIGHT_STATUSES),
            command_type=command_type,
            limit=limit,
            after=after,
        )
    )
    nothing = "no commands in flight" if not statuses else "no commands"
    print_page(as_json, page, COMMAND_HEADERS, command_row, nothing)

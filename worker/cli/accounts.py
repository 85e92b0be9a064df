"""``billing-worker accounts``: billing accounts as an operator follows them: the story of
one (``show``) and the list. Its actions (``retry``, ``mark-offline``) are the operator's
actions' table's, added by ``actions.py``."""

from __future__ import annotations

import click

from worker.cli.base import (
    DATABASE_ENV,
    BillingGroup,
    as_json_option,
    emit,
    fail,
    services,
)
from worker.cli.listing import ACCOUNT_HEADERS, account_row, paged, print_page
from worker.cli.stories import account_text


@click.group(cls=BillingGroup)
def accounts() -> None:
    """Billing accounts: what happened to one, the list, and what an operator can do."""


@accounts.command("show", settings_env=DATABASE_ENV)
@click.argument("org_or_account")
@as_json_option
def accounts_show(org_or_account: str, as_json: bool) -> None:
    """An account (by its id, or its organization's id): its Stripe customer and state, its
    subscriptions (phases, plan changes with their lag, invoices and their lines read from
    Stripe), and a timeline of every command that named it, its organization or its
    subscriptions, each Stripe call made for them (operation, idempotency key, attempt,
    outcome, error), the next retry, and the events they emitted."""
    from application.handlers.operations.stories import ShowAccount, account_story
    from domain.rules import checked_id

    story = account_story(ShowAccount(checked_id(org_or_account, "org_or_account")), services())
    if story is None:
        fail(f"no billing account {org_or_account}, nor an organization {org_or_account} with one")
    emit(as_json, story.model_dump(mode="json"), account_text(story))


@accounts.command("list", settings_env=DATABASE_ENV)
@click.option(
    "--state", type=click.Choice(["pending", "active", "disabled", "deleted"]), default=None
)
@click.option("--org", "org_id", default=None, help="Of this organization.")
@paged
def accounts_list(
    state: str | None, org_id: str | None, limit: int, after: str | None, as_json: bool
) -> None:
    """Billing accounts, by id, with their Stripe customer."""
    page = (
        services().console().billing_accounts(state=state, org_id=org_id, limit=limit, after=after)
    )
    print_page(as_json, page, ACCOUNT_HEADERS, account_row, "no billing accounts")

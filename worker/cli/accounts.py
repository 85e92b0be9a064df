"""``billing-worker accounts``: billing accounts as an operator follows them: the story of
one (``show``), the list, and the actions (``retry``, ``mark-offline``); and the actions on
commands and plan changes that go with them (``commands retry``,
``subscriptions skip-change``)."""

from __future__ import annotations

import click

from application.requests.operator_actions import (
    MarkAccountOffline,
    RetryCommand,
    RetryRegistration,
    SkipScheduledChange,
    new_action_id,
)
from worker.cli.base import (
    DATABASE_ENV,
    REDIS_ENV,
    BillingGroup,
    as_json_option,
    emit,
    fail,
    services,
)
from worker.cli.command_log import commands
from worker.cli.listing import ACCOUNT_HEADERS, account_row, paged, print_page
from worker.cli.stories import account_text
from worker.cli.subscriptions import subscriptions

reason_option = click.option("--reason", default="", help="Why (kept with the change).")


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


def _account_id(org_or_account: str) -> str:
    from domain.rules import checked_id

    story = services().console().account_story(checked_id(org_or_account, "org_or_account"))
    if story is None:
        fail(f"no billing account {org_or_account}, nor an organization {org_or_account} with one")
    return str(story.billing_account["id"])


@accounts.command("retry", settings_env=(*DATABASE_ENV, *REDIS_ENV))
@click.argument("org_or_account")
@reason_option
@as_json_option
def accounts_retry(org_or_account: str, reason: str, as_json: bool) -> None:
    """Send a pending account's registration with Stripe again now (same idempotency key:
    one customer however often it runs); a worker runs it."""
    from application.handlers.operations.actions import retry_registration

    action = RetryRegistration(
        command_id=new_action_id("retry-registration"),
        billing_account_id=_account_id(org_or_account),
        reason=reason,
    )
    taken = retry_registration(action, services())
    emit(
        as_json,
        taken.model_dump(mode="json"),
        f"registration of {action.billing_account_id} sent as {taken.sent_command_id}",
    )


@accounts.command("mark-offline", settings_env=DATABASE_ENV)
@click.argument("org_or_account")
@reason_option
@as_json_option
def accounts_mark_offline(org_or_account: str, reason: str, as_json: bool) -> None:
    """Make a pending account active without Stripe (its registration abandoned; it can be
    registered later). A registration still retrying registers it when it gets through:
    mark it offline once its command has failed."""
    from application.handlers.operations.actions import mark_account_offline

    action = MarkAccountOffline(
        command_id=new_action_id("mark-offline"),
        billing_account_id=_account_id(org_or_account),
        reason=reason,
    )
    taken = mark_account_offline(action, services())
    said = "marked offline" if taken.changed else "already offline"
    emit(as_json, taken.model_dump(mode="json"), f"{action.billing_account_id} {said}")


@commands.command("retry", settings_env=(*DATABASE_ENV, *REDIS_ENV))
@click.argument("command_id")
@reason_option
@as_json_option
def commands_retry(command_id: str, reason: str, as_json: bool) -> None:
    """Run a retrying, waiting or queued command now instead of at its next retry (a failed
    one is replayed with `commands replay`)."""
    from application.handlers.operations.actions import retry_command

    action = RetryCommand(
        command_id=new_action_id("retry-command"), target_command_id=command_id, reason=reason
    )
    taken = retry_command(action, services())
    emit(as_json, taken.model_dump(mode="json"), f"{command_id} sent again ({taken.state})")


@subscriptions.command("skip-change", settings_env=DATABASE_ENV)
@click.argument("change_id")
@reason_option
@as_json_option
def subscriptions_skip_change(change_id: str, reason: str, as_json: bool) -> None:
    """Skip a scheduled plan change (`subscriptions show` lists them): it will not be made.
    A staged change (made at Stripe already) or one being applied is refused."""
    from application.handlers.operations.actions import skip_scheduled_change

    action = SkipScheduledChange(
        command_id=new_action_id("skip-change"), change_id=change_id, reason=reason
    )
    taken = skip_scheduled_change(action, services())
    said = "skipped" if taken.changed else "was skipped already"
    emit(as_json, taken.model_dump(mode="json"), f"{change_id} {said}")

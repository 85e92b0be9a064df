"""The operator's actions on the command line: one command for each action of the table
(``application/operator_actions.py``) the CLI offers, in the group it belongs to.

Only where each lives is this module's own (:data:`COMMANDS`, keyed by the action's kind: its
group, its name, what its argument is called, the settings it reads, and a note for this
surface); its help, its ``--reason``, its ``--operator`` (who, for the audit trail), what it
prints (one line, or its ``--json``) and the use case it runs are the table's. Every action is
taken through the table's ``take``, as the API and the console take it.

The actions on configuration (a client's secret, the webhook endpoints, the clock) have
commands of their own, in their group's module (``own``): they take options of their own
and print a secret once; their help, ``--reason`` and ``--operator`` are the table's all the
same (``worker/cli/audited.py``), and they take the action through ``take`` too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from application.operator_actions import REASON_LABELS, ActionKind, Surface, offered_by
from worker.cli.accounts import accounts
from worker.cli.base import (
    DATABASE_ENV,
    REDIS_ENV,
    as_json_option,
    emit,
    fail,
    operator_option,
    services,
)
from worker.cli.clients import clients
from worker.cli.clock import clock
from worker.cli.command_log import commands
from worker.cli.dead_letters import dead_letters
from worker.cli.subscriptions import subscriptions
from worker.cli.webhooks import webhooks

if TYPE_CHECKING:
    from worker.bootstrap import Services


def _account_id(svc: Services, org_or_account: str) -> str:
    """The billing account an organization's id or an account's id names."""
    from domain.rules import checked_id

    story = svc.console().account_story(checked_id(org_or_account, "org_or_account"))
    if story is None:
        fail(f"no billing account {org_or_account}, nor an organization {org_or_account} with one")
    return str(story.billing_account["id"])


@dataclass(frozen=True)
class Command:
    """Where the command line offers an action."""

    group: click.Group
    name: str
    argument: str
    """The argument's name (``command_ids``: several, for an action that takes many)."""
    settings_env: tuple[str, ...]
    """The settings it reads (an ``own`` command declares them where it is written)."""
    note: str = ""
    """What the help adds for this surface."""
    target: Callable[[Services, str], str] | None = None
    """How the argument becomes the action's target (default: as it is)."""
    own: bool = False
    """Whether the command is written in its group's module (with options of its own)."""


COMMANDS = {
    "replay-command": Command(
        commands,
        "replay",
        "command_ids",
        (*DATABASE_ENV, *REDIS_ENV),
        note="Several COMMAND_IDS: all or none (each is checked before the first is replayed).",
    ),
    "retry-command": Command(commands, "retry", "command_id", (*DATABASE_ENV, *REDIS_ENV)),
    "retry-registration": Command(
        accounts,
        "retry",
        "org_or_account",
        (*DATABASE_ENV, *REDIS_ENV),
        note="ORG_OR_ACCOUNT: the account's id, or its organization's.",
        target=_account_id,
    ),
    "mark-offline": Command(
        accounts,
        "mark-offline",
        "org_or_account",
        DATABASE_ENV,
        note="ORG_OR_ACCOUNT: the account's id, or its organization's.",
        target=_account_id,
    ),
    "skip-change": Command(
        subscriptions,
        "skip-change",
        "change_id",
        DATABASE_ENV,
        note="`subscriptions show` lists a subscription's changes.",
    ),
    "replay-dead-letter": Command(dead_letters, "replay", "letter_id", REDIS_ENV),
    "rotate-client-secret": Command(clients, "rotate-secret", "client_id", DATABASE_ENV, own=True),
    "add-webhook": Command(webhooks, "add", "url", DATABASE_ENV, own=True),
    "disable-webhook": Command(webhooks, "disable", "endpoint_id", DATABASE_ENV, own=True),
    "enable-webhook": Command(webhooks, "enable", "endpoint_id", DATABASE_ENV, own=True),
    "rotate-webhook-secret": Command(
        webhooks, "rotate-secret", "endpoint_id", DATABASE_ENV, own=True
    ),
    "advance-clock": Command(clock, "advance", "duration", (*DATABASE_ENV, *REDIS_ENV), own=True),
    "reset-clock": Command(clock, "reset", "", (*DATABASE_ENV, *REDIS_ENV), own=True),
}
"""The command of each action the command line offers, by kind."""


def _offer(action: ActionKind[Any, Any], where: Command) -> None:
    def run(as_json: bool, operator: str, reason: str = "", **arguments: Any) -> None:
        from application.operator_actions import take

        given = arguments[where.argument]
        svc = services()
        targets = tuple(given) if action.many else (given,)
        if where.target is not None:
            targets = tuple(where.target(svc, one) for one in targets)
        done = take(action, svc, targets, reason, by=operator, surface=Surface.CLI)
        emit(as_json, action.view(done), action.said(done))

    command = operator_option(as_json_option(run))
    # Not a required option: a missing reason is the action's refusal, one line naming it.
    command = click.option(
        "--reason", default="", help=f"{REASON_LABELS[action.reason]}; required."
    )(command)
    command = click.argument(where.argument, nargs=-1 if action.many else 1, required=True)(command)
    where.group.command(
        where.name,
        settings_env=where.settings_env,
        help=f"{action.summary}. {action.does} {where.note}".strip(),
        short_help=f"{action.summary}.",
    )(command)


for _action in offered_by(Surface.CLI):
    if not COMMANDS[_action.kind].own:
        _offer(_action, COMMANDS[_action.kind])

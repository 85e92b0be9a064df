"""``billing-worker``: run the system, its parts, and the operator's admin commands.

Every command reads the same ``BILLING_*`` settings, so admin commands reach the same
database as ``up``. Each command group is a module here; :mod:`worker.cli.base` holds what
they share, among it the one place where a failure becomes one line on stderr and an exit
status (1 refused, 2 a wrong command line, 3 a dependency unreachable; the convention is
spelled out in :mod:`worker.cli.base`).

Why some imports sit inside the commands: the help, what an operator runs most, must stay
quick. So a module here imports at its top only what showing the help needs (click, the
settings, the CLI's own modules, and modules of ours that load nothing more), and a command
imports in its own body what only running it needs: its use case and that use case's request
(``application/``'s handlers load most of the domain's message models, and the validators of
emails, phone numbers, countries and images behind them), and the adapters (SQLAlchemy, Celery,
Redis, Stripe, the local stack, the emulator). Best of 15 runs: the help takes 0.25 s; 0.4 s if
it loaded every use case; 1.2 s with the adapters too. ``tests/unit/test_cli_start_up.py``
keeps it so.
"""

from __future__ import annotations

import click

from worker.cli import (  # noqa: F401 - they add to groups
    actions,
    listing,
    processes,
    stripe_faults,
    stripe_sync,
)
from worker.cli.accounts import accounts
from worker.cli.audit import audit
from worker.cli.base import RootGroup
from worker.cli.clients import clients
from worker.cli.clock import clock
from worker.cli.command_log import commands
from worker.cli.dead_letters import dead_letters
from worker.cli.demo import demo
from worker.cli.local_stack import down, status
from worker.cli.orgs import orgs
from worker.cli.plans import plans
from worker.cli.stripe_account import stripe
from worker.cli.subscriptions import subscriptions
from worker.cli.users import users
from worker.cli.webhooks import webhooks

__all__ = ["main"]


@click.group(cls=RootGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="billing-worker", prog_name="billing-worker")
def main() -> None:
    """billing-worker: billing and user operations, performed reliably in the background.

    \b
    Exit status, the same for every command:
      0  done
      1  refused: a value breaks a rule of the data (name taken, unknown id, bad
         email...), or the current state forbids it
      2  a wrong command line: unknown command or option, missing argument, a value
         not of its form (a duration like 31x, an unknown scope, event type or
         state), options that exclude each other, --yes missing where needed
      3  the database, Redis or the billing provider is unreachable (try again)
    """


processes.register(main)
main.add_command(status)
main.add_command(down)
main.add_command(audit)
for group in (
    clients,
    orgs,
    users,
    accounts,
    plans,
    subscriptions,
    stripe,
    commands,
    dead_letters,
    webhooks,
    clock,
    demo,
):
    main.add_command(group)

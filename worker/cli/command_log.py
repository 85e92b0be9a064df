"""``billing-worker commands``: the command log, to inspect and replay."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from domain.operations.outcomes import error_line
from worker.cli.base import DATABASE_ENV, REDIS_ENV, BillingGroup, fail, services
from worker.cli.dead_letters import dead_letter_store
from worker.cli.tables import echo_list

if TYPE_CHECKING:
    from adapters.db.command_records import CommandRecord
    from application.handlers.operations.retention import Pruned


@click.group(cls=BillingGroup)
def commands() -> None:
    """The command log: inspect, replay and prune."""


@commands.command("show", settings_env=DATABASE_ENV)
@click.argument("command_id")
def commands_show(command_id: str) -> None:
    """Print one command's record."""
    from worker.api.gateway import record_view

    record = services().commands.get(command_id)
    if record is None:
        fail(f"no command {command_id}")
    click.echo(json.dumps({**record_view(record), "payload": record.payload}, indent=2))


@commands.command("failed", settings_env=(*DATABASE_ENV, *REDIS_ENV))
@click.option("--limit", type=int, default=50, show_default=True)
def commands_failed(limit: int) -> None:
    """List failed commands, newest first: those an operator acts on (a dependency down for
    the whole retry budget, an internal error), then replays. A caller's mistake is listed
    by `commands rejected`."""
    _list(services().commands.list_failed(limit), "failed")
    letters = dead_letter_store().count()
    if letters:
        click.echo(
            f"and {letters} dead letters: messages no worker could take "
            "(`billing-worker dead-letters list`)"
        )


@commands.command("rejected", settings_env=DATABASE_ENV)
@click.option("--limit", type=int, default=50, show_default=True)
def commands_rejected(limit: int) -> None:
    """List rejected commands, newest first: the callers' mistakes (invalid, not found, a
    conflict, not permitted, refused by Stripe for their data). Nobody replays them; they
    are kept BILLING_REJECTED_COMMAND_RETENTION_DAYS."""
    _list(services().commands.list_rejected(limit), "rejected")


def _list(records: Sequence[CommandRecord], status: str) -> None:
    echo_list(
        ("COMMAND", "TYPE", "FINISHED (UTC)", "REASON"),
        [
            (
                record.id,
                record.type,
                f"{record.finished_at or record.updated_at:%Y-%m-%d %H:%M:%S}",
                error_line(record.error or {}),
            )
            for record in records
        ],
        empty=f"no {status} commands",
    )


RETENTION_ENV = (
    *DATABASE_ENV,
    "BILLING_COMMAND_RETENTION_DAYS",
    "BILLING_FAILED_COMMAND_RETENTION_DAYS",
    "BILLING_REJECTED_COMMAND_RETENTION_DAYS",
    "BILLING_COMMAND_RETENTION_BATCH",
)


@commands.command("prune", settings_env=RETENTION_ENV)
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
def commands_prune(dry_run: bool) -> None:
    """Delete finished commands older than their retention, as beat's sweep does
    (succeeded after BILLING_COMMAND_RETENTION_DAYS, failed after
    BILLING_FAILED_COMMAND_RETENTION_DAYS, rejected after
    BILLING_REJECTED_COMMAND_RETENTION_DAYS; never a command that has not finished), in
    batches of short transactions, until none is due. Their idempotency keys go with them."""
    from application.handlers.operations.retention import due_for_pruning, prune_command_log
    from application.requests.sweeps import CountDueForPruning, PruneCommandLog

    app = services()
    if dry_run:
        due = due_for_pruning(CountDueForPruning(), app)
        click.echo(f"would prune {_commands(sum(part.count for part in due))}: {_parts(due)}")
        return
    report = prune_command_log(PruneCommandLog(until_done=True), app)
    click.echo(f"pruned {_commands(report.total)}: {_parts(report.pruned)}")


def _commands(count: int) -> str:
    return f"{count} command" if count == 1 else f"{count} commands"


def _parts(pruned: Sequence[Pruned]) -> str:
    return ", ".join(
        f"{part.count} {part.status.value} before {part.finished_before:%Y-%m-%d %H:%M:%S}"
        for part in pruned
    )

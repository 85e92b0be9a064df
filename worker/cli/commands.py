"""``billing-worker commands``: the command log, to inspect and replay."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from worker.cli.base import DATABASE_ENV, REDIS_ENV, BillingGroup, echo_list, fail
from worker.cli.dead_letters import dead_letter_store

if TYPE_CHECKING:
    from tasks.handlers.retention import Pruned


@click.group(cls=BillingGroup)
def commands() -> None:
    """The command log: inspect, replay and prune."""


@commands.command("show", settings_env=DATABASE_ENV)
@click.argument("command_id")
def commands_show(command_id: str) -> None:
    """Print one command's record."""
    from worker.api.gateway import record_view
    from worker.bootstrap import bootstrap

    record = bootstrap().commands.get(command_id)
    if record is None:
        fail(f"no command {command_id}")
    click.echo(json.dumps({**record_view(record), "payload": record.payload}, indent=2))


@commands.command("failed", settings_env=(*DATABASE_ENV, *REDIS_ENV))
@click.option("--limit", type=int, default=50, show_default=True)
def commands_failed(limit: int) -> None:
    """List failed commands, newest first."""
    from worker.bootstrap import bootstrap

    echo_list(
        ("ID", "TYPE", "FAILED AT", "MESSAGE"),
        [
            (
                record.id,
                record.type,
                f"{record.updated_at:%Y-%m-%d %H:%M:%S}",
                (record.error or {}).get("message", ""),
            )
            for record in bootstrap().commands.list_failed(limit)
        ],
        empty="no failed commands",
    )
    letters = dead_letter_store().count()
    if letters:
        click.echo(
            f"and {letters} dead letters: messages no worker could take "
            "(`billing-worker dead-letters list`)"
        )


@commands.command("replay", settings_env=(*DATABASE_ENV, *REDIS_ENV))
@click.argument("command_ids", nargs=-1, required=True)
def commands_replay(command_ids: tuple[str, ...]) -> None:
    """Run finished commands again (same command id, so still idempotent)."""
    from tasks.handlers.outbox import publish_recorded
    from worker.bootstrap import bootstrap
    from worker.celery_app import app
    from worker.messaging.publisher import CeleryPublisher

    log = bootstrap().commands
    for command_id in command_ids:
        record = log.requeue(command_id)
        if record is None:
            fail(f"no command {command_id}")
        publish_recorded(record, CeleryPublisher(app), log)
        click.echo(f"replayed {command_id}")


RETENTION_ENV = (
    *DATABASE_ENV,
    "BILLING_COMMAND_RETENTION_DAYS",
    "BILLING_FAILED_COMMAND_RETENTION_DAYS",
    "BILLING_COMMAND_RETENTION_BATCH",
)


@commands.command("prune", settings_env=RETENTION_ENV)
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
def commands_prune(dry_run: bool) -> None:
    """Delete finished commands older than their retention, as beat's hourly sweep does
    (succeeded after BILLING_COMMAND_RETENTION_DAYS, failed after
    BILLING_FAILED_COMMAND_RETENTION_DAYS; never a command that has not finished), in
    batches of short transactions, until none is due. Their idempotency keys go with them."""
    from tasks.handlers.retention import due_for_pruning, prune_command_log
    from worker.bootstrap import bootstrap

    app = bootstrap()
    if dry_run:
        due = due_for_pruning(app)
        click.echo(f"would prune {_commands(sum(part.count for part in due))}: {_parts(due)}")
        return
    report = prune_command_log(app, until_done=True)
    click.echo(f"pruned {_commands(report.total)}: {_parts(report.pruned)}")


def _commands(count: int) -> str:
    return f"{count} command" if count == 1 else f"{count} commands"


def _parts(pruned: Sequence[Pruned]) -> str:
    return ", ".join(
        f"{part.count} {part.status.value} before {part.finished_before:%Y-%m-%d %H:%M:%S}"
        for part in pruned
    )

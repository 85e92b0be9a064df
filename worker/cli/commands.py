"""``billing-worker commands``: the command log, to inspect and replay."""

from __future__ import annotations

import json

import click

from worker.cli.base import DATABASE_ENV, REDIS_ENV, BillingGroup, fail
from worker.cli.dead_letters import dead_letter_store


@click.group(cls=BillingGroup)
def commands() -> None:
    """The command log: inspect and replay."""


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

    for record in bootstrap().commands.list_failed(limit):
        message = (record.error or {}).get("message", "")
        click.echo(
            f"{record.id}  {record.type:<28} {record.updated_at:%Y-%m-%d %H:%M:%S}  {message}"
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
    from worker.dispatch import CeleryPublisher

    log = bootstrap().commands
    for command_id in command_ids:
        record = log.requeue(command_id)
        if record is None:
            fail(f"no command {command_id}")
        publish_recorded(record, CeleryPublisher(app), log)
        click.echo(f"replayed {command_id}")

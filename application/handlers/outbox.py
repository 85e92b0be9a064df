"""The command log as the outbox: a recorded command goes onto its queue, then is marked so.

Every way a command is published (the API after recording it, beat's sweep of stalled
commands, an operator's replay) takes this one step. A crash between the two publishes it
again later, which is harmless: tasks are idempotent by command id.
"""

from __future__ import annotations

from domain.messages import Command
from domain.ports.commands import CommandJournal, CommandPublisher, PublishableCommand


def publish_recorded(
    record: PublishableCommand, publisher: CommandPublisher, journal: CommandJournal
) -> None:
    """Publish ``record`` as its task (the task id is the command id), then mark it
    published; raises, leaving it unmarked for the sweep, if the message could not go."""
    publisher.publish(record.type, record.payload, command_id=record.id)
    journal.mark_published(record.id)


def publish_command(
    command: Command, publisher: CommandPublisher, *, priority: int | None = None
) -> None:
    """Publish ``command`` as its task, on its queue, under its command id (a command the
    log does not hold: a sweep's or an operator's, idempotent by that id)."""
    publisher.publish(
        command.TASK_NAME,
        command.model_dump(mode="json"),
        command_id=command.command_id,
        queue=command.QUEUE,
        priority=priority,
    )

"""Publishing commands recorded in the command log onto their queues."""

from __future__ import annotations

from celery import Celery

from worker.db.commands import CommandRecord


def publish(app: Celery, record: CommandRecord) -> None:
    """Send the command as its task; the task id is the command id, so a re-publish of the
    same command is recognised by the task as the same command."""
    app.send_task(
        record.type,
        kwargs=record.payload,
        task_id=record.id,
        retry=True,
        retry_policy={"max_retries": 2, "interval_start": 0.1, "interval_step": 0.2},
    )

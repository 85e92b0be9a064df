"""Publishing commands onto their queues: the Celery adapter of ``CommandPublisher``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from celery import Celery

from worker.messaging.config import celery_config
from worker.settings import Settings

PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0.1, "interval_step": 0.2}


class CeleryPublisher:
    """Sends a command as its task; the task id is the command id, so a re-publish of the
    same command is recognised by the task as the same command."""

    def __init__(self, app: Celery) -> None:
        self.app = app

    def publish(
        self,
        task_name: str,
        payload: Mapping[str, Any],
        *,
        command_id: str,
        queue: str | None = None,
        priority: int | None = None,
    ) -> None:
        options: dict[str, Any] = {}
        if queue is not None:
            options["queue"] = queue
        if priority is not None:
            options["priority"] = priority
        self.app.send_task(
            task_name,
            kwargs=dict(payload),
            task_id=command_id,
            retry=True,
            retry_policy=PUBLISH_RETRY_POLICY,
            **options,
        )


def publishing_app(settings: Settings) -> Celery:
    """A Celery app that only publishes and reads results (the API, the CLI, another of our
    processes): our configuration, no tasks of its own, messages shown masked."""
    app = Celery(
        "billing_worker",
        set_as_current=False,
        amqp="worker.messaging.masking:MaskingAMQP" if settings.mask_personal_data else None,
    )
    app.conf.update(celery_config(settings))
    return app

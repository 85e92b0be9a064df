"""Publishing commands onto their queues: the Celery adapter of ``CommandPublisher``."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from celery import Celery
from celery.backends.base import KeyValueStoreBackend
from kombu import Producer

from worker.messaging.config import celery_config
from worker.settings import Settings

PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0.1, "interval_step": 0.2}


class CeleryPublisher:
    """Sends a command as its task; the task id is the command id, so a re-publish of the
    same command is recognised by the task as the same command."""

    def __init__(self, app: Celery, producer: Producer | None = None) -> None:
        self.app = app
        self.producer = producer

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
            producer=self.producer,
            **options,
        )

    @contextmanager
    def batch(self) -> Iterator[CeleryPublisher]:
        """kombu's publish batch (``Producer.batch``): on Redis, the messages and their
        ``task-sent`` events are buffered in one pipeline and sent when the block ends. A
        failed batch is not retried: it raises ``BatchPublishError``, its delivery uncertain.
        Nothing is sent before the end (kombu would flush every 1,000 commands): a flush that
        failed midway would fail messages their caller already counted as gone. The callers
        bound a batch (a sweep's claims)."""
        with (
            self.app.producer_or_acquire(self.producer) as producer,
            producer.batch(max_size=sys.maxsize),
        ):
            yield CeleryPublisher(self.app, producer)


RESULT_CHANNEL_PREFIX = KeyValueStoreBackend.task_keyprefix
"""The workers' result backend publishes every state of a task on the channel named by this
prefix and the task id (the command id): the API waits there for its commands."""


def result_channel(command_id: str) -> str:
    return f"{RESULT_CHANNEL_PREFIX}{command_id}"


def publishing_app(settings: Settings) -> Celery:
    """A Celery app that only publishes (the API, the CLI): our configuration, no tasks of
    its own, messages shown masked. Its result backend is disabled: the workers store results
    all the same (a message asks for none to be ignored), and this app never subscribes to a
    result it would not read (the API reads outcomes from the command log, woken by
    :func:`result_channel`), which halves the cost of a publish."""
    app = Celery(
        "billing_worker",
        set_as_current=False,
        amqp="worker.messaging.masking:MaskingAMQP" if settings.mask_personal_data else None,
    )
    app.conf.update({**celery_config(settings), "result_backend": "disabled"})
    return app

"""Publishing commands onto their queues: the Celery adapter of ``CommandPublisher``, the one
module that sends a command (every publisher of ours goes through it)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import Celery
from celery.backends.base import KeyValueStoreBackend
from kombu import Producer

from domain.ports.commands import CommandMessage
from worker.messaging.config import celery_config
from worker.settings import Settings

PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0.1, "interval_step": 0.2}


class CeleryPublisher:
    """Sends a command as its task; the task id is the command id, so a re-publish of the
    same command is recognised by the task as the same command."""

    def __init__(
        self, app: Celery, producer: Producer | None = None, *, in_batch: bool = False
    ) -> None:
        self.app = app
        self.producer = producer
        self._in_batch = in_batch
        self._declared: set[tuple[str, str | None]] = set()
        """The routes (task, queue asked for) whose queue this batch declared already."""

    def publish(self, message: CommandMessage) -> None:
        # Options left unset are the task's route's (worker/messaging/config.py).
        options: dict[str, Any] = {}
        if message.queue is not None:
            options["queue"] = message.queue
        if message.priority is not None:
            options["priority"] = message.priority
        route = (message.type, message.queue)
        if self._in_batch and route in self._declared:
            options["declare"] = []
        self.app.send_task(
            message.type,
            kwargs=dict(message.payload),
            task_id=message.id,
            retries=message.retries,
            retry=True,
            retry_policy=PUBLISH_RETRY_POLICY,
            producer=self.producer,
            **options,
        )
        if self._in_batch:
            # Celery declares the message's queue on every publish: a cached check, but it
            # copies and binds the queue each time (a sixth of a sweep's publish). Once a
            # message of the batch went, its route's queue is declared: the others skip it.
            self._declared.add(route)

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
            yield CeleryPublisher(self.app, producer, in_batch=True)


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

"""Publishing commands onto their queues: the Celery adapter of ``CommandPublisher``, the one
module that sends a command (every publisher of ours goes through it)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import Celery
from celery.backends.base import KeyValueStoreBackend
from celery.events.event import Event
from celery.utils.time import utcoffset
from kombu import Producer

from adapters.messaging.config import CeleryOptions, celery_config
from adapters.observability.tracing import (
    COMMAND_ID,
    COMMAND_TYPE,
    SpanKind,
    inject_trace_context,
    span,
)
from domain.ports.commands import CommandMessage

logger = logging.getLogger(__name__)

PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0.1, "interval_step": 0.2}


class CeleryPublisher:
    """Sends a command as its task; the task id is the command id, so a re-publish of the
    same command is recognised by the task as the same command."""

    def __init__(
        self,
        app: Celery,
        producer: Producer | None = None,
        *,
        in_batch: bool = False,
        sent_events: BatchSentEvents | None = None,
    ) -> None:
        self.app = app
        self.producer = producer
        self._in_batch = in_batch
        self._declared: set[tuple[str, str | None]] = set()
        """The routes (task, queue asked for) whose queue this batch declared already."""
        self._sent_events = sent_events
        self._event_dispatcher: Any = None

    def publish(self, message: CommandMessage) -> None:
        # Options left unset are the task's route's (adapters/messaging/config.py).
        options: dict[str, Any] = {}
        if message.queue is not None:
            options["queue"] = message.queue
        if message.priority is not None:
            options["priority"] = message.priority
        if not message.result_kept:
            options["ignore_result"] = True  # the message's own: Celery stores no result
        route = (message.type, message.queue)
        buffered_only = self._in_batch and route in self._declared
        if buffered_only:
            # Its queue is declared: the publish only appends to the batch's pipeline, no
            # Redis call that could fail and be retried, so no kombu ``ensure`` around it.
            options["declare"] = []
        if self._sent_events is not None:
            options["event_dispatcher"] = self._sent_events
        attributes = {
            COMMAND_ID: message.id,
            COMMAND_TYPE: message.type,
            "messaging.system": "celery",
            "messaging.operation.type": "send",
            "messaging.message.id": message.id,
        }
        with span(f"publish {message.type}", attributes, kind=SpanKind.PRODUCER):
            # The run continues this trace: W3C trace context in the message's headers.
            headers: dict[str, Any] = {}
            inject_trace_context(headers)
            if headers:
                options["headers"] = headers
            self.app.send_task(
                message.type,
                kwargs=dict(message.payload),
                task_id=message.id,
                retries=message.retries,
                retry=not buffered_only,
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
        ``task-sent`` events are buffered in one pipeline and sent when the block ends. The
        first message of each route declares its queue (a Redis call, retried on a lost
        connection as any publish); the others are only buffered, without retries. A
        failed batch is not retried: it raises ``BatchPublishError``, its delivery uncertain.
        Nothing is sent before the end (kombu would flush every 1,000 commands): a flush that
        failed midway would fail messages their caller already counted as gone. The callers
        bound a batch (a sweep's claims)."""
        if self._event_dispatcher is None:
            # Celery's own dispatcher of ``task-sent`` events (made the way Celery makes it):
            # its host name, process id, logical clock and exchange.
            self._event_dispatcher = self.app.events.Dispatcher(enabled=False)
        with (
            self.app.producer_or_acquire(self.producer) as producer,
            producer.batch(max_size=sys.maxsize),
        ):
            sent_events = BatchSentEvents(self._event_dispatcher)
            yield CeleryPublisher(self.app, producer, in_batch=True, sent_events=sent_events)


class BatchSentEvents:
    """The ``task-sent`` event of each message of a batch, as Celery's event dispatcher
    writes it (the same event, on the same exchange, for Flower and every event consumer), at
    a third of its cost: Celery declares the event exchange on every event, each declaration
    and publish wrapped in kombu's retrying ``ensure``. In a batch nothing is sent before its
    end, and the message before each event was published with its retries (a lost connection
    is revived there), so the event exchange is declared once per batch and the events are
    buffered without ``ensure``. Like Celery's dispatcher, an event that cannot be written
    never fails its message."""

    def __init__(self, dispatcher: Any) -> None:
        self._dispatcher = dispatcher
        self._declare: list[Any] = [dispatcher.exchange]

    def publish(self, type: str, fields: dict[str, Any], producer: Producer, **_retry: Any) -> None:
        dispatcher = self._dispatcher
        event = Event(
            type,
            hostname=dispatcher.hostname,
            utcoffset=utcoffset(),
            pid=dispatcher.pid,
            clock=dispatcher.clock.forward(),
            **fields,
        )
        try:
            producer.publish(
                event,
                routing_key=type.replace("-", "."),
                exchange=dispatcher.exchange.name,
                retry=False,
                declare=self._declare,
                serializer=dispatcher.serializer,
                headers=dispatcher.headers,
                delivery_mode=dispatcher.delivery_mode,
            )
        except Exception:
            logger.warning("could not write the %s event of %s", type, fields.get("uuid"))
            return
        self._declare = []


RESULT_CHANNEL_PREFIX = KeyValueStoreBackend.task_keyprefix
"""The workers' result backend publishes every state of a task on the channel named by this
prefix and the task id (the command id): the API waits there for its commands."""


def result_channel(command_id: str) -> str:
    return f"{RESULT_CHANNEL_PREFIX}{command_id}"


def publishing_app(settings: CeleryOptions) -> Celery:
    """A Celery app that only publishes (the API, the CLI): our configuration, no tasks of
    its own, messages shown masked. Its result backend is disabled: the workers store results
    all the same (a message asks for none to be ignored), and this app never subscribes to a
    result it would not read (the API reads outcomes from the command log, woken by
    :func:`result_channel`), which halves the cost of a publish."""
    app = Celery(
        "billing_worker",
        set_as_current=False,
        amqp="adapters.messaging.masking:MaskingAMQP" if settings.mask_personal_data else None,
    )
    app.conf.update({**celery_config(settings), "result_backend": "disabled"})
    return app

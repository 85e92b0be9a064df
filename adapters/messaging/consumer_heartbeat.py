"""A worker node's consumer heartbeat: a message the node sends itself through its own queue.

A heartbeat written by a timer of the node's event loop would prove the loop turns, not that
the node consumes: Celery and kombu have open reports of consumers that reconnect after a Redis
restart and never consume again (celery#10096), their process, connection, timers and
remote-control replies (``celery inspect ping``, the API's ``/readyz``) all alive. So the
timer only *sends*: every ``BILLING_HEARTBEAT_INTERVAL_SECONDS`` it publishes a
``heartbeat.consumer`` message to the node's direct queue (``worker_direct``: ``NODE.dq2``,
consumed by this node alone, beside its task queues in the same ``BRPOP``), and the heartbeat
is recorded when a pool process *runs* it (``adapters/observability/signals.py``). A node that
stops taking messages off Redis, or whose pool stops taking work, goes silent though it runs.

The direct queue holds nothing but heartbeats, so a backlog of commands never delays one; each
expires after the silence limit, so a node that stalled for an hour does not run an hour of
them when it wakes.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import bootsteps
from celery.utils.nodenames import worker_direct
from kombu.utils.uuid import uuid

from adapters.messaging.config import HEARTBEAT_SECONDS, HEARTBEAT_TASK, SILENCE_SECONDS

logger = logging.getLogger(__name__)


def consumer_loop(hostname: str) -> str:
    """The heartbeat's name of the node ``hostname``'s consumer."""
    return f"consumer:{hostname}"


class ConsumerHeartbeat(bootsteps.StartStopStep):
    """A step of the worker's consumer: started (again) with each connection to the broker."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._entry: Any = None

    def start(self, parent: Any) -> None:
        conf = parent.app.conf
        every = float(conf.get(HEARTBEAT_SECONDS) or 0)
        task = conf.get(HEARTBEAT_TASK)
        if every <= 0 or not task or parent.timer is None:
            return
        expires = max(float(conf.get(SILENCE_SECONDS) or 0), 2 * every)
        hostname = parent.hostname
        queue = worker_direct(hostname)
        loop = consumer_loop(hostname)

        app = parent.app

        def send() -> None:
            # Built by hand rather than with send_task, which sends a task-sent event when
            # the app does (task_send_sent_event): Flower would list a heartbeat per node
            # every few seconds among the commands.
            message = app.amqp.create_task_message(
                uuid(), task, (loop, every), {}, expires=expires, create_sent_event=False
            )
            try:
                with app.producer_or_acquire() as producer:
                    app.amqp.send_task_message(producer, task, message, queue=queue, retry=False)
            except Exception as error:  # the broker away: the silence shows it
                logger.info("could not send the consumer's heartbeat (%s)", error)

        send()
        self._entry = parent.timer.call_repeatedly(every, send)

    def stop(self, parent: Any) -> None:
        if self._entry is not None:
            self._entry.cancel()
            self._entry = None

    def shutdown(self, parent: Any) -> None:
        self.stop(parent)

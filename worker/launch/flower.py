"""Flower as this project runs it: ``python -m worker.launch.flower [celery flower options]``.

Where it differs from ``celery flower``:

* the basic-auth credentials come from the environment (``FLOWER_BASIC_AUTH``, which Flower
  reads itself), never from the command line, where ``ps`` shows them to every user;
* ``/metrics`` sits behind the same basic auth as every other page. Flower 2.2 serves it to
  anyone (its handler lacks the ``authenticated`` check its other handlers have); the task
  names, counts and worker names it exports are the operators' business;
* a rejected command (the caller's mistake) shows in the state ``REJECTED`` (a grey badge),
  not ``FAILURE`` (red): Flower's "Failed" counts and filter are what an operator must fix.
  Only Flower's reading of the task events changes: the worker still ends a rejected
  command's task in Celery's ``FAILURE`` state raising ``CommandRejected``, so what a
  publisher's ``AsyncResult.get()`` sees is unchanged (``tasks/base.py``);
* the broker page and ``/api/queues/length`` read the queues through our Redis client factory
  (:class:`QueueLengths`): Flower builds a client of its own from the broker URL's scheme,
  which names our guarded transport (it answered 404), and reads its default priority steps,
  not ours. Through the factory they follow the primary under Sentinel, as Flower's events do
  (Flower runs the workers' app, whose configuration names the sentinels).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any


def protect_metrics() -> None:
    import tornado.web
    from flower.views import monitor

    get = monitor.Metrics.get
    if not getattr(get, "__wrapped_by_billing_worker__", False):
        protected = tornado.web.authenticated(get)
        protected.__wrapped_by_billing_worker__ = True  # type: ignore[attr-defined]
        monitor.Metrics.get = protected


REJECTED_STATE = "REJECTED"
"""The state Flower shows a rejected command's task in (Celery's own ``REJECTED``: a message
refused by a worker, which this system never does: it records a rejection instead)."""

REJECTION_PREFIX = "CommandRejected("
"""How a task-failed event's ``exception`` (the exception's ``repr``) names a rejection."""


def is_rejection(event: dict[str, Any]) -> bool:
    """Whether a task event ends a command the runner rejected (the caller's mistake)."""
    exception = event.get("exception")
    return (
        event.get("type") == "task-failed"
        and isinstance(exception, str)
        and exception.startswith(REJECTION_PREFIX)
    )


def show_rejections_apart() -> None:
    """Flower counts a rejected command's task-failed event as ``task-rejected`` (its workers'
    "Failed" column and its ``flower_events_total`` leave it out) and shows the task in
    :data:`REJECTED_STATE`."""
    from flower.events import EventsState

    event = EventsState.event
    if getattr(event, "__wrapped_by_billing_worker__", False):
        return

    def event_told_apart(self: Any, received: dict[str, Any]) -> None:
        if not is_rejection(received):
            event(self, received)
            return
        event(self, {**received, "type": "task-rejected"})
        # Celery ranks its REJECTED before STARTED (a refused message never starts): its state
        # machine keeps the task STARTED, so the state is set here, then indexed for search.
        task = self.tasks[received["uuid"]]
        task.state, task.timestamp = REJECTED_STATE, received.get("timestamp")
        self._index_task(task, None)

    event_told_apart.__wrapped_by_billing_worker__ = True  # type: ignore[attr-defined]
    EventsState.event = event_told_apart


class QueueLengths:
    """What Flower asks of a broker (``queues(names)``), read over our Redis client factory."""

    def __init__(self, priority_steps: Iterable[int]) -> None:
        self._steps = tuple(priority_steps) or (0,)

    async def queues(self, names: Iterable[str]) -> list[dict[str, Any]]:
        from adapters.messaging.queue_depths import queue_lists
        from adapters.messaging.redis_clients import async_redis_client
        from worker.settings import get_settings

        names = list(names)
        client = async_redis_client(get_settings(), socket_timeout=2)
        try:
            async with client.pipeline(transaction=False) as pipe:
                for name in names:
                    for key in queue_lists(name, self._steps):
                        pipe.llen(key)
                lengths = iter(await pipe.execute())
        finally:
            await client.aclose()
        return [
            {"name": name, "messages": sum(int(next(lengths)) for _ in self._steps)}
            for name in names
        ]


def read_queues_through_our_clients() -> None:
    from flower.views import BaseHandler

    def get_broker(handler: Any) -> QueueLengths:
        options = handler.capp.conf.broker_transport_options or {}
        return QueueLengths(options.get("priority_steps") or [0])

    BaseHandler.get_broker = get_broker


def main(argv: list[str]) -> None:
    protect_metrics()
    show_rejections_apart()
    read_queues_through_our_clients()
    from celery.bin.celery import main as celery_main

    sys.argv = ["celery", "-A", "worker.celery_app", "flower", *argv]
    celery_main()


if __name__ == "__main__":
    main(sys.argv[1:])

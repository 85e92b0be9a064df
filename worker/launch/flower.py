"""Flower as this project runs it: ``python -m worker.launch.flower [celery flower options]``.

Two differences from ``celery flower``:

* the basic-auth credentials come from the environment (``FLOWER_BASIC_AUTH``, which Flower
  reads itself), never from the command line, where ``ps`` shows them to every user;
* ``/metrics`` sits behind the same basic auth as every other page. Flower 2.2 serves it to
  anyone (its handler lacks the ``authenticated`` check its other handlers have); the task
  names, counts and worker names it exports are the operators' business;
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


class QueueLengths:
    """What Flower asks of a broker (``queues(names)``), read over our Redis client factory."""

    def __init__(self, priority_steps: Iterable[int]) -> None:
        self._steps = tuple(priority_steps) or (0,)

    async def queues(self, names: Iterable[str]) -> list[dict[str, Any]]:
        from worker.messaging.queue_depths import queue_lists
        from worker.messaging.redis_clients import async_redis_client
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
    read_queues_through_our_clients()
    from celery.bin.celery import main as celery_main

    sys.argv = ["celery", "-A", "worker.celery_app", "flower", *argv]
    celery_main()


if __name__ == "__main__":
    main(sys.argv[1:])

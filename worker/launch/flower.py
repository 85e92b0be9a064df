"""Flower as this project runs it: ``python -m worker.launch.flower [celery flower options]``.

Two differences from ``celery flower``:

* the basic-auth credentials come from the environment (``FLOWER_BASIC_AUTH``, which Flower
  reads itself), never from the command line, where ``ps`` shows them to every user;
* ``/metrics`` sits behind the same basic auth as every other page. Flower 2.2 serves it to
  anyone (its handler lacks the ``authenticated`` check its other handlers have); the task
  names, counts and worker names it exports are the operators' business.
"""

from __future__ import annotations

import sys


def protect_metrics() -> None:
    import tornado.web
    from flower.views import monitor

    get = monitor.Metrics.get
    if not getattr(get, "__wrapped_by_billing_worker__", False):
        protected = tornado.web.authenticated(get)
        protected.__wrapped_by_billing_worker__ = True  # type: ignore[attr-defined]
        monitor.Metrics.get = protected


def main(argv: list[str]) -> None:
    protect_metrics()
    from celery.bin.celery import main as celery_main

    sys.argv = ["celery", "-A", "worker.celery_app", "flower", *argv]
    celery_main()


if __name__ == "__main__":
    main(sys.argv[1:])

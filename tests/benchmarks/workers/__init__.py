"""The benchmarks' own worker nodes: production's Celery app composed without one capability,
to measure what it costs a command (P8, tests/benchmarks/queue_throughput.py).

A benchmark starts a node on one of these modules (``celery -A
tests.benchmarks.workers.without_metrics``) instead of production's ``worker.celery_app``:
production's settings, ``Settings`` and the domain's ``RunnerPolicy`` know of no benchmark.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache

from domain.ports.application import Application
from tasks.runtime import CommandApp
from worker.bootstrap import Services, build_services
from worker.celery_app import worker_app
from worker.settings import get_settings


class RelayLeftToBeat:
    """A background relay that runs nothing: a command leaves its events in the outbox (they
    are still written with its change), for beat's relay sweep to publish."""

    def request(self, relay: Callable[[], bool]) -> None:
        return None

    def flush(self) -> None:
        return None


@lru_cache(maxsize=1)
def _services_without_relay(pid: int) -> Services:
    return build_services(get_settings(), background_relay=RelayLeftToBeat())


def application_without_relay_after_command(app: CommandApp) -> Application:
    """This process's services (built again after a fork, as ``worker.bootstrap``'s), with
    :class:`RelayLeftToBeat` for the relay a command asks for as it finishes."""
    services = _services_without_relay(os.getpid())
    if services.celery is None:
        services.celery = app
    return services


def bench_worker_app(*, metrics: bool = True, relay_after_command: bool = True) -> CommandApp:
    """Production's worker app (``worker.celery_app.worker_app``) with ``metrics`` and the
    relay after each command on or off."""
    if relay_after_command:
        return worker_app(metrics=metrics)
    return worker_app(metrics=metrics, application=application_without_relay_after_command)

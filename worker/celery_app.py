"""The Celery application of the workers and beat: the shared configuration
(``adapters.messaging.config``), the tasks, and the process's signals (logging, metrics, fresh
connections after a fork).

``app`` (what ``celery -A worker.celery_app`` runs) is built, and its metrics connected, when
first read rather than at import: a benchmark composes a worker of its own from
:func:`worker_app` (``tests/benchmarks/workers/``) without production's metrics.

Building the app connects to nothing; connections are made by the worker or beat that uses
it. The app hands itself to the composition root (``worker.bootstrap``): the follow-ups its
tasks publish go out through the same app, so a worker process holds one app and one
publisher. Processes that only publish (the API, the CLI) never import this module; they use
``adapters.messaging.publisher.publishing_app``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from celery.signals import (
    celeryd_init,
    setup_logging,
    task_prerun,
    worker_process_init,
    worker_process_shutdown,
)

from adapters.clock import ShiftableClock
from adapters.messaging.config import CONSUMED_QUEUES, TASK_MODULES, celery_config
from adapters.messaging.consumer_heartbeat import ConsumerHeartbeat
from domain.ports.application import Application
from tasks.runtime import CommandApp
from worker.bootstrap import bootstrap
from worker.process_signals import (
    configure_logging,
    connect_failover_watch,
    connect_heartbeats,
    connect_metrics,
    connect_tracing,
)
from worker.settings import Settings, get_settings

__all__ = ["CONSUMED_QUEUES", "app", "create_celery_app", "worker_app"]

ApplicationFactory = Callable[[CommandApp], Application]
"""This process's application, given the app its tasks run in (which it publishes with)."""


def _bootstrapped(app: CommandApp) -> Application:
    return bootstrap(celery=app)


def create_celery_app(
    settings: Settings | None = None, *, application: ApplicationFactory = _bootstrapped
) -> CommandApp:
    """The Celery app; its tasks run with ``application``: by default this process's
    (``worker.bootstrap``), built on first use."""
    settings = settings or get_settings()

    app = CommandApp(
        "billing_worker",
        application=lambda: application(app),
        include=TASK_MODULES,
        # Messages we publish show their arguments masked (adapters/messaging/masking.py).
        amqp="adapters.messaging.masking:MaskingAMQP" if settings.mask_personal_data else None,
    )
    app.conf.update(celery_config(settings))
    # Our tasks are Celery shared tasks: each registers on every app once its module is
    # imported. A worker imports ``include`` as it starts; importing them here makes the app
    # whole wherever it is built (beat, a test), as its schedule names them.
    for module in TASK_MODULES:
        importlib.import_module(module)
    if settings.shiftable_clock:
        _read_the_clock_as_each_task_starts(app)
    return app


def _read_the_clock_as_each_task_starts(app: CommandApp) -> None:
    """The local stack's and the tests' shiftable clock (never production's, which reads the
    system clock) re-reads its offset as each of ``app``'s tasks starts. Each process caches
    the offset for a moment (``adapters.clock.REFRESH_SECONDS``); without this, a sweep that
    claimed a change with the moved time could hand it to a process still on the old one,
    which would apply it "before" its boundary (a negative lag)."""

    def expire_the_offset(sender: Any = None, **_: Any) -> None:
        if getattr(sender, "app", None) is not app:
            return
        clock = app.application().clock
        if isinstance(clock, ShiftableClock):
            clock.expire()

    task_prerun.connect(expire_the_offset, weak=False)


def worker_app(
    *, metrics: bool = True, application: ApplicationFactory = _bootstrapped
) -> CommandApp:
    """The app a worker node or beat runs: :func:`create_celery_app` with, unless ``metrics``
    is off, the run time and retries of each delivery and the exporters connected to Celery's
    signals (once per process), and the traces of each pool process (off unless the
    ``OTEL_*`` settings ask). The process's other signals below are connected at import."""
    built = create_celery_app(application=application)
    if metrics:
        connect_metrics(built)
    connect_failover_watch(built)
    connect_tracing()
    # Each node's consumer sends itself its heartbeat (adapters/messaging/consumer_heartbeat.py).
    built.steps["consumer"].add(ConsumerHeartbeat)
    connect_heartbeats()
    return built


app: CommandApp
"""The workers' and beat's app (``celery -A worker.celery_app``), built by :func:`__getattr__`."""


def __getattr__(name: str) -> CommandApp:
    # Module attributes are looked up here only when missing: `app` is built on first read.
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    built = globals()["app"] = worker_app()
    return built


@setup_logging.connect
def _configure_logging(loglevel: int | str | None = None, **_: Any) -> None:
    # Connected, this replaces Celery's own logging set-up in workers and beat: one handler,
    # JSON or console lines naming their command, personal data masked
    # (adapters/observability/logs.py).
    configure_logging(loglevel)


@celeryd_init.connect
def _log_from_the_start(options: dict[str, Any] | None = None, **_: Any) -> None:
    # A worker warns (running as root…) before Celery sets its logging up: in our format too.
    import logging

    configure_logging((options or {}).get("loglevel"))
    logging.captureWarnings(True)


@celeryd_init.connect
def _share_relays_across_the_node(**_: Any) -> None:
    # In the node's main process, before its pool forks: the pool's processes share when
    # their latest relay began, and one relay serves the commands of all of them.
    from adapters.outbound.relay_thread import share_relays_across_the_node

    share_relays_across_the_node()


@celeryd_init.connect
def _import_the_provider_before_the_pool_forks(**_: Any) -> None:
    # Imported once in the node's main process, the Stripe SDK and our adapter are the pool's
    # processes' from the fork (their pages shared): imported by each on its first Stripe
    # call, they cost every process a quarter of a second of CPU in the middle of its work
    # (a period-end burst's first changes). Nothing is built: the client is made per process,
    # on first use (worker/bootstrap.py).
    import adapters.provider.stripe_adapter  # noqa: F401
    import application.provider_calls  # noqa: F401


@worker_process_init.connect
def _fresh_connections_after_fork(**_: Any) -> None:
    # A prefork child must not share the parent's database sockets.
    from adapters.db.engine import dispose_engines

    dispose_engines()


@worker_process_shutdown.connect
def _relay_before_exit(**_: Any) -> None:
    # A child that stops (a warm shutdown, its task limit) relays the events of its last
    # commands now rather than leave them for beat's next relay sweep.
    bootstrap().flush_relay()

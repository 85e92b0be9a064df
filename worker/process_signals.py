"""What a process connects as it starts, from its settings: its logging, Celery's signals to
the metrics (workers and beat), its traces (the API, a worker's pool processes), and beat's
watch of the broker's primary. Each is connected
once per process; the services they report on come from the composition root
(:func:`worker.bootstrap.bootstrap`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.db.uow import is_transient_db_error
from worker.bootstrap import bootstrap
from worker.settings import get_settings

if TYPE_CHECKING:
    from celery import Celery


def configure_logging(level: str | int | None = None) -> None:
    """Set up this process's logging as its settings say (``BILLING_LOG_FORMAT``,
    ``BILLING_LOG_LEVEL``, ``BILLING_MASK_PERSONAL_DATA``; adapters/observability/logs.py)."""
    from adapters.messaging.config import SWEEPS
    from adapters.observability.logs import configure

    settings = get_settings()
    configure(
        log_format=settings.log_format,
        level=level or settings.log_level.upper(),
        mask_personal_data=settings.mask_personal_data,
        quiet_tasks=SWEEPS,
    )


_failover_watch_connected = False


def connect_failover_watch(celery: Celery | None = None) -> None:
    """Beat, once it starts, watches the broker's primary in a thread of its own
    (``adapters/messaging/failover_watch.py``); connected once per process."""
    global _failover_watch_connected
    if _failover_watch_connected:
        return
    _failover_watch_connected = True
    from celery.signals import beat_init

    def start_watch(**_: object) -> None:
        from adapters.messaging.failover_watch import watch_in_background

        watch_in_background(lambda: bootstrap(celery=celery), get_settings().beat_interval_seconds)

    beat_init.connect(start_watch, weak=False)


def connect_metrics(celery: Celery | None = None) -> None:
    """Connect Celery's signals to the metrics (adapters/observability/signals.py), wired to
    this process's settings and services. ``celery``: the process's app (the workers' and
    beat's), handed to its services."""
    from adapters.messaging.config import SWEEPS
    from adapters.observability import metrics, signals
    from application.handlers.events.webhook_deliveries import DELIVER_WEBHOOK
    from application.requests.sweeps import RECONCILE_WITH_STRIPE
    from domain.provider.sync import SyncStripeObject

    def exporters() -> signals.Exporters:
        settings = get_settings()
        return signals.Exporters(
            host=settings.metrics_host,
            worker_port=settings.worker_metrics_port,
            beat_port=settings.beat_metrics_port,
        )

    signals.connect(
        signals.Wiring(
            exporters=exporters,
            system_collector=lambda: bootstrap(celery=celery).system_collector(),
            result_recorders={
                DELIVER_WEBHOOK: metrics.webhook_attempted,
                SyncStripeObject.TASK_NAME: metrics.stripe_drift_found,
                RECONCILE_WITH_STRIPE: metrics.stripe_drift_found,
            },
            is_database_error=is_transient_db_error,
            sweeps=SWEEPS,
            sweep_succeeded=lambda sweep, at: bootstrap().sweep_successes().record(sweep, at),
        )
    )


_tracing_connected = False


def connect_tracing() -> None:
    """Each pool process of a worker node starts tracing after Celery's fork, if the
    ``OTEL_*`` settings ask for it (``adapters/observability/tracing.py``): its own provider
    and export thread, the Celery instrumentation's span for each run; the buffered spans
    are sent as it stops. The node's main process runs no task and traces nothing.
    Connected once per process."""
    global _tracing_connected
    if _tracing_connected:
        return
    _tracing_connected = True
    from celery.signals import worker_process_init, worker_process_shutdown

    from adapters.observability import tracing

    def start(**_: object) -> None:
        if tracing.start_tracing("worker") is not None:
            tracing.instrument_celery_worker()

    def stop(**_: object) -> None:
        tracing.stop_tracing()

    worker_process_init.connect(start, weak=False)
    worker_process_shutdown.connect(stop, weak=False)


def start_api_tracing() -> None:
    """The API process starts tracing as uvicorn builds its app, if the ``OTEL_*`` settings
    ask for it (``worker/api/tracing.py`` instruments the app)."""
    from adapters.observability.tracing import start_tracing

    start_tracing("api")


def stop_api_tracing() -> None:
    """The API process, as it stops: its buffered spans are sent (nothing if it never
    traced)."""
    from adapters.observability.tracing import stop_tracing

    stop_tracing()

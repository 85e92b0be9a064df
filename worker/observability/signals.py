"""The metrics of Celery's processes, through Celery's signals: each delivery's run time and
retries (in the pool processes), a worker node's exporter (in its main process), beat's.

A worker node serves all its pool processes from one exporter in its main process,
prometheus-client's multiprocess mode: each process writes its values to files in
``PROMETHEUS_MULTIPROC_DIR`` (set before the worker starts: ``billing-worker worker``, ``up``
and the tests do), and a scrape adds them up. One port per node, whatever the concurrency and
however often a child is replaced; an exporter per child would need a port each and a way for
Prometheus to find them. The directory is emptied when the node starts, and a child's
live gauges are dropped when it exits (``mark_process_dead``).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from celery.signals import (
    beat_init,
    celeryd_init,
    task_postrun,
    task_prerun,
    task_retry,
    worker_process_shutdown,
    worker_ready,
)

from domain.provider_sync import SyncStripeObject
from tasks.handlers.webhook_deliveries import DELIVER_WEBHOOK
from tasks.runtime import SweepTask
from tasks.stripe_sync import RECONCILE_WITH_STRIPE
from worker.observability.metrics import (
    MULTIPROC_DIR_ENV,
    RunTimer,
    command_retried,
    multiproc_dir,
    multiprocess_registry,
    prepare_multiproc_dir,
    registry_of,
    serve,
    stripe_drift_found,
    sweep_finished,
    webhook_attempted,
)
from worker.observability.sweeps import no_sent_events_from_beat, seed_sweep_metrics
from worker.settings import get_settings

logger = logging.getLogger(__name__)

_timer = RunTimer()


def _worker_metrics_port() -> int:
    return get_settings().worker_metrics_port


def _on_worker_init(**_: Any) -> None:
    directory = multiproc_dir()
    if _worker_metrics_port() and directory is not None:
        # Values left by an earlier run of this node would be added to this one's.
        prepare_multiproc_dir(directory, keep_pid=os.getpid())


def _on_worker_ready(**_: Any) -> None:
    settings = get_settings()
    port = settings.worker_metrics_port
    if not port:
        return
    if multiproc_dir() is None:
        logger.error(
            "BILLING_WORKER_METRICS_PORT is set but %s is not: the pool's metrics cannot be "
            "added up, so no exporter is started (billing-worker worker sets it)",
            MULTIPROC_DIR_ENV,
        )
        return
    serve(multiprocess_registry(), settings.metrics_host, port, "worker")


def _on_task_prerun(task_id: str | None = None, **_: Any) -> None:
    if task_id:
        _timer.start(task_id)


def _on_task_postrun(
    task_id: str | None = None,
    task: Any = None,
    retval: Any = None,
    state: str | None = None,
    **_: Any,
) -> None:
    if task_id and task is not None:
        took = _timer.stop(task_id, str(task.name))
        if isinstance(task, SweepTask) and took is not None:
            # Sweeps are not in Flower (no task events): their runs show here.
            sweep_finished(str(task.name), state == "SUCCESS", took, time.time())
        if task.name == DELIVER_WEBHOOK:
            # The handler returns its outcome (tasks never import the worker's metrics).
            webhook_attempted(retval)
        elif task.name in (SyncStripeObject.TASK_NAME, RECONCILE_WITH_STRIPE):
            stripe_drift_found(retval)


def _on_task_retry(sender: Any = None, reason: Any = None, **_: Any) -> None:
    name = getattr(sender, "name", None) or "unknown"
    command_retried(str(name), reason if isinstance(reason, BaseException) else None)


def _on_process_shutdown(**_: Any) -> None:
    if multiproc_dir() is None:
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


def _on_beat_init(**_: Any) -> None:
    settings = get_settings()
    if not settings.beat_metrics_port:
        return
    from worker.observability.gauges import SystemCollector

    serve(
        registry_of([SystemCollector(settings)]),
        settings.metrics_host,
        settings.beat_metrics_port,
        "beat",
    )


def connect() -> None:
    """Connect the handlers (once per process: Celery keeps strong references)."""
    celeryd_init.connect(_on_worker_init, weak=False)
    worker_ready.connect(_on_worker_ready, weak=False)
    worker_ready.connect(seed_sweep_metrics, weak=False)
    task_prerun.connect(_on_task_prerun, weak=False)
    task_postrun.connect(_on_task_postrun, weak=False)
    task_retry.connect(_on_task_retry, weak=False)
    worker_process_shutdown.connect(_on_process_shutdown, weak=False)
    beat_init.connect(_on_beat_init, weak=False)
    beat_init.connect(no_sent_events_from_beat, weak=False)

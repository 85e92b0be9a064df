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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
from prometheus_client.registry import Collector

from adapters.observability.metrics import (
    MULTIPROC_DIR_ENV,
    RunTimer,
    command_retried,
    multiproc_dir,
    multiprocess_registry,
    prepare_multiproc_dir,
    registry_of,
    serve,
    sweep_finished,
)
from adapters.observability.sweeps import (
    no_sent_events_from_beat,
    schedule_intervals,
    seed_sweep_metrics,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Exporters:
    """Where this process serves its metrics (0: it does not)."""

    host: str
    worker_port: int
    beat_port: int


@dataclass
class Wiring:
    """What the signal handlers are given by the composition root, which alone knows the
    settings, the adapters and the tasks' names."""

    exporters: Callable[[], Exporters]
    system_collector: Callable[[], Collector]
    """Beat's collector of the whole system's gauges, built when beat starts."""
    result_recorders: Mapping[str, Callable[[object], None]] = field(default_factory=dict)
    """Per task name, what to record from a run's return value."""
    is_database_error: Callable[[BaseException], bool] = lambda _: False
    """Whether a retry's cause is a transient database error (its reason label)."""
    sweeps: frozenset[str] = frozenset()
    """The task names of beat's sweeps: their runs are recorded as sweeps."""
    sweep_succeeded: Callable[[str, float], None] = lambda sweep, at: None
    """Keep a sweep's last success where every process reads it (the console's home page)."""
    heartbeat: Callable[[str, float], None] = lambda loop, every: None
    """Record a loop's heartbeat (``adapters/messaging/heartbeats.py``): its name and how
    often it beats."""
    heartbeat_task: str = ""
    """The task name of a worker node's consumer heartbeat: its run is the heartbeat."""


_timer = RunTimer()
_wiring: Wiring | None = None


def _wired() -> Wiring:
    if _wiring is None:
        raise RuntimeError("observability.signals.connect() was not called in this process")
    return _wiring


def _on_worker_init(**_: Any) -> None:
    directory = multiproc_dir()
    if _wired().exporters().worker_port and directory is not None:
        # Values left by an earlier run of this node would be added to this one's.
        prepare_multiproc_dir(directory, keep_pid=os.getpid())


def _on_worker_ready(**_: Any) -> None:
    exporters = _wired().exporters()
    port = exporters.worker_port
    if not port:
        return
    if multiproc_dir() is None:
        logger.error(
            "BILLING_WORKER_METRICS_PORT is set but %s is not: the pool's metrics cannot be "
            "added up, so no exporter is started (billing-worker worker sets it)",
            MULTIPROC_DIR_ENV,
        )
        return
    serve(multiprocess_registry(), exporters.host, port, "worker")


def _on_task_prerun(task_id: str | None = None, **_: Any) -> None:
    if task_id:
        _timer.start(task_id)


def _on_task_postrun(
    task_id: str | None = None,
    task: Any = None,
    retval: Any = None,
    state: str | None = None,
    args: Any = None,
    **_: Any,
) -> None:
    if task is not None and state == "SUCCESS":
        _record_heartbeat(task, args)
    if task_id and task is not None:
        took = _timer.stop(task_id, str(task.name))
        wiring = _wired()
        if task.name in wiring.sweeps and took is not None:
            # Sweeps are not in Flower (no task events): their runs show here.
            now = time.time()
            sweep_finished(str(task.name), state == "SUCCESS", took, now)
            if state == "SUCCESS":
                try:
                    wiring.sweep_succeeded(str(task.name), now)
                except Exception:  # Redis away: the sweep did succeed, the metric says so
                    logger.warning("could not record the success of %s", task.name, exc_info=True)
        # Some handlers return what to count (tasks never import the worker's metrics).
        record = wiring.result_recorders.get(str(task.name))
        if record is not None:
            record(retval)


def sweep_loop(sweep: str) -> str:
    """The heartbeat's name of beat's sweep ``sweep``: its successes are its beats."""
    return f"sweep:{sweep}"


def _record_heartbeat(task: Any, args: Any) -> None:
    """A consumer heartbeat that ran, or a sweep that succeeded, is its loop's heartbeat."""
    wiring = _wired()
    name = str(task.name)
    if name == wiring.heartbeat_task and isinstance(args, list | tuple) and len(args) == 2:
        loop, every = str(args[0]), float(args[1])
    elif name in wiring.sweeps:
        conf = getattr(getattr(task, "app", None), "conf", None)
        schedule = getattr(conf, "beat_schedule", None) or {}
        interval = schedule_intervals(schedule, wiring.sweeps).get(name)
        if interval is None:
            return
        loop, every = sweep_loop(name), interval
    else:
        return
    try:
        wiring.heartbeat(loop, every)
    except Exception:  # Redis away: the silence shows it
        logger.warning("could not record the heartbeat of %s", loop, exc_info=True)


def _on_task_retry(sender: Any = None, reason: Any = None, **_: Any) -> None:
    name = getattr(sender, "name", None) or "unknown"
    command_retried(
        str(name),
        reason if isinstance(reason, BaseException) else None,
        is_database_error=_wired().is_database_error,
    )


def _on_process_shutdown(**_: Any) -> None:
    if multiproc_dir() is None:
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


def _on_beat_init(**_: Any) -> None:
    wiring = _wired()
    exporters = wiring.exporters()
    if not exporters.beat_port:
        return
    serve(registry_of([wiring.system_collector()]), exporters.host, exporters.beat_port, "beat")


def _on_worker_ready_seed_sweeps(sender: Any = None, **_: Any) -> None:
    seed_sweep_metrics(sender, _wired().sweeps)


def connect(wiring: Wiring) -> None:
    """Connect the handlers with their ``wiring`` (once per process: Celery keeps strong
    references; a second call only replaces the wiring)."""
    global _wiring
    already = _wiring is not None
    _wiring = wiring
    if already:
        return
    celeryd_init.connect(_on_worker_init, weak=False)
    worker_ready.connect(_on_worker_ready, weak=False)
    worker_ready.connect(_on_worker_ready_seed_sweeps, weak=False)
    task_prerun.connect(_on_task_prerun, weak=False)
    task_postrun.connect(_on_task_postrun, weak=False)
    task_retry.connect(_on_task_retry, weak=False)
    worker_process_shutdown.connect(_on_process_shutdown, weak=False)
    beat_init.connect(_on_beat_init, weak=False)
    beat_init.connect(no_sent_events_from_beat, weak=False)

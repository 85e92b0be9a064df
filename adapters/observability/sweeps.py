"""Beat's sweeps as operators see them: not in Flower, not in the INFO log, in the metrics.

Beat publishes a sweep every second or so (due plan changes, due webhook deliveries, the
events relay, reconciliation with Stripe, re-drives, stalled commands, pruning). Shown like
commands they drowned the commands in Flower and in the worker's log. So:

* **Flower**: a sweep's task class sends no task events (``tasks.runtime.SweepTask``),
  and beat, which publishes nothing but sweeps, sends no ``task-sent`` events
  (:func:`no_sent_events_from_beat`). Flower lists what the events tell it: commands.
* **Logs**: :class:`QuietSweeps` turns the INFO lines of a sweep's run in a worker into
  DEBUG lines: Celery's "received" / "succeeded" / "discarding revoked" lines about a sweep,
  and the lines libraries (the Stripe SDK) write while a sweep runs. A sweep's own handler
  logs at INFO only when it did something (claimed changes, relayed events, pruned rows…),
  and those lines stay. Warnings and errors are never touched. Beat's own log keeps its
  "Sending due task" line per tick at INFO: sending sweeps is all beat does, and the line
  shows it is alive.
* **Metrics**: each run records the sweep's last success, its duration and its outcome
  (``adapters.observability.metrics``); alert ``BillingSweepStalled`` fires when a sweep has
  not succeeded for several of its intervals.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping
from datetime import timedelta
from typing import Any

CELERY_LINES_ABOUT_A_TASK = (
    "celery.app.trace",  # Task NAME[ID] succeeded in …
    "celery.worker.strategy",  # Task NAME[ID] received
    "celery.worker.request",  # Discarding revoked task: NAME[ID] (an expired sweep)
)
CELERY_RECEIVED_LINE = "celery.worker.strategy"
"""Task NAME[ID] received: every task's outcome line follows it, so it is routine."""
OUR_PACKAGES = frozenset({"tasks", "application", "domain", "worker"})
"""Loggers whose INFO lines during a sweep say it did something: they stay at INFO."""


def names_a_sweep(record: logging.LogRecord, sweeps: Collection[str]) -> bool:
    """Whether one of Celery's lines is about one of ``sweeps``: its ``data`` (Celery's
    extra) or its arguments name one."""
    data = getattr(record, "data", None)
    if isinstance(data, Mapping) and data.get("name") in sweeps:
        return True
    args = record.args
    if isinstance(args, Mapping):
        return args.get("name") in sweeps
    return isinstance(args, tuple) and any(isinstance(a, str) and a in sweeps for a in args)


def running_sweep(sweeps: Collection[str]) -> bool:
    """Whether this process is running one of ``sweeps`` now (a pool process, in the task)."""
    from celery import current_task

    return bool(current_task) and getattr(current_task, "name", None) in sweeps


class QuietSweeps(logging.Filter):
    """Turns the INFO lines of a sweep's run, and Celery's "received" line of every task,
    into DEBUG lines (see the module's docstring): written when the root logger is at DEBUG,
    dropped otherwise. A command so keeps one INFO line in a worker's log, its outcome
    (Celery's "succeeded" or "raised" line, naming the command)."""

    def __init__(self, sweeps: Collection[str]) -> None:
        """``sweeps``: the task names of beat's sweeps."""
        super().__init__()
        self._sweeps = frozenset(sweeps)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO or not self._routine(record):
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger().isEnabledFor(logging.DEBUG)

    def _routine(self, record: logging.LogRecord) -> bool:
        if record.name == CELERY_RECEIVED_LINE:
            return True
        if record.name.startswith(CELERY_LINES_ABOUT_A_TASK):
            return names_a_sweep(record, self._sweeps)
        if record.name.split(".", 1)[0] in OUR_PACKAGES:
            return False
        return running_sweep(self._sweeps)


def schedule_intervals(
    beat_schedule: Mapping[str, Mapping[str, Any]], sweeps: Collection[str]
) -> dict[str, float]:
    """Each scheduled sweep's period in seconds, from the beat schedule (entries given in
    seconds or as a timedelta; others, such as crontabs, have no single period)."""
    intervals: dict[str, float] = {}
    for entry in beat_schedule.values():
        task, schedule = entry.get("task"), entry.get("schedule")
        if task not in sweeps:
            continue
        if isinstance(schedule, timedelta):
            intervals[str(task)] = schedule.total_seconds()
        elif isinstance(schedule, int | float) and not isinstance(schedule, bool):
            intervals[str(task)] = float(schedule)
    return intervals


def no_sent_events_from_beat(sender: Any = None, **_: Any) -> None:
    """Beat publishes nothing but sweeps: it sends no ``task-sent`` events (a ``beat_init``
    handler). ``task_send_sent_event`` is read by the publisher at each send, so other
    processes (the API, workers publishing commands) keep sending theirs."""
    app = getattr(sender, "app", None)
    if app is not None:
        app.conf.task_send_sent_event = False


def seed_sweep_metrics(sender: Any, sweeps: Collection[str]) -> None:
    """A worker node starting (``worker_ready``): each scheduled sweep's interval, and its last
    success as now, so that a sweep that never succeeds on this node shows as stalled after
    a few of its intervals (the alert compares the two)."""
    from adapters.observability.metrics import sweep_scheduled

    app = getattr(sender, "app", None)
    if app is None:
        return
    now = time.time()
    for sweep, interval in schedule_intervals(app.conf.beat_schedule or {}, sweeps).items():
        sweep_scheduled(sweep, interval, now)

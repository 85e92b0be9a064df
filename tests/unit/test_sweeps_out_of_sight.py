"""Beat's sweeps stay out of Flower and out of the INFO log, and show in the metrics instead
(adapters/observability/sweeps.py)."""

from __future__ import annotations

import io
import logging
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from celery.app.trace import LOG_RECEIVED, LOG_SUCCESS
from celery.beat import Service
from prometheus_client import REGISTRY

from adapters.messaging.config import SWEEPS
from adapters.observability.logs import configure
from adapters.observability.signals import _on_task_postrun, _on_task_prerun
from adapters.observability.sweeps import (
    no_sent_events_from_beat,
    schedule_intervals,
    seed_sweep_metrics,
)
from application.requests.sweeps import ENQUEUE_DUE_CHANGES
from application.requests.sweeps import RELAY_EVENTS as RELAY
from tasks.base import CommandTask
from tasks.runtime import SweepTask
from worker.celery_app import app, create_celery_app
from worker.settings import Settings


def sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_beat_schedules_exactly_the_sweeps_and_each_sends_no_task_events() -> None:
    scheduled = {entry["task"] for entry in app.conf.beat_schedule.values()}
    sweep_tasks = {name for name, task in app.tasks.items() if isinstance(task, SweepTask)}

    assert scheduled == SWEEPS == sweep_tasks
    assert all(app.tasks[name].send_events is False for name in SWEEPS)


def test_commands_still_send_their_task_events_for_flower() -> None:
    commands = [task for task in app.tasks.values() if isinstance(task, CommandTask)]

    assert commands
    assert all(task.send_events for task in commands)


def test_beat_sends_no_task_sent_events_and_other_publishers_still_do() -> None:
    beat_app = create_celery_app(Settings())
    publisher_app = create_celery_app(Settings())

    no_sent_events_from_beat(sender=Service(app=beat_app))

    assert beat_app.conf.task_send_sent_event is False
    assert publisher_app.conf.task_send_sent_event is True


def logged(level: str, emit: list[tuple[str, int, str, object]]) -> list[str]:
    stream = io.StringIO()
    configure(log_format="console", level=level, stream=stream, quiet_tasks=SWEEPS)
    for logger_name, record_level, message, args in emit:
        extra = {"data": args} if isinstance(args, dict) else None
        logging.getLogger(logger_name).log(record_level, message, args, extra=extra)
    return stream.getvalue().splitlines()


def succeeded(name: str) -> dict[str, object]:
    return {
        "id": "t-1",
        "name": name,
        "return_value": "0",
        "runtime": 0.01,
        "args": "",
        "kwargs": "",
    }


@pytest.mark.usefixtures("restore_root")
def test_celerys_lines_about_a_sweep_are_not_written_at_info_and_a_commands_are() -> None:
    lines = logged(
        "INFO",
        [
            ("celery.worker.strategy", logging.INFO, LOG_RECEIVED, succeeded(ENQUEUE_DUE_CHANGES)),
            ("celery.app.trace", logging.INFO, LOG_SUCCESS, succeeded(ENQUEUE_DUE_CHANGES)),
            ("celery.app.trace", logging.INFO, LOG_SUCCESS, succeeded("users.enable")),
        ],
    )

    assert len(lines) == 1
    assert "users.enable" in lines[0]


@pytest.mark.usefixtures("restore_root")
def test_a_command_keeps_one_info_line_its_outcome() -> None:
    lines = logged(
        "INFO",
        [
            ("celery.worker.strategy", logging.INFO, LOG_RECEIVED, succeeded("users.enable")),
            ("celery.app.trace", logging.INFO, LOG_SUCCESS, succeeded("users.enable")),
        ],
    )

    assert len(lines) == 1
    assert "succeeded" in lines[0]


@pytest.mark.usefixtures("restore_root")
def test_a_sweeps_lines_are_written_as_debug_lines_when_the_level_is_debug() -> None:
    lines = logged(
        "DEBUG",
        [("celery.app.trace", logging.INFO, LOG_SUCCESS, succeeded(ENQUEUE_DUE_CHANGES))],
    )

    assert len(lines) == 1
    assert "DEBUG/" in lines[0]


@pytest.mark.usefixtures("restore_root")
def test_beat_still_says_at_info_which_sweep_it_sends() -> None:
    lines = logged(
        "INFO",
        [("celery.beat", logging.INFO, "Scheduler: Sending due task relay-events (%s)", RELAY)],
    )

    assert len(lines) == 1
    assert "Sending due task relay-events (events.relay)" in lines[0]


@pytest.mark.usefixtures("restore_root")
def test_a_sweep_that_did_something_or_went_wrong_still_says_so_at_info_and_above() -> None:
    lines = logged(
        "INFO",
        [
            ("application.handlers.events.relay", logging.INFO, "relayed %s events", 3),
            ("celery.app.trace", logging.ERROR, LOG_SUCCESS, succeeded(ENQUEUE_DUE_CHANGES)),
        ],
    )

    assert len(lines) == 2
    assert "relayed 3 events" in lines[0]


def test_the_sweeps_intervals_come_from_beats_schedule() -> None:
    schedule = {
        "a": {"task": ENQUEUE_DUE_CHANGES, "schedule": 1.0},
        "b": {"task": "events.relay", "schedule": timedelta(seconds=5)},
        "c": {"task": "users.enable", "schedule": 3.0},
    }

    assert schedule_intervals(schedule, SWEEPS) == {ENQUEUE_DUE_CHANGES: 1.0, "events.relay": 5.0}


def test_a_starting_node_counts_each_sweeps_last_success_from_its_start() -> None:
    before = time.time()

    seed_sweep_metrics(SimpleNamespace(app=app), SWEEPS)  # Celery's consumer, as the signal

    for sweep, interval in schedule_intervals(app.conf.beat_schedule, SWEEPS).items():
        assert sample("billing_sweep_interval_seconds", sweep=sweep) == interval
        assert (sample("billing_sweep_last_success_timestamp_seconds", sweep=sweep) or 0) >= before


def test_a_sweeps_run_records_its_success_its_duration_and_its_outcome() -> None:
    task = app.tasks[ENQUEUE_DUE_CHANGES]
    runs = sample("billing_sweep_runs_total", sweep=ENQUEUE_DUE_CHANGES, outcome="failed") or 0
    before = time.time()

    _on_task_prerun(task_id="sweep-1")
    _on_task_postrun(task_id="sweep-1", task=task, retval=0, state="SUCCESS")
    succeeded_at = sample("billing_sweep_last_success_timestamp_seconds", sweep=task.name)
    _on_task_prerun(task_id="sweep-2")
    _on_task_postrun(task_id="sweep-2", task=task, retval=None, state="FAILURE")

    assert succeeded_at is not None
    assert succeeded_at >= before
    assert sample("billing_sweep_last_success_timestamp_seconds", sweep=task.name) == succeeded_at
    assert (sample("billing_sweep_last_duration_seconds", sweep=task.name) or -1) >= 0
    assert sample("billing_sweep_runs_total", sweep=task.name, outcome="failed") == runs + 1

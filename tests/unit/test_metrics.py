"""The metrics' small decisions: a retry's bounded reason, the Redis lists of a queue, a
worker node's multiprocess directory emptied at start, and an outcome's apply lag."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
import stripe  # noqa: TID251 - a provider failure is a Stripe error, as the adapter sees it
from celery.exceptions import Retry
from prometheus_client import REGISTRY
from sqlalchemy.exc import OperationalError

from adapters.db.uow import is_transient_db_error
from adapters.messaging.queue_depths import queue_lists
from adapters.observability.metrics import command_finished, prepare_multiproc_dir, retry_reason
from adapters.observability.signals import _on_task_postrun
from application.handlers.events.webhook_deliveries import DELIVER_WEBHOOK, Outcome
from domain.errors import CommandInProgress, TransientError
from domain.provider.rate_budget import CallKind, RateLimited
from worker.process_signals import connect_metrics


def retry_while_handling(error: BaseException) -> Retry:
    """The ``Retry`` the runner raises inside its ``except`` block for ``error``."""
    try:
        raise error
    except BaseException:
        try:
            raise Retry("again") from None
        except Retry as retry:
            retry.__context__ = error  # `from None` hides it from tracebacks only
            return retry


def provider_failure() -> TransientError:
    kind: type[stripe.StripeError] = stripe.APIConnectionError
    try:
        raise kind("connection reset")
    except stripe.StripeError as error:
        try:
            raise TransientError("stripe create customer: connection failed") from error
        except TransientError as transient:
            return transient


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (RateLimited(CallKind.WRITE, 3.0), "rate_budget"),
        (CommandInProgress("cmd-1"), "in_progress"),
        (provider_failure(), "provider"),
        (TransientError("another billing account was created concurrently"), "conflict"),
        (OperationalError("UPDATE", {}, Exception("database is locked")), "database"),
        (ValueError("what"), "other"),
    ],
)
def test_a_retry_is_labelled_by_the_failure_the_runner_was_handling(
    error: BaseException, reason: str
) -> None:
    assert (
        retry_reason(retry_while_handling(error), is_database_error=is_transient_db_error) == reason
    )


def test_a_retry_without_a_cause_is_other() -> None:
    assert retry_reason(Retry("again"), is_database_error=is_transient_db_error) == "other"
    assert retry_reason(None, is_database_error=is_transient_db_error) == "other"


def test_a_queue_is_its_list_and_one_list_per_other_priority_step() -> None:
    assert queue_lists("subscriptions", [0, 9]) == ["subscriptions", "subscriptions\x06\x169"]
    assert queue_lists("users", [0]) == ["users"]


def test_a_nodes_directory_is_emptied_of_earlier_processes_values(tmp_path: Path) -> None:
    directory = tmp_path / "metrics"
    directory.mkdir()
    for name in ("counter_101.db", "histogram_101.db", "counter_202.db", "notes.txt"):
        (directory / name).write_text("x")
    prepare_multiproc_dir(directory, keep_pid=202)
    assert sorted(path.name for path in directory.iterdir()) == ["counter_202.db", "notes.txt"]


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_an_applied_change_in_a_result_observes_its_apply_lag_and_others_do_not() -> None:
    created = datetime(2026, 11, 1, tzinfo=UTC)
    lags = sample("billing_apply_lag_seconds_count")
    latency = sample("billing_command_latency_seconds_sum", type="test.metrics")
    applied = {"change": {"state": "applied", "apply_lag_seconds": 12.5}}
    command_finished("test.metrics", "succeeded", created, created + timedelta(seconds=3), applied)
    assert sample("billing_apply_lag_seconds_count") == lags + 1
    assert sample("billing_command_latency_seconds_sum", type="test.metrics") == latency + 3
    for result in (
        {"change": {"state": "scheduled", "apply_lag_seconds": None}},
        {"user_id": "usr_1"},
        None,
    ):
        command_finished("test.metrics", "succeeded", created, created, result)
    assert sample("billing_apply_lag_seconds_count") == lags + 1


def test_a_worker_whose_metrics_directory_does_not_exist_yet_still_starts(tmp_path: Path) -> None:
    missing = tmp_path / "fresh-container" / "metrics"
    started = subprocess.run(
        [sys.executable, "-c", "import adapters.observability.metrics"],
        env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(missing)},
        capture_output=True,
        text=True,
        check=False,
    )

    assert started.returncode == 0, started.stderr
    assert missing.is_dir()


def test_a_webhook_attempt_is_counted_by_outcome_and_a_message_without_one_is_not() -> None:
    connect_metrics()  # as the workers' Celery app does when built
    task = SimpleNamespace(name=DELIVER_WEBHOOK)
    before = {
        outcome: sample("billing_webhook_deliveries_total", outcome=outcome.value)
        for outcome in Outcome
    }
    for outcome in Outcome:
        _on_task_postrun(task_id=f"t-{outcome.value}", task=task, retval=outcome.value)
    _on_task_postrun(task_id="t-other", task=SimpleNamespace(name="users.enable"), retval="failed")

    counted = {
        outcome.value: sample("billing_webhook_deliveries_total", outcome=outcome.value)
        - before[outcome]
        for outcome in Outcome
    }
    assert counted == {
        "succeeded": 1,
        "retrying": 1,
        "failed": 1,
        "abandoned": 0,
        "waiting": 0,
        "stale": 0,
    }

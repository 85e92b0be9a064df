"""Prometheus metrics: their names (a contract for dashboards and alerts), what records them,
and the exporters of the worker and beat processes.

Where each process serves:

- the API: ``GET /metrics`` on its own HTTP port (``worker/api/routes/metrics.py``);
- a worker node: one exporter in its main process on ``BILLING_WORKER_METRICS_PORT``, which
  adds up the values its prefork pool processes write to ``PROMETHEUS_MULTIPROC_DIR``
  (prometheus-client's multiprocess mode): one scrape target per node whatever its
  concurrency, and no port per child to discover;
- beat: an exporter on ``BILLING_BEAT_METRICS_PORT`` whose collector reads the gauges of the
  whole system (queue depth, scheduled changes, failed commands, the Stripe budget) from the
  database and Redis at each scrape (``adapters/observability/gauges.py``): they come from one
  place, however many workers run.

Counters and histograms are recorded where the event happens: the command log (accepted,
finished, latency, apply lag), the worker's task signals (run time, retries), the Stripe
adapter (requests) and the rate budget (calls, waits, 429s). In a process without an exporter
(the CLI) they are recorded in memory and never read.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.registry import Collector

from domain.errors import CommandInProgress, TransientError
from domain.provider.rate_budget import RateLimited
from domain.provider.sync import HANDLED_EVENT_TYPES

logger = logging.getLogger(__name__)

MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
if os.environ.get(MULTIPROC_DIR_ENV):
    # prometheus-client opens a file there for each metric made below, at import: a directory
    # named in the environment but not made yet (a fresh container) must not stop the process.
    Path(os.environ[MULTIPROC_DIR_ENV]).mkdir(parents=True, exist_ok=True)

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
RUN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
APPLY_LAG_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)

COMMANDS_ACCEPTED = Counter(
    "billing_commands_accepted",
    "Commands recorded in the command log: by the API (source=api), or first seen by a worker "
    "when another service published them on the queue (source=queue).",
    ["type", "source"],
)
COMMANDS_FINISHED = Counter(
    "billing_commands_finished",
    "Commands that reached an outcome (outcome=succeeded|failed|rejected); a replayed command "
    "counts again when it finishes again.",
    ["type", "outcome"],
)
COMMAND_ERRORS = Counter(
    "billing_command_errors",
    "Commands that ended without doing their work, by outcome (rejected: the caller's mistake; "
    "failed: for an operator), gRPC code name and reason (the error's last ErrorInfo reason, "
    "else the code's name).",
    ["type", "outcome", "code", "reason"],
)
COMMAND_LATENCY = Histogram(
    "billing_command_latency_seconds",
    "From a command's acceptance (the command log's created_at) to its outcome.",
    ["type"],
    buckets=LATENCY_BUCKETS,
)
COMMAND_RUN = Histogram(
    "billing_command_run_seconds",
    "One delivery's run time in a worker (a retried command runs several times).",
    ["type"],
    buckets=RUN_BUCKETS,
)
COMMAND_RETRIES = Counter(
    "billing_command_retries",
    "Deliveries sent back to the queue, by reason: provider (a transient provider failure), "
    "database (a busy or unreachable database), conflict (a transient race), in_progress (a "
    "duplicate waiting for the running delivery), rate_budget (waiting for the Stripe budget's "
    "token; not a failure), other.",
    ["type", "reason"],
)
STRIPE_REQUESTS = Counter(
    "billing_stripe_requests",
    "Requests sent to Stripe, by operation and HTTP status (error: no answer).",
    ["operation", "status"],
)
STRIPE_REQUEST_SECONDS = Histogram(
    "billing_stripe_request_seconds",
    "Duration of one request to Stripe (without the wait for the rate budget).",
    ["operation"],
    buckets=REQUEST_BUCKETS,
)
BUDGET_CALLS = Counter(
    "billing_stripe_budget_calls",
    "Tokens this process took from the shared Stripe rate budget (one per call), by kind.",
    ["kind"],
)
BUDGET_WAIT_SECONDS = Counter(
    "billing_stripe_budget_wait_seconds",
    "Seconds this process's calls slept waiting for their token, by kind.",
    ["kind"],
)
STRIPE_RATE_LIMITED = Counter(
    "billing_stripe_rate_limited",
    "429s from Stripe's rate limit (not lock timeouts) reported to the budget, by kind.",
    ["kind"],
)
APPLY_LAG = Histogram(
    "billing_apply_lag_seconds",
    "A plan change's lag when it was applied: applied_at - effective_at.",
    buckets=APPLY_LAG_BUCKETS,
)
HTTP_REQUESTS = Counter(
    "billing_http_requests",
    "HTTP requests answered by the API, by route template (unmatched: no route), method and "
    "status.",
    ["route", "method", "status"],
)
HTTP_REQUEST_SECONDS = Histogram(
    "billing_http_request_seconds",
    "Time to answer one HTTP request, by route template and method.",
    ["route", "method"],
    buckets=REQUEST_BUCKETS,
)
CLIENT_VERIFICATIONS = Counter(
    "billing_api_client_verifications",
    "Slow (argon2id) verifications of a client secret by the API, by reason (request: a "
    "request found no cached verification; refresh: a cached one refreshed ahead of its end) "
    "and outcome (valid, invalid, error: the database could not be read).",
    ["reason", "outcome"],
)
WEBHOOK_DELIVERIES = Counter(
    "billing_webhook_deliveries",
    "Webhook delivery attempts, by outcome: succeeded (2xx), retrying (failed, retry "
    "scheduled), failed (failed with the retry budget spent: the endpoint is disabled).",
    ["outcome"],
)
WEBHOOK_OUTCOMES = ("succeeded", "retrying", "failed")
STRIPE_EVENTS = Counter(
    "billing_stripe_events",
    "Stripe webhook deliveries received, by event type and outcome: accepted (a sync of its "
    "object recorded), coalesced (it joined its object's sync that has not read yet, or the "
    "one an earlier delivery of it recorded), already_read (a read of its object began after "
    "it), ignored (a type we do not handle, counted as type other), rejected (bad, missing, "
    "stale or future signature: type unknown), malformed (signed, but not a Stripe event we "
    "can route), too_large, throttled (the source failed verification too often).",
    ["type", "outcome"],
)
STRIPE_DRIFT = Counter(
    "billing_stripe_drift",
    "Differences from Stripe corrected by a sync (a webhook's or the reconciliation "
    "sweep's), by kind: status, period, plan, cancel_at, item, schedule (a subscription schedule "
    "attached or released at Stripe), unknown_price, missing, customer_deleted.",
    ["kind"],
)
"""The outcomes of ``webhooks.deliver`` that are attempts (a stale message, a delivery that
waits for its subject's earlier one or is abandoned with its endpoint, made none)."""

SWEEP_LAST_SUCCESS = Gauge(
    "billing_sweep_last_success_timestamp_seconds",
    "Unix time a worker last finished a run of this beat sweep without an error (the worker "
    "node's start until its first). Sweeps are not in Flower: this is how a stuck one shows "
    "(alert BillingSweepStalled). Take the max over nodes.",
    ["sweep"],
    multiprocess_mode="max",
)
SWEEP_LAST_DURATION = Gauge(
    "billing_sweep_last_duration_seconds",
    "How long the sweep's last run on this node took, whatever its outcome.",
    ["sweep"],
    multiprocess_mode="mostrecent",
)
SWEEP_INTERVAL = Gauge(
    "billing_sweep_interval_seconds",
    "The sweep's period in beat's schedule, as this worker node's settings give it.",
    ["sweep"],
    multiprocess_mode="max",
)
SWEEP_RUNS = Counter(
    "billing_sweep_runs",
    "Runs of beat's sweeps, by outcome (succeeded, failed).",
    ["sweep", "outcome"],
)


APPLIED = "applied"


def command_accepted(command_type: str, source: str) -> None:
    COMMANDS_ACCEPTED.labels(command_type, source).inc()


def command_finished(
    command_type: str,
    outcome: str,
    created_at: datetime,
    finished_at: datetime,
    result: Mapping[str, Any] | None,
) -> None:
    """Count an outcome, its latency since acceptance, and the apply lag of a plan change the
    command applied (its result carries the change's view)."""
    COMMANDS_FINISHED.labels(command_type, outcome).inc()
    COMMAND_LATENCY.labels(command_type).observe(
        max(0.0, (finished_at - created_at).total_seconds())
    )
    change = (result or {}).get("change")
    if isinstance(change, Mapping) and change.get("state") == APPLIED:
        lag = change.get("apply_lag_seconds")
        if isinstance(lag, int | float) and not isinstance(lag, bool):
            APPLY_LAG.observe(max(0.0, float(lag)))


def command_ended_in_error(command_type: str, outcome: str, code: str, reason: str) -> None:
    """Count a rejected or failed command by its code and reason
    (``domain.operations.outcomes``)."""
    COMMAND_ERRORS.labels(command_type, outcome, code, reason).inc()


# --- exporters ------------------------------------------------------------------------------


def prepare_multiproc_dir(path: Path, *, keep_pid: int | None = None) -> Path:
    """Create ``path`` and remove the value files of earlier processes (a worker node's
    counters start from zero with the node; Prometheus's ``rate`` handles the reset)."""
    path.mkdir(parents=True, exist_ok=True)
    for entry in path.glob("*.db"):
        if keep_pid is not None and entry.stem.rsplit("_", 1)[-1] == str(keep_pid):
            continue
        entry.unlink(missing_ok=True)
    return path


def multiproc_dir() -> Path | None:
    raw = os.environ.get(MULTIPROC_DIR_ENV)
    return Path(raw) if raw else None


def multiprocess_registry() -> CollectorRegistry:
    """A registry adding up the values every process of this node wrote to its directory."""
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return registry


def registry_of(collectors: Iterable[Collector]) -> CollectorRegistry:
    registry = CollectorRegistry()
    for collector in collectors:
        registry.register(collector)
    return registry


def serve(registry: CollectorRegistry, host: str, port: int, what: str) -> None:
    """Serve ``registry`` at ``http://host:port/metrics`` from a daemon thread."""
    start_http_server(port, addr=host, registry=registry)
    logger.info("%s metrics at http://%s:%d/metrics", what, host, port)


class RunTimer:
    """Times each delivery of a task in a pool process, between Celery's pre- and post-run
    signals (keyed by task id: one delivery at a time per process, but a dict costs nothing)."""

    def __init__(self) -> None:
        self._started: dict[str, float] = {}

    def start(self, task_id: str) -> None:
        self._started[task_id] = time.perf_counter()

    def stop(self, task_id: str, task_name: str) -> float | None:
        """Record the delivery's run time; returns it (None: its start was not seen)."""
        started = self._started.pop(task_id, None)
        if started is None:
            return None
        took = time.perf_counter() - started
        COMMAND_RUN.labels(task_name).observe(took)
        return took


def retry_reason(
    retry: BaseException | None, *, is_database_error: Callable[[BaseException], bool]
) -> str:
    """The bounded reason of a retry, from the exception the runner was handling when it
    asked Celery to retry (``tasks/base.py`` raises the ``Retry`` in the context of the
    runner's ``cause``, ``application.command_outcomes``)."""
    cause = None if retry is None else (getattr(retry, "exc", None) or retry.__context__)
    if cause is None:
        return "other"
    if isinstance(cause, RateLimited):
        return "rate_budget"
    if isinstance(cause, CommandInProgress):
        return "in_progress"
    if isinstance(cause, TransientError):
        origin = cause.__cause__
        if origin is not None and type(origin).__module__.split(".")[0] == "stripe":
            return "provider"
        return "conflict"
    if is_database_error(cause):
        return "database"
    return "other"


def stripe_event_received(event_type: str, outcome: str) -> None:
    """Count a delivery under its type if we handle it, ``unknown`` if it was refused before
    its type was read, and ``other`` for any other type: whatever a sender puts in ``type``
    never becomes a label value of its own (the series stay bounded)."""
    label = event_type if event_type in HANDLED_EVENT_TYPES or event_type == "unknown" else "other"
    STRIPE_EVENTS.labels(label, outcome).inc()


def stripe_drift_found(result: object) -> None:
    """Count the drift a sync (``{"drift": [kind, …]}``) or a sweep (``{kind: n}``) found."""
    if not isinstance(result, dict):
        return
    drift = result.get("drift")
    if isinstance(drift, list):
        for kind in drift:
            STRIPE_DRIFT.labels(str(kind)[:32]).inc()
        return
    for kind, count in result.items():
        if isinstance(count, int) and count > 0:
            STRIPE_DRIFT.labels(str(kind)[:32]).inc(count)


def webhook_attempted(outcome: object) -> None:
    """Count a ``webhooks.deliver`` run whose result is an attempt's outcome."""
    if isinstance(outcome, str) and outcome in WEBHOOK_OUTCOMES:
        WEBHOOK_DELIVERIES.labels(outcome).inc()


def sweep_scheduled(sweep: str, interval_seconds: float, now: float) -> None:
    """A worker node knows the sweep's period; its last success counts from ``now`` (the
    node's start) until it has one."""
    SWEEP_INTERVAL.labels(sweep).set(interval_seconds)
    SWEEP_LAST_SUCCESS.labels(sweep).set(now)


def sweep_finished(sweep: str, succeeded: bool, duration_seconds: float, now: float) -> None:
    SWEEP_RUNS.labels(sweep, "succeeded" if succeeded else "failed").inc()
    SWEEP_LAST_DURATION.labels(sweep).set(duration_seconds)
    if succeeded:
        SWEEP_LAST_SUCCESS.labels(sweep).set(now)


def command_retried(
    task_name: str,
    retry: BaseException | None,
    *,
    is_database_error: Callable[[BaseException], bool],
) -> None:
    COMMAND_RETRIES.labels(
        task_name, retry_reason(retry, is_database_error=is_database_error)
    ).inc()

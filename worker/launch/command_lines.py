"""The command lines of the system's processes: a worker node, beat, the API, Flower.

The production launchers (``billing-worker worker|beat|api|flower``, the compose file's
services) and the local stack (``billing-worker up``) start the very same command lines.
"""

from __future__ import annotations

import sys
from pathlib import Path


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


WORKER_APP = "worker.celery_app"
"""Where Celery finds the workers' and beat's app."""


def _celery(log_format: str, app: str = WORKER_APP) -> list[str]:
    # Celery prints its banner on stdout, beside the log lines: not in a file of JSON lines.
    return ["celery", "-A", app, *(["--quiet"] if log_format == "json" else [])]


def celery_worker_argv(
    *,
    concurrency: int = 2,
    hostname: str = "worker@%h",
    loglevel: str = "INFO",
    log_format: str = "json",
    app: str = WORKER_APP,
) -> list[str]:
    """A worker's command line; ``log_format`` is the ``BILLING_LOG_FORMAT`` it runs with,
    ``app`` the module of its Celery app (another only in a benchmark: tests/benchmarks/)."""
    from adapters.messaging.config import CONSUMED_QUEUES

    return python_module(
        *_celery(log_format, app),
        "worker",
        "-E",
        "--without-mingle",
        "--without-gossip",
        "-Q",
        ",".join(CONSUMED_QUEUES),
        "-c",
        str(concurrency),
        "-n",
        hostname,
        "-l",
        loglevel,
    )


def flower_env(user: str, password: str) -> dict[str, str]:
    """Flower reads ``FLOWER_*`` options from its environment, out of sight of ``ps``."""
    return {"FLOWER_BASIC_AUTH": f"{user}:{password}"}


def celery_beat_argv(
    schedule_file: Path, loglevel: str = "INFO", log_format: str = "json"
) -> list[str]:
    """Beat's command line; ``log_format`` is the ``BILLING_LOG_FORMAT`` it runs with."""
    return python_module(
        *_celery(log_format),
        "beat",
        "-s",
        str(schedule_file),
        "-l",
        loglevel,
    )


MAX_REQUEST_HEAD_BYTES = 64 * 1024
API_HTTP_PROTOCOL = "worker.api.protocol:ReadDeadlineH11Protocol"


def api_argv(host: str, port: int, processes: int = 1) -> list[str]:
    """The API's command line; with ``processes`` over one, uvicorn's supervisor starts that
    many on the one port (give them :func:`api_metrics_env`)."""
    return python_module(
        "uvicorn",
        "--factory",
        "worker.api.app:asgi_app",
        "--host",
        host,
        "--port",
        str(port),
        "--no-access-log",
        # h11 caps what it buffers of an incomplete request head (httptools has no cap): a
        # client sending endless header lines is cut off at 64 KiB, not held in memory; and
        # this protocol gives each request a deadline to arrive in (a slowly sent head).
        "--http",
        API_HTTP_PROTOCOL,
        "--h11-max-incomplete-event-size",
        str(MAX_REQUEST_HEAD_BYTES),
        *(["--workers", str(processes)] if processes > 1 else []),
    )


def flower_argv(host: str, port: int, db_file: Path) -> list[str]:
    """Flower's command line; its basic auth goes in :func:`flower_env`, never in argv."""
    return python_module(
        "worker.launch.flower",
        f"--address={host}",
        f"--port={port}",
        "--persistent=True",
        f"--db={db_file}",
        "--purge_offline_workers=60",
    )


def worker_metrics_env(port: int, directory: Path) -> dict[str, str]:
    """The environment of a worker node serving its metrics on ``port``: its pool processes
    write their values to ``directory`` (emptied now: a node's counters start from zero)."""
    from adapters.observability.metrics import MULTIPROC_DIR_ENV, prepare_multiproc_dir

    prepare_multiproc_dir(directory)
    return {"BILLING_WORKER_METRICS_PORT": str(port), MULTIPROC_DIR_ENV: str(directory)}


def api_metrics_env(directory: Path) -> dict[str, str]:
    """The environment of several API processes on one port: each writes its metric values to
    ``directory`` (emptied now: the API's counters start from zero), and any of them answers
    ``/metrics`` with the sum of all."""
    from adapters.observability.metrics import MULTIPROC_DIR_ENV, prepare_multiproc_dir

    prepare_multiproc_dir(directory)
    return {MULTIPROC_DIR_ENV: str(directory)}

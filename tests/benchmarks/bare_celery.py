"""The baseline: a bare Celery app with one no-op task and our Celery settings, nothing else.

Started by the benchmarks as ``python -m celery -A tests.benchmarks.bare_celery worker ...``
with ``BENCH_BROKER_URL`` and ``BENCH_CELERY_CONFIG`` (the JSON of the settings the harness
took from ``adapters.messaging.config.celery_config``). It imports none of our code, so its
run time and its memory are Celery's own.
"""

from __future__ import annotations

import json
import os

from celery import Celery

NOOP = "bench.noop"
QUEUE = "bench"

app = Celery("bare", set_as_current=False)
app.conf.update(
    broker_url=os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/15"),
    result_backend=os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/15"),
    task_default_queue=QUEUE,
    **json.loads(os.environ.get("BENCH_CELERY_CONFIG", "{}")),
)


@app.task(name=NOOP)
def noop() -> None:
    """Nothing at all: what a task costs Celery."""

"""A worker node without metrics: Celery's signals reach none of the metrics' handlers (no run
timer, no multiprocess files, no exporter)."""

from __future__ import annotations

from tests.benchmarks.workers import bench_worker_app

app = bench_worker_app(metrics=False)

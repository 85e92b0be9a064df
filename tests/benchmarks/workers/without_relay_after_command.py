"""A worker node whose commands leave their events in the outbox instead of relaying them as
they finish (beat's relay sweep publishes them; a benchmark runs no beat)."""

from __future__ import annotations

from tests.benchmarks.workers import bench_worker_app

app = bench_worker_app(relay_after_command=False)

"""``bench scale``: the command path (P1, with and without the retention deleting beside it)
and the API's synchronous and ``respond-async`` answers, on each database."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

from application.handlers.operations.retention import prune_command_log
from application.requests.sweeps import PruneCommandLog
from tests.benchmarks.figures import Figure, Target, percentile
from tests.benchmarks.harness import (
    BenchContext,
    Throughput,
    enable_users,
    seed_users,
    system,
    wait_commands,
    worker_processes,
)
from tests.benchmarks.http_paths import CLIENTS, enable_over_http
from tests.benchmarks.queue_throughput import together
from tests.benchmarks.scale.databases import FLAT, Pair, _flat
from worker.bootstrap import build_services
from worker.settings import Settings


def _enables(ctx: BenchContext, name: str, pair: Pair, url: str) -> Throughput:
    count, warm_up = ctx.size(100, 3000), ctx.size(20, 200)
    with system(ctx, name, pair.backend, database_url=url) as stack:
        stack.start_worker()
        users = seed_users(stack, warm_up + count)
        enable_users(stack, users[:warm_up], [])
        return enable_users(stack, users[warm_up:], worker_processes(stack))


def _enables_while_pruning(
    ctx: BenchContext, name: str, pair: Pair, url: str
) -> tuple[Throughput, int, float]:
    """P1 on ``url`` while the retention, at its defaults, deletes expired commands sweep
    after sweep for the whole run (more than beat's schedule ever asks of it at once); with
    the commands it deleted and the seconds it ran."""
    stop = threading.Event()
    deleted: list[int] = []
    clock: list[float] = []

    def prune() -> None:
        services = build_services(Settings(database_url=url, redis_url=ctx.redis_url()))
        began = time.perf_counter()
        while not stop.is_set():
            swept = prune_command_log(PruneCommandLog(), services).total
            deleted.append(swept)
            if not swept:
                break
        clock.append(time.perf_counter() - began)

    pruning = threading.Thread(target=prune, name="retention")
    pruning.start()
    try:
        throughput = _enables(ctx, name, pair, url)
    finally:
        stop.set()
        pruning.join()
    return throughput, sum(deleted), clock[0] if clock else float("nan")


def _http(ctx: BenchContext, name: str, pair: Pair, url: str) -> tuple[list[float], list[float]]:
    """The synchronous enable's latencies (one client), then the respond-async accepts' (8
    clients), after warm-ups."""
    one, accepts, warm_up = ctx.size(30, 500), ctx.size(100, 2000), ctx.size(10, 100)
    with system(ctx, name, pair.backend, database_url=url) as stack:
        stack.start_worker()
        stack.start_api()
        stack.client = stack.new_client(f"http-{name}")
        users = seed_users(stack, 2 * warm_up + one + accepts)
        enable_over_http(stack, users[:warm_up], 1, respond_async=False)
        single = enable_over_http(stack, users[warm_up : warm_up + one], 1, respond_async=False)
        rest = users[warm_up + one :]
        began = datetime.now(UTC)
        enable_over_http(stack, rest[:warm_up], CLIENTS, respond_async=True)
        accepted = enable_over_http(stack, rest[warm_up:], CLIENTS, respond_async=True)
        # Every accepted command done before the stack stops: none left queued in the log.
        wait_commands(stack, "users.enable", began, accepts + warm_up)
    return single.latencies, accepted.latencies


def commands(ctx: BenchContext, pair: Pair) -> tuple[list[Figure], Throughput]:
    """P1 interleaved (day one, seeded, seeded, day one), then the HTTP paths interleaved the
    same way; with the seeded database's P1 (the baseline of :func:`p1_while_pruning`)."""
    tag = pair.backend
    first = _enables(ctx, f"scale-p1-{tag}-a", pair, pair.day_one)
    ours = together(_enables(ctx, f"scale-p1-{tag}-{n}", pair, pair.seeded) for n in (1, 2))
    day_one = together((first, _enables(ctx, f"scale-p1-{tag}-b", pair, pair.day_one)))
    # Interleaved too (day one, seeded, seeded, day one), each side's latencies pooled: a
    # drift of the machine over the run weighs on both sides alike.
    day_one_a = _http(ctx, f"scale-http-{tag}-day-one-a", pair, pair.day_one)
    seeded_runs = [_http(ctx, f"scale-http-{tag}-{n}", pair, pair.seeded) for n in (1, 2)]
    day_one_b = _http(ctx, f"scale-http-{tag}-day-one-b", pair, pair.day_one)
    single = [latency for run, _ in seeded_runs for latency in run]
    accepted = [latency for _, run in seeded_runs for latency in run]
    single_day_one = [*day_one_a[0], *day_one_b[0]]
    accepted_day_one = [*day_one_a[1], *day_one_b[1]]
    figures = [
        _flat(
            f"scale.{tag}.p1",
            f"P1: enable-user commands/s on the queue ({tag})",
            ours.rate,
            day_one.rate,
            "/s",
            higher_is_better=True,
        )
    ]
    figures[0].details = {"seeded": ours.details(), "day_one": day_one.details()}
    for key, label, seeded_latencies, day_one_latencies, quantile in (
        ("sync.p50", "synchronous enable, one client, p50", single, single_day_one, 0.5),
        ("accept.p50", "respond-async accept, 8 clients, p50", accepted, accepted_day_one, 0.5),
        ("accept.p99", "respond-async accept, 8 clients, p99", accepted, accepted_day_one, 0.99),
    ):
        figures.append(
            _flat(
                f"scale.{tag}.{key}",
                f"{label} ({tag})",
                1000 * percentile(seeded_latencies, quantile),
                1000 * percentile(day_one_latencies, quantile),
                "ms",
                higher_is_better=False,
            )
        )
    return figures, ours


def p1_while_pruning(ctx: BenchContext, pair: Pair, idle: Throughput) -> Figure:
    """P1 on the seeded database while the retention deletes beside it, against ``idle``
    (P1 on it without). Run last: the deletes leave the tables to vacuum, which would weigh
    on whatever is measured next."""
    tag = pair.backend
    during, deleted, pruning_seconds = _enables_while_pruning(
        ctx, f"scale-p1-{tag}-pruning", pair, pair.seeded
    )
    return Figure(
        f"scale.{tag}.p1_while_pruning",
        f"P1 while the retention deletes expired commands, sweep after sweep ({tag})",
        during.rate,
        "/s",
        idle.rate,
        "P1 on the same database, retention idle",
        Target(">=", round(1 / FLAT, 3), text="within 10 %"),
        details={
            "during": during.details(),
            "deleted": deleted,
            "pruning_seconds": round(pruning_seconds, 2),
            "deleted_per_second": round(deleted / pruning_seconds, 1) if pruning_seconds else None,
        },
    )

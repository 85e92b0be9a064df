"""Commands published straight on the queue: P1 (beside bare Celery), P8 (each capability
switched off in turn), the scaling figure (1, 2, 4 worker processes; two nodes), and what
tracing costs a command (on beside off)."""

from __future__ import annotations

import timeit
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from domain.permissions import ALL_SCOPES, Grant, Scope
from tests.benchmarks.figures import Figure, Target
from tests.benchmarks.harness import (
    BACKENDS,
    BenchContext,
    Throughput,
    bare_worker,
    enable_users,
    seed_users,
    system,
    worker_processes,
)
from tests.benchmarks.http_paths import accepts
from tests.support.otlp_receiver import otlp_receiver
from worker.launch.command_lines import WORKER_APP


@dataclass(frozen=True)
class Setup:
    """How the workers run: processes per node, their log level, settings switched, and the
    module of their Celery app (production's, or a benchmark's own: tests/benchmarks/workers/)."""

    nodes: Sequence[int] = (2,)
    loglevel: str = "INFO"
    settings: dict[str, str] = field(default_factory=dict)
    app: str = WORKER_APP


def enable_throughput(ctx: BenchContext, name: str, backend: str, setup: Setup) -> Throughput:
    """Enable-user commands per second through a fresh system (a warm-up first)."""
    count, warm_up = ctx.size(100, 3000), ctx.size(20, 200)
    with system(ctx, name, backend, settings=setup.settings) as stack:
        for index, concurrency in enumerate(setup.nodes, start=1):
            stack.start_worker(
                f"w{index}", concurrency=concurrency, loglevel=setup.loglevel, app=setup.app
            )
        users = seed_users(stack, warm_up + count)
        enable_users(stack, users[:warm_up], [])
        return enable_users(stack, users[warm_up:], worker_processes(stack))


def noop_throughput(ctx: BenchContext, concurrency: int = 2) -> Throughput:
    with bare_worker(ctx, concurrency) as bare:
        return bare.noops(ctx.size(100, 3000))


def together(runs: Iterable[Throughput]) -> Throughput:
    """Runs counted as one: their commands over their time."""
    done = list(runs)
    return Throughput(
        count=sum(run.count for run in done),
        seconds=sum(run.seconds for run in done),
        failed=sum(run.failed for run in done),
        worker_cpu_seconds=sum(run.worker_cpu_seconds for run in done),
        machine_busy=sum(run.machine_busy * run.seconds for run in done)
        / sum(run.seconds for run in done),
    )


P1_TARGETS = {"sqlite": 0.7, "postgresql": 0.6}
"""Issue 34's targets: our rate over bare Celery's, on each database."""


def p1(ctx: BenchContext) -> list[Figure]:
    """Enable-user commands/s ÷ bare Celery no-op tasks/s, 2 worker processes, each
    database. Each side runs twice, interleaved (bare, ours, ours, bare), and counts its two
    runs together: a machine that drifts during the run weighs on both alike, and one
    noisy run weighs half (their rates varied by about ±8 % from run to run)."""
    figures = []
    for backend in BACKENDS:
        before = noop_throughput(ctx)
        ours = together(
            enable_throughput(ctx, f"p1_{backend}_{run}", backend, Setup()) for run in (1, 2)
        )
        baseline = together((before, noop_throughput(ctx)))
        figures.append(
            Figure(
                f"p1.{backend}",
                f"enable-user commands/s on the queue, end to end ({backend})",
                ours.rate,
                "/s",
                baseline.rate,
                "bare Celery no-op tasks/s",
                Target(">=", P1_TARGETS[backend], text=f"ratio ≥ {P1_TARGETS[backend]}"),
                also_required=ours.failed == 0,
                details={"ours": ours.details(), "baseline": baseline.details()},
            )
        )
    return figures


CAPABILITIES = {
    "metrics": Setup(app="tests.benchmarks.workers.without_metrics"),
    "logs": Setup(loglevel="WARNING", settings={"BILLING_LOG_LEVEL": "WARNING"}),
    "masking": Setup(settings={"BILLING_MASK_PERSONAL_DATA": "false"}),
    "event relay": Setup(app="tests.benchmarks.workers.without_relay_after_command"),
}
"""What P8 switches off, one at a time. Metrics and the event relay: the workers run a Celery
app of the benchmark's own composition (tests/benchmarks/workers/), without the metrics' signal
handlers, or leaving a command's events in the outbox (beat relays them; the events are still
written with the change). Logs: the workers log WARNING and above only (a command writes no
line; its log context is still bound)."""


def p8(ctx: BenchContext) -> list[Figure]:
    """What each capability costs a command: P1's setup on SQLite with everything on (run
    first and last; their mean is the baseline), then with each capability off in turn."""
    first = enable_throughput(ctx, "p8_all_on_first", "sqlite", Setup())
    off = {
        capability: enable_throughput(ctx, f"p8_{capability.replace(' ', '_')}", "sqlite", setup)
        for capability, setup in CAPABILITIES.items()
    }
    last = enable_throughput(ctx, "p8_all_on_last", "sqlite", Setup())
    wall_on = (1000 / first.rate + 1000 / last.rate) / 2
    cpu_on = (first.cpu_ms_per_command + last.cpu_ms_per_command) / 2
    on = {"first": first.details(), "last": last.details()}
    figures = []
    for capability, measured in off.items():
        details = {"off": measured.details(), "all_on": on}
        figures.append(
            Figure(
                f"p8.{capability.replace(' ', '_')}.wall",
                f"{capability}: wall time per command",
                wall_on - 1000 / measured.rate,
                "ms",
                wall_on,
                "per command, all on",
                details=details,
            )
        )
        figures.append(
            Figure(
                f"p8.{capability.replace(' ', '_')}.cpu",
                f"{capability}: worker CPU per command",
                cpu_on - measured.cpu_ms_per_command,
                "ms",
                cpu_on,
                "per command, all on",
                details=details,
            )
        )
    figures.append(_permission_check(wall_on))
    return figures


def _permission_check(wall_on: float) -> Figure:
    """The permission check is made by the API only (a command on the queue has none), on
    the client's cached grant, before the body is read: timed in this process."""
    grant = Grant(scopes=ALL_SCOPES)
    runs = 100_000
    seconds = timeit.timeit(lambda: grant.check(Scope.USERS_ENABLE, "org_1"), number=runs)
    return Figure(
        "p8.permission_check.cpu",
        "permission check (HTTP only; timed in process)",
        1000 * seconds / runs,
        "ms",
        wall_on,
        "per command, all on",
        details={"method": "timeit of Grant.check on a grant of every scope", "runs": runs},
    )


SCALING = (
    ("sqlite", (1,)),
    ("sqlite", (2,)),
    ("sqlite", (4,)),
    ("postgresql", (1,)),
    ("postgresql", (2,)),
    ("postgresql", (4,)),
    ("postgresql", (2, 2)),
)


def scaling(ctx: BenchContext) -> list[Figure]:
    """Enable-user commands/s with 1, 2 and 4 worker processes on each database, and two
    nodes of two on PostgreSQL; beside one process's rate on the same database. The
    machine's busy share and the workers' CPU per command say what bounds each step."""
    figures: list[Figure] = []
    single: dict[str, float] = {}
    for backend, nodes in SCALING:
        shape = " + ".join(str(n) for n in nodes)
        measured = enable_throughput(
            ctx, f"scaling_{backend}_{'_'.join(map(str, nodes))}", backend, Setup(nodes=nodes)
        )
        single.setdefault(backend, measured.rate)
        nodes_text = f"{len(nodes)} nodes" if len(nodes) > 1 else "1 node"
        figures.append(
            Figure(
                f"scaling.{backend}.{'x'.join(map(str, nodes))}",
                f"enable-user/s, {shape} worker process{'es' if sum(nodes) > 1 else ''} "
                f"({nodes_text}, {backend})",
                measured.rate,
                "/s",
                single[backend],
                "1 process, same database",
                details={**measured.details(), "processes": sum(nodes), "nodes": len(nodes)},
            )
        )
    return figures


def tracing(ctx: BenchContext) -> list[Figure]:
    """What tracing costs a command: P1's setup on SQLite with tracing off (production's
    default), then on (``OTEL_EXPORTER_OTLP_ENDPOINT``: every span sent over OTLP/HTTP to a
    real receiver in this process, which decodes each batch). Interleaved off, on, on, off,
    each side's two runs counted together, as in P1. The value is the difference per command
    (on - off), wall time from throughput and the worker processes' CPU time. Then P2's
    accept path (respond-async, 8 clients, no worker) through an API with tracing off, then
    on: the time per accept it adds (the request's span, the command log's, the publish's)."""
    count, warm_up = ctx.size(200, 3000), ctx.size(20, 200)
    with otlp_receiver() as receiver:
        otlp = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
        traced = Setup(settings=otlp)
        first_off = enable_throughput(ctx, "tracing_off_first", "sqlite", Setup())
        on = together(
            enable_throughput(ctx, f"tracing_on_{run}", "sqlite", traced) for run in (1, 2)
        )
        off = together((first_off, enable_throughput(ctx, "tracing_off_last", "sqlite", Setup())))
        spans = len(receiver.spans)
        api_off = accepts(ctx, "tracing_api_off", count, warm_up, processes=1)
        api_on = accepts(ctx, "tracing_api_on", count, warm_up, processes=1, settings=otlp)
        api_spans = len(receiver.spans) - spans
    runs = {
        "on": on.details(),
        "off": off.details(),
        # Warm-ups included: what the receiver decoded over both traced runs.
        "spans_received": spans,
        "exporter": "otlp (http/protobuf), BatchSpanProcessor defaults",
    }
    wall_off, wall_on = 1000 / off.rate, 1000 / on.rate
    return [
        Figure(
            "tracing.wall",
            "tracing on: wall time added per command",
            wall_on - wall_off,
            "ms",
            wall_off,
            "per command, tracing off",
            also_required=on.failed == 0,
            details=runs,
        ),
        Figure(
            "tracing.cpu",
            "tracing on: worker CPU added per command",
            on.cpu_ms_per_command - off.cpu_ms_per_command,
            "ms",
            off.cpu_ms_per_command,
            "per command, tracing off",
            also_required=on.failed == 0,
            details=runs,
        ),
        Figure(
            "tracing.api",
            "tracing on: the API's time added per accepted command (respond-async, 8 clients)",
            1000 / api_on.rate - 1000 / api_off.rate,
            "ms",
            1000 / api_off.rate,
            "per accept, tracing off",
            also_required=api_on.statuses == Counter({202: count}),
            details={
                "on": api_on.details(202),
                "off": api_off.details(202),
                "spans_received": api_spans,
            },
        ),
    ]

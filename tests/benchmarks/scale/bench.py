"""``bench scale``: each figure on the production-sized database (``seed``) beside the same
figure on a day-one database of the same shape, both on the same server, in the same run.

PostgreSQL's seeded database holds 10,000,000 commands; SQLite's a tenth. The day-one database
is seeded by the same generator at 1,000 commands (so the same ids exist in both: the same
account's story is read from each), with as many due plan changes as the seeded one. Without
a seeded database in ``.benchmarks/scale`` (``python3 -m worker.dev seed``), ``bench scale``
makes one first (about 15 minutes for PostgreSQL); ``--quick`` seeds 20,000 commands in the
run's own directory instead.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text

from adapters.db.engine import session_factory
from adapters.db.migrate import upgrade
from domain.permissions import Grant, Scope
from tests.benchmarks.figures import Figure, Target, percentile
from tests.benchmarks.harness import (
    BenchContext,
    Throughput,
    enable_users,
    seed_users,
    system,
    worker_processes,
)
from tests.benchmarks.http_paths import CLIENTS, enable_over_http
from tests.benchmarks.queue_throughput import together
from tests.benchmarks.scale import reads
from tests.benchmarks.scale.cluster import scale_cluster
from tests.benchmarks.scale.rows import Size, account_id, org_id, subscription_id
from tests.benchmarks.scale.seed import (
    DEFAULT_DIR,
    seed,
    seed_postgresql,
    seed_sqlite,
    seeded,
    sqlite_path,
)

DAY_ONE = Size(
    commands=1_000, organizations=1_100, changes=1_100, due_changes=1_000, scheduled_changes=40
)
QUICK = Size().scaled(20_000)
DATABASE = "billing_scale"
FLAT = 1.10
"""Issue 46: a path's figure on the seeded database within 10 % of the day-one figure."""
SWEEP_MS, PAGE_MS = 50.0, 100.0


@dataclass(frozen=True)
class Pair:
    """The seeded database and the day-one database of one backend."""

    backend: str
    seeded: str
    day_one: str
    organizations: int
    commands: int


@contextmanager
def databases(ctx: BenchContext, backend: str) -> Iterator[Pair]:
    now = time.time()
    if backend == "postgresql":
        if not ctx.quick and "postgresql" not in seeded(DEFAULT_DIR):
            seed(DEFAULT_DIR, "postgresql", Size())
        # A quick run's cluster goes in a directory the server's own user can reach.
        base = Path(tempfile.mkdtemp(prefix="billing-scale-")) if ctx.quick else None
        cluster = scale_cluster(base or DEFAULT_DIR / "postgresql")
        try:
            if ctx.quick:
                url = cluster.create_database(DATABASE)
                seed_postgresql(url, QUICK, 46, now)
            else:
                url = cluster.url(DATABASE)
                # Migrations newer than the seed (their indexes built on 10,000,000 commands).
                upgrade(url)
            day_one = cluster.create_database("billing_day_one")
            seed_postgresql(day_one, DAY_ONE, 46, now)
            yield Pair(backend, url, day_one, *_counts(url))
        finally:
            if base is not None:
                cluster.stop()
            else:
                cluster.stop_server()
        return
    path = ctx.directory("scale-sqlite") / "billing.db"
    if ctx.quick:
        seed_sqlite(path, QUICK.tenth(), 46, now)
    else:
        if "sqlite" not in seeded(DEFAULT_DIR):
            seed(DEFAULT_DIR, "sqlite", Size().tenth())
        # A copy: the run deletes expired commands, and the kept file stays as seeded.
        shutil.copyfile(sqlite_path(DEFAULT_DIR), path)
    day_one_path = ctx.directory("scale-sqlite-day-one") / "billing.db"
    seed_sqlite(day_one_path, DAY_ONE, 46, now)
    url = f"sqlite:///{path}"
    yield Pair(backend, url, f"sqlite:///{day_one_path}", *_counts(url))


def _counts(url: str) -> tuple[int, int]:
    with session_factory(url)() as session:
        organizations = session.execute(text("SELECT count(*) FROM organizations")).scalar_one()
        commands = session.execute(text("SELECT count(*) FROM commands")).scalar_one()
    return int(organizations), int(commands)


def _flat(
    key: str, label: str, seeded: float, day_one: float, unit: str, *, higher_is_better: bool
) -> Figure:
    bound = 1 / FLAT if higher_is_better else FLAT
    return Figure(
        key,
        label,
        seeded,
        unit,
        day_one,
        "the same on the day-one database",
        Target(">=" if higher_is_better else "<=", round(bound, 3), text="within 10 %"),
    )


def in_process(ctx: BenchContext, pair: Pair) -> list[Figure]:
    runs = ctx.size(3, 7)
    redis_url = ctx.redis_url()
    seeded_sweeps = reads.sweeps(pair.seeded, redis_url, runs)
    day_one_sweeps = reads.sweeps(pair.day_one, redis_url, runs)
    tag, scale = pair.backend, f"{pair.commands:,} commands"
    figures = [
        Figure(
            f"scale.{tag}.sweep.{name.split(' (')[0].replace(' ', '_')}",
            f"beat: {name}, one run over {scale} ({tag}), median",
            timed.median_ms,
            "ms",
            day_one_sweeps[name].median_ms,
            "the same on the day-one database",
            Target("<", SWEEP_MS, on="value", text=f"< {SWEEP_MS:g} ms"),
            details={
                "seeded_ms": [round(1000 * s, 2) for s in timed.runs],
                "day_one_ms": [round(1000 * s, 2) for s in day_one_sweeps[name].runs],
            },
        )
        for name, timed in seeded_sweeps.items()
    ]
    stories = ctx.size(10, 50)
    seeded_story = reads.account_stories(pair.seeded, redis_url, pair.organizations, stories)
    day_one_story = reads.account_stories(pair.day_one, redis_url, DAY_ONE.organizations, stories)
    figures.append(
        Figure(
            f"scale.{tag}.accounts_show",
            f"`accounts show`: an account's story read from the database ({tag}), p95",
            seeded_story.p95_ms,
            "ms",
            day_one_story.p95_ms,
            "the same on the day-one database",
            Target("<", PAGE_MS, on="value", text=f"< {PAGE_MS:g} ms"),
            details={"stories": stories, "median_ms": round(seeded_story.median_ms, 2)},
        )
    )
    deleted, seconds = reads.retention_rate(pair.seeded, redis_url)
    figures.append(
        Figure(
            f"scale.{tag}.retention",
            f"retention at its defaults: commands one sweep deletes a second ({tag})",
            deleted / seconds if seconds else float("nan"),
            "/s",
            100.0,
            "a sustained 100 commands/s",
            Target(">=", 1.0, text="faster than 100/s adds them"),
            details={"deleted": deleted, "seconds": round(seconds, 2)},
        )
    )
    if pair.backend == "postgresql":
        size = reads.bytes_per_command(pair.seeded)
        year = size["log_bytes_per_command"] * 50 * 365 * 86_400
        figures.append(
            Figure(
                f"scale.{tag}.bytes_per_command",
                "the command log's bytes a command (its runs, Stripe calls, events, deliveries;"
                " tables and indexes)",
                size["log_bytes_per_command"],
                "B",
                None,
                "",
                details={**size, "year_at_50_per_s_bytes": year},
            )
        )
    return figures


PAGES = (
    ("home", "/console"),
    ("failures", "/console/failures"),
    ("accounts", "/console/accounts"),
    ("account", "/console/accounts/{account}"),
    ("organization", "/console/organizations/{org}"),
    ("subscription", "/console/subscriptions/{subscription}"),
    ("command", "/console/commands/{command}"),
    ("search", "/console/search?q={email}"),
    ("audit", "/console/audit"),
)
CONSOLE = Grant(scopes=frozenset({Scope.OPERATIONS_READ}))


def page_times(
    ctx: BenchContext, name: str, pair: Pair, url: str, organizations: int
) -> dict[str, list[float]]:
    """Each console page ``runs`` times over HTTP, the API on ``url``; each run names
    another account (spread over ``organizations``)."""
    runs = ctx.size(5, 40)
    with session_factory(url)() as session:
        command = session.execute(
            text("SELECT id FROM commands ORDER BY created_at DESC LIMIT 1 OFFSET 10")
        ).scalar_one()
    with system(ctx, name, pair.backend, database_url=url) as stack:
        stack.start_api()
        client = stack.new_client(f"console-{name}", grant=CONSOLE)
        times: dict[str, list[float]] = {page: [] for page, _ in PAGES}
        with stack.http(client) as http:
            for run in range(runs + 1):
                n = (run * 7_919) % organizations
                names = {
                    "account": account_id(n),
                    "org": org_id(n),
                    "subscription": subscription_id(n),
                    "command": command,
                    "email": f"billing{n}@scale.example",
                }
                for page, path in PAGES:
                    began = time.perf_counter()
                    answer = http.get(path.format(**names))
                    took = time.perf_counter() - began
                    if answer.status_code != 200:
                        raise RuntimeError(f"{path.format(**names)}: {answer.status_code}")
                    if run:
                        times[page].append(took)
    return times


def pages(ctx: BenchContext, pair: Pair) -> list[Figure]:
    seeded = page_times(ctx, f"scale-pages-{pair.backend}", pair, pair.seeded, pair.organizations)
    day_one = page_times(
        ctx, f"scale-pages-{pair.backend}-day-one", pair, pair.day_one, DAY_ONE.organizations
    )
    return [
        Figure(
            f"scale.{pair.backend}.page.{page}",
            f"console page {path.split('?')[0]} ({pair.backend}), p95",
            1000 * percentile(seeded[page], 0.95),
            "ms",
            1000 * percentile(day_one[page], 0.95),
            "the same on the day-one database",
            Target("<", PAGE_MS, on="value", text=f"< {PAGE_MS:g} ms"),
            details={"p50_ms": round(1000 * percentile(seeded[page], 0.5), 2)},
        )
        for page, path in PAGES
    ]


def _enables(ctx: BenchContext, name: str, pair: Pair, url: str) -> Throughput:
    count, warm_up = ctx.size(100, 3000), ctx.size(20, 200)
    with system(ctx, name, pair.backend, database_url=url) as stack:
        stack.start_worker()
        users = seed_users(stack, warm_up + count)
        enable_users(stack, users[:warm_up], [])
        return enable_users(stack, users[warm_up:], worker_processes(stack))


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
        enable_over_http(stack, rest[:warm_up], CLIENTS, respond_async=True)
        accepted = enable_over_http(stack, rest[warm_up:], CLIENTS, respond_async=True)
    return single.latencies, accepted.latencies


def commands(ctx: BenchContext, pair: Pair) -> list[Figure]:
    """P1 interleaved (day one, seeded, seeded, day one), then the HTTP paths on each."""
    tag = pair.backend
    first = _enables(ctx, f"scale-p1-{tag}-a", pair, pair.day_one)
    ours = together(_enables(ctx, f"scale-p1-{tag}-{n}", pair, pair.seeded) for n in (1, 2))
    day_one = together((first, _enables(ctx, f"scale-p1-{tag}-b", pair, pair.day_one)))
    single, accepted = _http(ctx, f"scale-http-{tag}", pair, pair.seeded)
    single_day_one, accepted_day_one = _http(ctx, f"scale-http-{tag}-day-one", pair, pair.day_one)
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
    return figures


def scale(ctx: BenchContext) -> list[Figure]:
    """Every figure of issue 46 on PostgreSQL (10,000,000 commands) and SQLite (a tenth),
    each beside the day-one database's."""
    figures: list[Figure] = []
    for backend in ("postgresql", "sqlite"):
        with databases(ctx, backend) as pair:
            figures += in_process(ctx, pair)
            figures += pages(ctx, pair)
            figures += commands(ctx, pair)
    return figures

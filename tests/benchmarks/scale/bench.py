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

from tests.benchmarks.figures import Figure, Target
from tests.benchmarks.harness import BenchContext, Throughput
from tests.benchmarks.scale import reads
from tests.benchmarks.scale.databases import DAY_ONE, PAGE_MS, SWEEP_MS, Pair, databases
from tests.benchmarks.scale.pages import pages
from tests.benchmarks.scale.paths import commands, p1_while_pruning
from tests.benchmarks.scale.reconcile import reconcile_and_drift
from worker.settings import Settings


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


def retention(ctx: BenchContext, pair: Pair, idle: Throughput) -> list[Figure]:
    """What the retention deletes a second at its defaults, then P1 beside it: last, as
    their deletes leave work for the database's vacuum."""
    tag, redis_url = pair.backend, ctx.redis_url()
    figures: list[Figure] = []
    deleted, seconds = reads.retention_rate(pair.seeded, redis_url)
    within_a_sweep = deleted / seconds if seconds else float("nan")
    defaults = Settings(redis_url=redis_url)
    # A sweep deletes at most its budget of batches, once an interval: what it keeps up with.
    budget = (
        defaults.command_retention_batch
        * defaults.command_retention_max_batches
        / defaults.command_retention_interval_seconds
    )
    figures.append(
        Figure(
            f"scale.{tag}.retention",
            f"retention at its defaults: expired commands deleted a second, sustained ({tag})",
            min(within_a_sweep, budget),
            "/s",
            100.0,
            "a sustained 100 commands/s",
            Target(">=", 1.0, text="faster than 100/s adds them"),
            details={
                "deleted_by_one_sweep": deleted,
                "sweep_seconds": round(seconds, 2),
                "deleted_per_second_within_a_sweep": round(within_a_sweep, 1),
                "sweep_budget_per_second": round(budget, 1),
            },
        )
    )
    figures.append(p1_while_pruning(ctx, pair, idle))
    return figures


def scale(ctx: BenchContext) -> list[Figure]:
    """Every figure of issue 46 on PostgreSQL (10,000,000 commands) and SQLite (a tenth),
    each beside the day-one database's."""
    figures: list[Figure] = []
    for backend in ("postgresql", "sqlite"):
        with databases(ctx, backend) as pair:
            figures += in_process(ctx, pair)
            figures += pages(ctx, pair)
            paths, idle = commands(ctx, pair)
            figures += paths
            figures += retention(ctx, pair, idle)
            # Last: the pass writes every row it reads (its time of reading).
            figures += reconcile_and_drift(ctx, pair)
    return figures


def scale_reads(ctx: BenchContext) -> list[Figure]:
    """``scale``'s in-process figures alone: beat's sweeps, `accounts show` and the bytes a
    command takes, on each database beside day one."""
    figures: list[Figure] = []
    for backend in ("postgresql", "sqlite"):
        with databases(ctx, backend) as pair:
            figures += in_process(ctx, pair)
    return figures


def scale_reconcile(ctx: BenchContext) -> list[Figure]:
    """``scale``'s reconciliation pass and drift report alone, on each database."""
    figures: list[Figure] = []
    for backend in ("postgresql", "sqlite"):
        with databases(ctx, backend) as pair:
            figures += reconcile_and_drift(ctx, pair)
    return figures

"""P6: beat's sweep of due plan changes over a large table; P7: the memory of each process."""

from __future__ import annotations

import statistics
import time
from datetime import timedelta

from sqlalchemy import select, text, update

from adapters.clock import SystemClock
from adapters.db.models import ScheduledChangeRow
from adapters.db.repositories import _claimable
from application.handlers.operations.sweeps import publish_due_changes
from application.requests.sweeps import PublishDueChanges
from domain.subscriptions.change_states import ChangeKind, ChangeState
from domain.subscriptions.subscription import SubscriptionState
from tests.benchmarks.figures import Figure, Target
from tests.benchmarks.harness import (
    BenchContext,
    bare_worker,
    enable_users,
    process_tree,
    pss_mib,
    seed_users,
    system,
)
from tests.benchmarks.http_paths import enable_over_http
from tests.support.emulator import EMULATOR_KEY
from tests.support.stack import Stack
from tests.support.subscriptions import new_account, new_plan, operator
from worker.bootstrap import build_services
from worker.settings import Settings

SUBSCRIPTIONS = """
INSERT INTO subscriptions (id, billing_account_id, plan_id, state, provider, provider_id,
    current_period_start, current_period_end, created_at, updated_at)
SELECT 'sub_bench_' || g, :account, :plan, :state, 'stripe', 'sub_stripe_bench_' || g,
    :start, :end, :now, :now
FROM generate_series(1, :total) AS g
"""
CHANGES = """
INSERT INTO scheduled_changes (id, subscription_id, from_plan_id, target_plan_id, kind,
    effective_at, state, proration_behavior, claims, created_at, updated_at)
SELECT 'chg_bench_' || g, 'sub_bench_' || g, :plan, :target, :kind,
    CASE WHEN g <= :due THEN :past
         ELSE :later + make_interval(secs => (g * 2592000.0 / :total)) END,
    :state, 'create_prorations', 0, :now, :now
FROM generate_series(1, :total) AS g
"""


def seed_changes(stack: Stack, total: int, due: int) -> float:
    """``total`` subscriptions of one account, each with a change at its period's end:
    ``due`` of them due now, the others over the next 30 days; in two statements."""
    services = operator(stack)
    starter, team = new_plan(services, "starter", 900), new_plan(services, "team", 2900)
    account = new_account(services)
    now = SystemClock().now()
    started = time.perf_counter()
    with stack.sessions() as session:
        session.execute(
            text(SUBSCRIPTIONS),
            {
                "account": account.id,
                "plan": starter.id,
                "state": SubscriptionState.ACTIVE.value,
                "start": now - timedelta(days=25),
                "end": now + timedelta(days=5),
                "now": now,
                "total": total,
            },
        )
        session.execute(
            text(CHANGES),
            {
                "plan": starter.id,
                "target": team.id,
                "kind": ChangeKind.END_OF_PERIOD.value,
                "due": due,
                "past": now - timedelta(minutes=1),
                # Beyond the period-end lead (an hour): not due yet.
                "later": now + timedelta(hours=2),
                "state": ChangeState.SCHEDULED.value,
                "now": now,
                "total": total,
            },
        )
        session.commit()
        session.execute(text("ANALYZE subscriptions"))
        session.execute(text("ANALYZE scheduled_changes"))
        session.commit()
    return time.perf_counter() - started


def p6(ctx: BenchContext) -> list[Figure]:
    """One run of beat's sweep (``publish_due_changes``, what the task
    ``subscriptions.enqueue_due_changes`` runs) over a million plan changes of which a
    thousand are due, on PostgreSQL, with the rate budget of the emulator's key; beside the
    bare claim ``SELECT … FOR UPDATE SKIP LOCKED`` with the same limit on the same table.
    Median of a few runs after a warm-up, the claims undone between runs."""
    total, due, runs = ctx.size(10_000, 1_000_000), ctx.size(100, 1_000), ctx.size(3, 5)
    row = ScheduledChangeRow
    with system(ctx, "p6", "postgresql", emulator=True) as stack:
        seconds_to_seed = seed_changes(stack, total, due)
        settings = Settings(
            database_url=stack.database_url,
            redis_url=stack.redis_url,
            stripe_api_key=EMULATOR_KEY,
            stripe_api_base=stack.stripe_url,
        )
        services = build_services(settings)
        lead = timedelta(seconds=settings.period_end_lead_seconds)
        sweeps: list[float] = []
        selects: list[float] = []
        claimed: list[int] = []
        for _ in range(runs + 1):  # the first run opens the connections: a warm-up
            with stack.sessions() as session:
                session.execute(
                    update(row)
                    .where(row.state == ChangeState.APPLYING.value)
                    .values(state=ChangeState.SCHEDULED.value, lease_until=None, claims=0)
                )
                session.commit()
                limit = claimed[0] if claimed else settings.scheduled_changes_batch_size
                began = time.perf_counter()
                session.scalars(
                    select(row.id)
                    .where(_claimable(SystemClock().now(), lead))
                    .order_by(row.effective_at, row.id)
                    .limit(limit)
                    .with_for_update(skip_locked=True)
                ).all()
                selects.append(time.perf_counter() - began)
                session.rollback()
            began = time.perf_counter()
            claimed.append(publish_due_changes(PublishDueChanges(), services).claimed)
            sweeps.append(time.perf_counter() - began)
    warm_up = {"sweep_ms": round(1000 * sweeps.pop(0), 3), "claimed": claimed.pop(0)}
    selects.pop(0)
    return [
        Figure(
            "p6",
            f"beat's due-changes sweep over {total:,} changes, {due:,} due (PostgreSQL)",
            1000 * statistics.median(sweeps),
            "ms",
            1000 * statistics.median(selects),
            "the bare claim SELECT",
            Target("<", 50.0, on="value", text="< 50 ms"),
            details={
                "changes": total,
                "due": due,
                "claimed_per_sweep": claimed,
                "sweep_ms": [round(1000 * s, 3) for s in sweeps],
                "select_ms": [round(1000 * s, 3) for s in selects],
                "seconds_to_seed": round(seconds_to_seed, 1),
                "warm_up": warm_up,
            },
        )
    ]


def p7(ctx: BenchContext) -> list[Figure]:
    """PSS of each process (``/proc/<pid>/smaps_rollup``) after a warm-up: the worker node's
    main and pool processes (2), the API, beat; beside a bare Celery worker of the same
    concurrency after the same number of no-op tasks."""
    warm_up, over_http = ctx.size(100, 300), ctx.size(20, 100)
    with bare_worker(ctx) as bare:
        bare.noops(warm_up)
        bare_main, *bare_children = [pss_mib(pid) for pid in process_tree(bare.process.pid)]
    with system(ctx, "p7") as stack:
        worker = stack.start_worker()
        stack.start_api()
        beat = stack.start_beat()
        stack.client = stack.new_client()
        users = seed_users(stack, warm_up + over_http)
        enable_users(stack, users[:warm_up], [])
        enable_over_http(stack, users[warm_up:], 2, respond_async=False)
        main, *children = [pss_mib(pid) for pid in process_tree(worker.pid)]
        api_process = next(c.process for c in stack.group.children if c.name == "api")
        api = sum(pss_mib(pid) for pid in process_tree(api_process.pid))
        beat_pss = sum(pss_mib(pid) for pid in process_tree(beat.pid))
    child_baseline = statistics.mean(bare_children) if bare_children else float("nan")
    bare_details = {"main_mib": bare_main, "children_mib": bare_children, "warm_up": warm_up}
    figures = [
        Figure(
            "p7.worker.main",
            "worker main process PSS",
            main,
            "MiB",
            bare_main,
            "bare Celery worker main",
            details=bare_details,
        ),
        *(
            Figure(
                f"p7.worker.child{index}",
                f"worker pool process {index} PSS",
                pss,
                "MiB",
                child_baseline,
                "bare Celery pool process (mean)",
                Target("<=", 80.0, on="value", text="≤ 80 MB"),
                details=bare_details,
            )
            for index, pss in enumerate(children, start=1)
        ),
        Figure(
            "p7.worker.total",
            "worker node PSS (main + pool)",
            main + sum(children),
            "MiB",
            bare_main + sum(bare_children),
            "bare Celery node",
            details=bare_details,
        ),
        Figure(
            "p7.api",
            "API process PSS",
            api,
            "MiB",
            bare_main,
            "bare Celery worker main",
            details=bare_details,
        ),
        Figure(
            "p7.beat",
            "beat PSS",
            beat_pss,
            "MiB",
            bare_main,
            "bare Celery worker main",
            details=bare_details,
        ),
    ]
    return figures

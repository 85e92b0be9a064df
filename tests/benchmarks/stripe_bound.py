"""Work bound by Stripe: P4 (account creations with 300 ms of Stripe latency beside what the
rate budget allows) and P5 (the period-end burst, ``bench_period_end_burst.py``)."""

from __future__ import annotations

import dataclasses
import uuid

from tests.benchmarks import bench_period_end_burst as burst
from tests.benchmarks.figures import Figure, Target
from tests.benchmarks.harness import (
    BenchContext,
    another_service,
    since_now,
    system,
    wait_commands,
    worker_processes,
)
from tests.support.records import create_organization
from tests.support.stack import Stack
from worker.clock import SystemClock

STRIPE_LATENCY_MS = 300
STRIPE_RATE = 25.0
"""``BILLING_STRIPE_RATE_PER_SECOND``: Stripe's published limit for a test-mode key (the
emulator's), for reads and for writes alike."""
CREATE_ACCOUNT = "billing.create_account"


def create_accounts(stack: Stack, org_ids: list[str]) -> None:
    """Publish a billing account creation per organization, as another service would."""
    publisher = another_service(stack.redis_url)
    try:
        for org_id in org_ids:
            publisher.send_task(
                CREATE_ACCOUNT,
                kwargs={
                    "command_id": str(uuid.uuid4()),
                    "org_id": org_id,
                    "account": {"name": "Bench", "email": "bench@x.io"},
                },
                queue="billing",
            )
    finally:
        publisher.close()


P4_CONCURRENCIES = (2, 16)
"""The default node (2 processes), and a node sized for a Stripe-bound queue: a process waits
on each call, so the budget is reached with about rate x latency x calls per creation in
flight (25/s x 0.3 s x 2 = 15)."""


def p4(ctx: BenchContext) -> list[Figure]:
    """Billing account creations/s with every Stripe call 300 ms slower (the emulator's
    latency fault), SQLite, the budget at ``STRIPE_RATE``, on a node of each of
    :data:`P4_CONCURRENCIES` processes; beside the creations/s the budget allows (its rate ÷
    the Stripe writes one creation makes, counted in the emulator's request log)."""
    return [_p4_on(ctx, concurrency) for concurrency in P4_CONCURRENCIES]


def _p4_on(ctx: BenchContext, concurrency: int) -> Figure:
    count, warm_up = ctx.size(20, 300), ctx.size(4, 20)
    with system(
        ctx,
        f"p4_{concurrency}",
        emulator=True,
        settings={
            "BILLING_STRIPE_BUDGET_ENABLED": "true",
            "BILLING_STRIPE_RATE_PER_SECOND": str(STRIPE_RATE),
        },
    ) as stack:
        stack.start_worker(concurrency=concurrency)
        clock = SystemClock()
        orgs = [
            create_organization(stack.sessions, clock, name=f"bench-{uuid.uuid4().hex}").id
            for _ in range(warm_up + count)
        ]
        with stack.stripe as admin:
            admin.add_fault("latency", "*", latency_ms=STRIPE_LATENCY_MS)
        began = since_now()
        create_accounts(stack, orgs[:warm_up])
        wait_commands(stack, CREATE_ACCOUNT, began, warm_up)
        with stack.stripe as admin:
            admin.clear_requests()
        pids = worker_processes(stack)
        began = since_now()
        create_accounts(stack, orgs[warm_up:])
        finished, failed, seconds = wait_commands(stack, CREATE_ACCOUNT, began, count)
        with stack.stripe as admin:
            requests = admin.requests()
    writes = sum(request.method == "POST" for request in requests)
    stripe_errors = sum(request.status is None or request.status >= 400 for request in requests)
    writes_per_creation = writes / finished if finished else float("nan")
    errors = failed + stripe_errors

    return Figure(
        f"p4.{concurrency}",
        f"account creations/s, Stripe {STRIPE_LATENCY_MS} ms slower, "
        f"{concurrency} worker processes",
        finished / seconds if seconds > 0 else float("nan"),
        "/s",
        STRIPE_RATE / writes_per_creation if writes_per_creation else float("nan"),
        f"what a budget of {STRIPE_RATE:g} writes/s allows",
        Target(">=", 0.9, text="ratio ≥ 0.9, 0 errors"),
        also_required=errors == 0 and finished == count,
        details={
            "count": count,
            "finished": finished,
            "seconds": round(seconds, 4),
            "errors": errors,
            "failed_commands": failed,
            "stripe_errors": stripe_errors,
            "stripe_requests": len(requests),
            "stripe_writes_per_creation": round(writes_per_creation, 3),
            "worker_processes": len(pids) - 1,
            "budget_per_second": STRIPE_RATE,
        },
    )


def p5(ctx: BenchContext) -> list[Figure]:
    """The period-end burst (``bench_period_end_burst.run``): drain time beside its floor
    (the Stripe writes needed ÷ the rate), budget on, at Stripe's test-mode rate; 1,000 and
    10,000 changes (``--quick``: 30). The script itself also runs other rates, and the budget
    off."""
    sizes, rates = ((30,), (25,)) if ctx.quick else ((1000, 10000), (25,))
    budgets = (True,)
    figures = []
    for size in sizes:
        for rate in rates:
            for budget in budgets:
                database = int(ctx.redis_url().rsplit("/", 1)[1])
                outcome = burst.run(
                    ctx.directory("p5"), ctx.redis_base, database, size, rate, budget, 3.0, False
                )
                figures.append(
                    Figure(
                        f"p5.{size}.{rate}.{'budget' if budget else 'no_budget'}",
                        f"period-end burst: {size:,} changes, Stripe {rate}/s, budget "
                        f"{'on' if budget else 'off'}: drain time",
                        outcome.drain_seconds if outcome.drained else float("nan"),
                        "s",
                        outcome.floor_seconds,
                        "floor: Stripe writes ÷ rate",
                        details=dataclasses.asdict(outcome),
                    )
                )
    return figures

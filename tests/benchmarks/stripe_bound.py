"""Work bound by Stripe: P4 (account creations with 300 ms of Stripe latency beside what the
rate budget allows), P5 (the period-end burst, ``bench_period_end_burst.py``) and P5L (that
burst at Stripe's live rate, beside the same burst on an older commit, in the same run)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from adapters.clock import SystemClock
from tests.benchmarks import bench_period_end_burst as burst
from tests.benchmarks.figures import Figure, Target
from tests.benchmarks.harness import (
    ROOT,
    BenchContext,
    another_service,
    since_now,
    system,
    wait_commands,
    worker_processes,
)
from tests.support.records import create_organization
from tests.support.stack import Stack

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


P5L_BASELINE_COMMIT = "85166c7"
"""The commit P5L's burst is measured against (issue 34): the same burst runs on a worktree
of it, in the same run."""
P5L_RATE = 100
"""Stripe's live-mode limit (writes a second), the budget's rate."""
P5L_CAP = 12.0
"""Floors a P5L burst may take before it is stopped: enough for a slow system to drain (2,000
changes at 100/s is a 20 s floor; the burst was measured at about 24 changes/s, 4 floors)."""

_BASELINE_BURST = """
import dataclasses, json, sys
from pathlib import Path
from tests.benchmarks import bench_period_end_burst as burst
workdir, redis_base, database, size, rate, cap = sys.argv[1:7]
outcome = burst.run(
    Path(workdir), redis_base, int(database), int(size), int(rate), True, float(cap), False
)
print("P5L-OUTCOME " + json.dumps(dataclasses.asdict(outcome)), flush=True)
"""
"""The baseline's burst, driven as its own ``bench_period_end_burst.py`` drives it (its
``run()``), budget on, not late; run inside the baseline's worktree."""


def p5l(ctx: BenchContext) -> list[Figure]:
    """The period-end burst at Stripe's live rate (100 writes/s), the shared rate budget on,
    sized so that it drains (2,000 changes; ``--quick``: 40): changes made at Stripe a second
    (staged, from the moment they fell due until the last one), beside the same burst run by
    :data:`P5L_BASELINE_COMMIT`'s own ``bench_period_end_burst.run`` on a git worktree of that
    commit (its code, workers, beat, API and emulator), in the same run. Ours first, then the
    baseline's, on the same Redis server and the same machine."""
    size, rate = ctx.size(40, 2000), P5L_RATE
    database = int(ctx.redis_url().rsplit("/", 1)[1])
    ours = burst.run(
        ctx.directory("p5l"), ctx.redis_base, database, size, rate, True, P5L_CAP, False
    )
    with baseline_worktree(ctx, P5L_BASELINE_COMMIT) as (tree, python):
        theirs = _baseline_burst(ctx, tree, python, size, rate)
    ours_rate = ours.applied / ours.drain_seconds
    theirs_rate = theirs["applied"] / theirs["drain_seconds"]
    return [
        Figure(
            f"p5l.{size}.{rate}",
            f"period-end burst at Stripe's live rate: {size:,} changes, {rate}/s, budget on: "
            "changes made a second",
            ours_rate,
            "/s",
            theirs_rate,
            f"the same burst on {P5L_BASELINE_COMMIT}",
            Target(">=", 2.0, text=f"≥ 2 times {P5L_BASELINE_COMMIT}, both drained, 0 failed"),
            also_required=ours.drained and theirs["drained"] and ours.failed == 0,
            details={
                "ours": dataclasses.asdict(ours),
                "baseline": theirs,
                "baseline_commit": P5L_BASELINE_COMMIT,
                "cap_floors": P5L_CAP,
            },
        ),
        Figure(
            f"p5l.{size}.{rate}.floor",
            f"period-end burst at Stripe's live rate: {size:,} changes, {rate}/s, budget on: "
            "changes made a second, beside the floor's pace",
            ours_rate,
            "/s",
            ours.applied / ours.floor_seconds,
            "the floor's pace: the changes ÷ (the Stripe writes needed ÷ the rate)",
            Target(">=", 0.9, text="≥ 0.9 of the floor's pace, drained, 0 failed"),
            also_required=ours.drained and ours.failed == 0,
            details={"drain_seconds": ours.drain_seconds, "floor_seconds": ours.floor_seconds},
        ),
    ]


@contextlib.contextmanager
def baseline_worktree(ctx: BenchContext, commit: str) -> Iterator[tuple[Path, str]]:
    """A detached git worktree of ``commit`` under the run's directory, and the Python to
    run it with: this venv's when the commit's locked packages are all among ours (the
    same versions), else a venv of its own (``dev.ensure_environment`` inside it). The
    worktree is removed afterwards."""
    tree = ctx.workdir / f"baseline-{commit}"
    _git("worktree", "add", "--detach", "--force", str(tree), commit)
    try:
        yield tree, _python_for(tree)
    finally:
        _git("worktree", "remove", "--force", str(tree))


def _git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True)


def _python_for(tree: Path) -> str:
    lock = "requirements/dev.lock"
    theirs = _pins((tree / lock).read_text())
    if theirs <= _pins((ROOT / lock).read_text()):
        return sys.executable
    subprocess.run(
        [
            "python3",
            "-c",
            "from worker import dev; dev.ensure_environment(dev.DEV_LOCK)",
        ],
        cwd=tree,
        check=True,
    )
    return str(tree / ".venv" / "bin" / "python")


def _pins(lock: str) -> set[str]:
    """The ``name==version`` lines of a pip lock."""
    return {line.split()[0] for line in lock.splitlines() if "==" in line and line[:1].isalnum()}


def _baseline_burst(
    ctx: BenchContext, tree: Path, python: str, size: int, rate: int
) -> dict[str, Any]:
    """Run the burst in ``tree`` (its modules first on the path of every process it starts),
    printing its progress; returns its ``Outcome`` as a dict."""
    workdir = ctx.directory(f"p5l-baseline-{tree.name}")
    database = ctx.redis_url().rsplit("/", 1)[1]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [python, "-c", _BASELINE_BURST, str(workdir), ctx.redis_base, database]
    argv += [str(size), str(rate), str(P5L_CAP)]
    process = subprocess.Popen(
        argv, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    outcome: dict[str, Any] | None = None
    for line in process.stdout:
        if line.startswith("P5L-OUTCOME "):
            outcome = json.loads(line.removeprefix("P5L-OUTCOME "))
        else:
            print(f"  [{tree.name}] {line}", end="", flush=True)
    if process.wait() != 0 or outcome is None:
        raise RuntimeError(f"the baseline's burst exited with {process.returncode}")
    return outcome

"""The period-end burst: N plan changes fall due at once, Stripe allows R writes a second.

Run: ``.venv/bin/python tests/benchmarks/bench_period_end_burst.py [--sizes 1000,10000]
[--rates 25,100] [--late] [--stripe-events | --preview-flood]``

For each size and rate, in the same run, with the shared rate budget on and then off (calls
go out as fast as workers make them, as before the budget existed): a fresh system on
embedded parts (Redis, SQLite, the Stripe emulator limited to R read and R write operations
a second, two worker nodes of four processes, beat, the API), N subscriptions each with a
change at its period's end; beat is started and sweeping. Then the clock moves to where every
change is due at Stripe
(the latest boundary less ``BILLING_PERIOD_END_LEAD_SECONDS``) and the changes drain: each is
one read (its boundary) and one write (made ahead, ``staged``). Once drained, the clock moves
past the boundaries and the staged changes take effect (no Stripe call). With ``--late`` the
clock jumps over the boundaries at once instead (workers down across them): each change is
then a correction invoiced at once. An HTTP client creates a billing account every half
second during the burst (synchronous mode), and 20 before it as the idle baseline. The
README's settings are used (sweep every second, 15-minute leases, 8 attempts, 1 h lead).

Prints per run: drain time ÷ floor (the drain: from the moment the changes fell due until the
last was made at Stripe, on the system's clock; floor = Stripe writes needed ÷ R; reads have a
budget of their own), lag p50/p99 from the moment the changes fell due, 429s, failed
commands, changes claimed more than once, the time the staged changes took to take effect,
and the interactive creation's p50/p95 idle and during the burst. A run that has not drained
after ``--cap`` times its floor is stopped and reported as such.

With ``--stripe-events`` (and ``--late``, so that Stripe renews every subscription during the
drain) each size and rate runs with the budget on, first without Stripe's events, then with
the emulator's webhooks wired to the API (its own renewal events: 3 or 4 handled per renewal,
all at the boundary), and prints the drain time with them ÷ without: the syncs they ask for
wait behind the due changes, so the target is at most 1.10. With ``--preview-flood`` the
second run has a client holding ``subscriptions:change`` for one other organization send
synchronous previews from 8 threads through the drain (waiting out each ``Retry-After`` of
its share, ``BILLING_CLIENT_COMMANDS_PER_SECOND`` and the client's ceiling at their defaults):
the target is the same.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import redis
from sqlalchemy import func, select

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from adapters.clock import ShiftableClock, SystemClock  # noqa: E402
from adapters.db.migrate import upgrade  # noqa: E402
from adapters.db.models import CommandRow, ScheduledChangeRow  # noqa: E402
from adapters.provider.stripe_adapter import StripeBillingProvider  # noqa: E402
from application.handlers.provider.stripe_endpoints import register_stripe_endpoint  # noqa: E402
from application.handlers.subscriptions.subscribe import seed_period_end_changes  # noqa: E402
from application.requests.operator_requests import RegisterStripeEndpoint, SeedPeriodEndChanges  # noqa: E402
from domain.permissions import Grant, Scope  # noqa: E402
from domain.subscriptions.plans import Plan  # noqa: E402
from tests.emulator.support import sdk_client  # noqa: E402
from tests.support.emulator import EMULATOR_KEY, start_emulator  # noqa: E402
from tests.support.invoices import pay_open_invoices  # noqa: E402
from tests.support.records import create_organization, services_on  # noqa: E402
from tests.support.stack import Stack, stack_env  # noqa: E402
from tests.support.subscriptions import DAY, new_account, new_plan, subscribe  # noqa: E402
from worker.bootstrap import Services  # noqa: E402
from worker.local.embedded import ProcessGroup, start_redis  # noqa: E402

LEAD = timedelta(hours=1)
"""``BILLING_PERIOD_END_LEAD_SECONDS`` of README_SETTINGS."""
README_SETTINGS = {
    "BILLING_RETRY_MAX_ATTEMPTS": "8",
    "BILLING_RETRY_BASE_DELAY_SECONDS": "1",
    "BILLING_RETRY_MAX_DELAY_SECONDS": "60",
    "BILLING_BROKER_VISIBILITY_TIMEOUT_SECONDS": "600",
    "BILLING_BEAT_INTERVAL_SECONDS": "5",
    "BILLING_SCHEDULED_CHANGES_INTERVAL_SECONDS": "1",
    "BILLING_SCHEDULED_CHANGE_LEASE_SECONDS": "900",
    "BILLING_STALLED_COMMAND_SECONDS": "300",
    "BILLING_HTTP_WAIT_TIMEOUT_SECONDS": "10",
    "BILLING_DATABASE_LOCK_TIMEOUT_SECONDS": "10",
    "BILLING_LOG_LEVEL": "WARNING",
    "BILLING_SHIFTABLE_CLOCK": "true",
    "BILLING_PERIOD_END_LEAD_SECONDS": "3600",
    "BILLING_CLIENT_COMMANDS_PER_SECOND": "1",
    "BILLING_CLIENT_COMMAND_BURST": "20",
    "BILLING_CLIENT_TOTAL_COMMANDS_PER_SECOND": "5",
    "BILLING_CLIENT_TOTAL_COMMAND_BURST": "100",
}


@dataclass
class Outcome:
    size: int
    rate: int
    budget: bool
    drained: bool
    applied: int
    drain_seconds: float
    floor_seconds: float
    lag_p50: float
    lag_p99: float
    rate_limited: int
    stripe_calls: int
    failed: int
    reclaimed: int
    take_effect_seconds: float
    idle_p50: float
    idle_p95: float
    burst_p50: float
    burst_p95: float
    burst_errors: int
    stripe_events: bool = False
    syncs: int = 0
    preview_flood: bool = False
    previews: Counter[int] = field(default_factory=Counter)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def create_account(stack: Stack, org_id: str) -> tuple[float, int]:
    with stack.http() as http:
        began = time.perf_counter()
        response = http.post(
            f"/v1beta1/organizations/{org_id}/billing",
            json={"body": {"name": "Bench", "email": "bench@example.com"}},
        )
        return time.perf_counter() - began, response.status_code


def count_in(stack: Stack, *states: str) -> int:
    with stack.sessions() as session:
        return int(
            session.scalar(
                select(func.count())
                .select_from(ScheduledChangeRow)
                .where(ScheduledChangeRow.state.in_(states))
            )
            or 0
        )


def latest_boundary(stack: Stack) -> datetime:
    with stack.sessions() as session:
        latest: datetime | None = session.scalar(select(func.max(ScheduledChangeRow.effective_at)))
    assert latest is not None
    return latest


def run(
    workdir: Path,
    redis_base: str,
    db_index: int,
    size: int,
    rate: int,
    budget: bool,
    cap: float,
    late: bool,
    stripe_events: bool = False,
    preview_flood: bool = False,
) -> Outcome:
    name = f"burst_{size}_{rate}_{'on' if budget else 'off'}{'_events' if stripe_events else ''}"
    name += "_flood" if preview_flood else ""
    base = workdir / name
    base.mkdir()
    database_url = f"sqlite:///{base / 'billing.db'}"
    upgrade(database_url)
    redis_url = f"{redis_base}/{db_index}"
    redis.Redis.from_url(redis_url).flushdb()
    emulator = start_emulator(base / "emulator.log", "--rate-limit", "0")
    env = stack_env(
        database_url=database_url,
        redis_url=redis_url,
        data_dir=base,
        stripe_url=emulator.url,
        **README_SETTINGS,
        BILLING_STRIPE_BUDGET_ENABLED="true" if budget else "false",
        BILLING_STRIPE_RATE_PER_SECOND=str(rate),
    )
    stack = Stack(name, database_url, redis_url, base, env, stripe_url=emulator.url)
    try:
        ctx = services_on(
            stack.sessions, provider=StripeBillingProvider(EMULATOR_KEY, api_base=emulator.url)
        )
        starter, team = new_plan(ctx, "starter", 900), new_plan(ctx, "team", 2900)
        account = new_account(ctx)
        seeded = time.monotonic()
        # The handler yields each change as it is made: drain it (nothing is made unread).
        made = seed_period_end_changes(
            SeedPeriodEndChanges(
                org_id=account.org_id,
                billing_account_id=account.id,
                plan_ref=starter.id,
                target_plan_ref=team.id,
                count=size,
                threads=4,
            ),
            ctx,
        )
        assert len(list(made)) == size
        print(f"  {name}: seeded {size} in {time.monotonic() - seeded:.0f}s", flush=True)
        orgs = [
            create_organization(stack.sessions, SystemClock(), name=f"o-{uuid.uuid4().hex}").id
            for _ in range(20 + int(cap * size / rate * 2) + 10)
        ]
        stack.start_worker("w1", concurrency=4)
        stack.start_worker("w2", concurrency=4)
        stack.start_api()
        stack.client = stack.new_client()
        if stripe_events:
            register_stripe_endpoint(
                RegisterStripeEndpoint(f"{stack.api_url}/webhooks/stripe"), ctx
            )
        idle = [create_account(stack, orgs.pop())[0] for _ in range(20)]
        target = _flooded(stack, ctx, starter, team) if preview_flood else None
        with stack.stripe as admin:
            admin.set_rate_limit(rate)
            admin.clear_requests()

        # Beat runs before the period ends, as in production: its start-up (a process and
        # its imports, 1.5-2.5 s on this machine) is not part of the burst.
        stack.start_beat()
        beat_log = base / "beat.log"
        started_beat = time.monotonic()
        while BEAT_SWEEP not in (beat_log.read_text() if beat_log.exists() else ""):
            if time.monotonic() - started_beat > 60:
                raise RuntimeError(f"beat sent no sweep within 60 s: see {beat_log}")
            time.sleep(0.1)
        boundary = latest_boundary(stack)
        if late:
            stack.advance_time(32 * DAY)
        else:
            ahead = boundary - LEAD + timedelta(seconds=30) - ShiftableClock(redis_url).now()
            stack.advance_time(ahead.total_seconds())
        due_at: datetime = ShiftableClock(redis_url).now()
        began = time.monotonic()
        floor = (size + 0.0) / rate
        stop = threading.Event()
        burst: list[float] = []
        errors = 0

        def interactive() -> None:
            nonlocal errors
            while not stop.wait(0.5) and orgs:
                latency, status = create_account(stack, orgs.pop())
                burst.append(latency)
                errors += status != 200

        client = threading.Thread(target=interactive, daemon=True)
        client.start()
        previews: Counter[int] = Counter()
        flood = [
            threading.Thread(target=_preview_flood, args=(stack, target, stop, previews))
            for _ in range(8 if preview_flood else 0)
        ]
        for thread in flood:
            thread.start()
        deadline = began + max(cap * floor, 60.0)
        applied = 0
        while time.monotonic() < deadline:
            applied = count_in(stack, "staged", "applied")
            if applied >= size:
                break
            time.sleep(0.5)
        drain = time.monotonic() - began
        stop.set()
        client.join()
        for thread in flood:
            thread.join()
        floor = (size + len(burst)) / rate
        lags_rows = _made_at(stack)
        take_effect = 0.0
        if not late and applied >= size:
            stack.advance_time((boundary - ShiftableClock(redis_url).now()).total_seconds() + 5)
            started = time.monotonic()
            while count_in(stack, "applied") < size and time.monotonic() - started < 600:
                time.sleep(0.2)
            take_effect = time.monotonic() - started

        with stack.sessions() as session:
            rows = lags_rows
            failed = int(
                session.scalar(
                    select(func.count())
                    .select_from(CommandRow)
                    .where(CommandRow.status == "failed")
                )
                or 0
            )
            syncs = int(
                session.scalar(
                    select(func.count())
                    .select_from(CommandRow)
                    .where(CommandRow.type == "stripe.sync_object")
                )
                or 0
            )
        lags = [(at - due_at).total_seconds() for at, _ in rows if at is not None]
        if applied >= size and lags:
            # Drained when the last change was made at Stripe (its row's time, on the
            # system's clock), not at the poll that saw it.
            drain = max(lags)
        with stack.stripe as admin:
            requests = admin.requests()
        return Outcome(
            size=size,
            rate=rate,
            budget=budget,
            drained=applied >= size,
            applied=applied,
            drain_seconds=drain,
            floor_seconds=floor,
            lag_p50=percentile(lags, 0.5),
            lag_p99=percentile(lags, 0.99),
            rate_limited=sum(request.status == 429 for request in requests),
            stripe_calls=len(requests),
            failed=failed,
            reclaimed=sum(claims > 1 for _, claims in rows),
            take_effect_seconds=take_effect,
            idle_p50=statistics.median(idle),
            idle_p95=percentile(idle, 0.95),
            burst_p50=percentile(burst, 0.5),
            burst_p95=percentile(burst, 0.95),
            burst_errors=errors,
            stripe_events=stripe_events,
            syncs=syncs,
            preview_flood=preview_flood,
            previews=previews,
        )
    finally:
        stack.stop()
        emulator.stop()


@dataclass(frozen=True)
class Flooded:
    """A subscription of another organization and a client limited to that organization."""

    url: str
    plan: str
    auth: tuple[str, str]


def _flooded(stack: Stack, ctx: Services, starter: Plan, team: Plan) -> Flooded:
    sub = subscribe(ctx, new_account(ctx), starter)
    # Paid, so that it stays changeable over the jump (a send_invoice subscription unpaid past
    # its due date is past_due, and its previews a cheap 400): every preview is a whole one.
    pay_open_invoices(sdk_client(stack.stripe_url), sub.provider_id)
    grant = Grant(scopes=frozenset({Scope.SUBSCRIPTIONS_CHANGE}), org_ids=frozenset({sub.org_id}))
    client = stack.new_client("flooder", grant=grant)
    return Flooded(f"{sub.change_url}/preview", team.name, (client.client_id, client.secret))


def _preview_flood(
    stack: Stack, target: Flooded | None, stop: threading.Event, answers: Counter[int]
) -> None:
    """Synchronous previews, one after another, until ``stop``; a 429 is waited out."""
    assert target is not None
    with httpx.Client(base_url=stack.api_url, auth=target.auth, timeout=30) as http:
        while not stop.is_set():
            answer = http.post(target.url, json={"plan": target.plan})
            answers[answer.status_code] += 1
            if answer.status_code == 429:
                stop.wait(float(answer.headers.get("Retry-After", "1")))


BEAT_SWEEP = "Sending due task apply-due-plan-changes"
"""Beat's log line for each due-changes sweep it sends."""


def _made_at(stack: Stack) -> list[tuple[datetime | None, int]]:
    """When each change was made at Stripe (staged, or applied when late), with its claims."""
    with stack.sessions() as session:
        rows = session.execute(
            select(
                ScheduledChangeRow.updated_at,
                ScheduledChangeRow.claims,
                ScheduledChangeRow.state,
                ScheduledChangeRow.applied_at,
            )
        ).all()
    return [
        (applied_at if state == "applied" else updated_at, claims)
        for updated_at, claims, state, applied_at in rows
        if state in ("staged", "applied")
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--rates", default="25,100")
    parser.add_argument("--cap", type=float, default=3.0, help="stop a run after this many floors")
    parser.add_argument(
        "--late", action="store_true", help="jump over the boundaries (corrections)"
    )
    parser.add_argument(
        "--stripe-events",
        action="store_true",
        help="each size and rate without, then with, Stripe's own webhooks (budget on)",
    )
    parser.add_argument(
        "--preview-flood",
        action="store_true",
        help="each size and rate without, then with, one client's preview flood (budget on)",
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    rates = [int(rate) for rate in args.rates.split(",")]
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="bench-burst-") as tmp:
        workdir = Path(tmp)
        group = ProcessGroup()
        redis_base = start_redis(group, workdir / "redis").rsplit("/", 1)[0]
        try:
            for size in sizes:
                for rate in rates:
                    compared = args.stripe_events or args.preview_flood
                    # With a comparison: the budget on, without then with what is compared.
                    runs = (
                        [(True, False), (True, True)]
                        if compared
                        else [(True, False), (False, False)]
                    )
                    for budget, second in runs:
                        outcome = run(
                            *(workdir, redis_base, 3, size, rate, budget, args.cap, args.late),
                            stripe_events=second and args.stripe_events,
                            preview_flood=second and args.preview_flood,
                        )
                        outcomes.append(outcome)
                        print(f"  {outcome}", flush=True)
        finally:
            group.stop()
    print()
    print(
        "| N | Stripe rate | budget | drain ÷ floor | lag p50 / p99 | 429s (of calls) | failed "
        "| reclaimed | take effect | interactive p50 / p95 (idle p50 / p95) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for o in outcomes:
        drain = f"{o.drain_seconds / o.floor_seconds:.2f}" + (
            "" if o.drained else f" (stopped: {o.applied}/{o.size} applied)"
        )
        print(
            f"| {o.size:,} | {o.rate}/s | {'on' if o.budget else 'off'} | {drain} "
            f"({o.drain_seconds:.0f} s ÷ {o.floor_seconds:.0f} s) "
            f"| {o.lag_p50:.0f} s / {o.lag_p99:.0f} s | {o.rate_limited:,} ({o.stripe_calls:,}) "
            f"| {o.failed} | {o.reclaimed} | {o.take_effect_seconds:.1f} s "
            f"| {o.burst_p50 * 1000:.0f} / {o.burst_p95 * 1000:.0f} ms"
            + (f", {o.burst_errors} not 200" if o.burst_errors else "")
            + f" ({o.idle_p50 * 1000:.0f} / {o.idle_p95 * 1000:.0f} ms) |"
            + (f" Stripe's events: {o.syncs:,} syncs |" if o.stripe_events else "")
        )
    if args.stripe_events or args.preview_flood:
        what = "Stripe's events" if args.stripe_events else "one client's preview flood"
        print()
        print(f"| N | Stripe rate | drain with {what} ÷ without (target ≤ 1.10) |")
        print("|---|---|---|")
        for without, with_it in zip(outcomes[::2], outcomes[1::2], strict=True):
            extra = (
                f"{with_it.syncs:,} syncs"
                if args.stripe_events
                else f"previews answered {dict(sorted(with_it.previews.items()))}"
            )
            print(
                f"| {without.size:,} | {without.rate}/s "
                f"| {with_it.drain_seconds / without.drain_seconds:.2f} "
                f"({with_it.drain_seconds:.1f} s ÷ {without.drain_seconds:.1f} s, {extra}) |"
            )


if __name__ == "__main__":
    main()

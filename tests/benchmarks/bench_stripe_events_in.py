"""Stripe's events in: how fast the inbound endpoint accepts, and what the sweep reads.

Run: ``.venv/bin/python tests/benchmarks/bench_stripe_events_in.py [--events N] [--clients C]
[--sweep-rate R] [--sweep-seconds S]``

Starts the real system on embedded parts (Redis, SQLite, the Stripe emulator, one Celery
worker with two processes, beat, the API) and measures, in the same run:

1. **Inbound endpoint**: ``C`` HTTP clients post ``N`` signed Stripe events (each a distinct
   ``customer.subscription.updated``) to ``POST /webhooks/stripe``: accepted events per
   second (verified, joined to its subscription's waiting sync or recorded and published as
   a new one, 200), and the time until the worker has run every sync they made (coalesced
   per subscription: ``syncs_for_the_events`` says how many). **Baseline**: the same clients
   post ``N`` enable-user commands with ``Prefer: respond-async`` (recorded and published,
   202): the API's command path.
2. **Reconciliation sweep**: with webhooks silent, beat's sweep runs every second with
   ``R`` reads per second allowed: Stripe reads per second it made over ``S`` seconds
   (counted in the emulator's request log), beside ``R``, the budget it was given.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import redis
from sqlalchemy import func, select

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from adapters.clock import SystemClock  # noqa: E402
from adapters.db.migrate import upgrade  # noqa: E402
from adapters.db.models import CommandRow  # noqa: E402
from adapters.provider.stripe_adapter import StripeBillingProvider  # noqa: E402
from tests.support.emulator import EMULATOR_KEY, start_emulator  # noqa: E402
from tests.support.records import create_user, services_on  # noqa: E402
from tests.support.stack import Stack, stack_env  # noqa: E402
from tests.support.stripe_events import event, signature  # noqa: E402
from tests.support.subscriptions import new_account, new_plan, subscribe  # noqa: E402
from worker.local.embedded import ProcessGroup, start_redis  # noqa: E402


def hammer(clients: int, jobs: list[Callable[[httpx.Client], int]], stack: Stack) -> float:
    """Run ``jobs`` from ``clients`` threads with kept connections; returns the seconds."""
    lock = threading.Lock()
    queue = list(jobs)
    failures: list[str] = []

    def client() -> None:
        with stack.http() as http:
            while True:
                with lock:
                    if not queue:
                        return
                    job = queue.pop()
                status = job(http)
                if status not in (200, 202):
                    failures.append(str(status))

    began = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{len(failures)} requests failed: {failures[:5]}")
    return time.perf_counter() - began


def syncs(stack: Stack, *, unfinished: bool) -> int:
    """The syncs the events made (coalesced per subscription: fewer than the events), or
    those of them not finished yet."""
    query = select(func.count()).select_from(CommandRow).where(CommandRow.id.startswith("stripe:"))
    if unfinished:
        query = query.where(CommandRow.status.not_in(("succeeded", "failed", "rejected")))
    with stack.sessions() as session:
        return int(session.scalar(query) or 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--subscriptions", type=int, default=200)
    parser.add_argument("--sweep-rate", type=float, default=10.0)
    parser.add_argument("--sweep-seconds", type=float, default=30.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-stripe-in-") as tmp:
        base = Path(tmp)
        group = ProcessGroup()
        redis_url = start_redis(group, base / "redis")
        redis.Redis.from_url(redis_url).flushdb()
        database_url = f"sqlite:///{base / 'billing.db'}"
        upgrade(database_url)
        emulator = start_emulator(base / "emulator.log", "--rate-limit", "0")
        env = stack_env(
            database_url=database_url,
            redis_url=redis_url,
            data_dir=base,
            stripe_url=emulator.url,
            BILLING_LOG_LEVEL="WARNING",
            BILLING_RECONCILE_INTERVAL_SECONDS="1",
            BILLING_RECONCILE_READS_PER_SECOND=str(args.sweep_rate),
        )
        stack = Stack("bench", database_url, redis_url, base, env, stripe_url=emulator.url)
        try:
            ctx = services_on(
                stack.sessions, provider=StripeBillingProvider(EMULATOR_KEY, api_base=emulator.url)
            )
            plan = new_plan(ctx, "bench", 1000)
            account = new_account(ctx)
            subs = [subscribe(ctx, account, plan) for _ in range(args.subscriptions)]
            users = [
                create_user(
                    stack.sessions,
                    SystemClock(),
                    email=f"u{i}-{uuid.uuid4().hex}@x.io",
                    disabled=True,
                )
                for i in range(args.events)
            ]
            stack.start_worker("w1", concurrency=2)
            stack.start_api()
            stack.client = stack.new_client()

            def enable(user_id: str) -> Callable[[httpx.Client], int]:
                return lambda http: (
                    http.post(
                        f"/v1beta1/users/{user_id}/enable",
                        json={},
                        headers={"Prefer": "respond-async"},
                    ).status_code
                )

            baseline = hammer(args.clients, [enable(user.id) for user in users], stack)

            def deliver(index: int) -> Callable[[httpx.Client], int]:
                sub = subs[index % len(subs)]
                body = event(
                    "customer.subscription.updated",
                    {"id": sub.provider_id, "object": "subscription"},
                    f"evt_bench_{index}_{uuid.uuid4().hex[:8]}",
                )
                headers = {"Stripe-Signature": signature(body), "Content-Type": "application/json"}
                return lambda http: (
                    http.post("/webhooks/stripe", content=body, headers=headers).status_code
                )

            accepted = hammer(args.clients, [deliver(i) for i in range(args.events)], stack)
            began = time.perf_counter()
            while syncs(stack, unfinished=True) and time.perf_counter() - began < 600:
                time.sleep(0.5)
            processed = time.perf_counter() - began + accepted
            reads_made = syncs(stack, unfinished=False)

            with stack.stripe as admin:
                admin.clear_requests()
            stack.start_beat()
            time.sleep(args.sweep_seconds)
            with stack.stripe as admin:
                reads = [
                    request
                    for request in admin.requests(method="GET")
                    if request.path.startswith(("/v1/subscriptions/", "/v1/customers/"))
                ]
            if reads:
                span = max(r.wall_time for r in reads) - min(r.wall_time for r in reads)
                read_rate = (len(reads) - 1) / span if span > 0 else float("nan")
            else:
                read_rate = 0.0
        finally:
            stack.stop()
            emulator.stop()
            group.stop()
    figures = {
        "events": args.events,
        "clients": args.clients,
        "inbound_accepted_per_second": args.events / accepted,
        "enable_user_accepted_per_second": args.events / baseline,
        "inbound_processed_per_second": args.events / processed,
        "syncs_for_the_events": reads_made,
        "sweep_reads_per_second": read_rate,
        "sweep_budget_per_second": args.sweep_rate,
    }
    print(json.dumps(figures, indent=2))
    print()
    print("| figure | ours | baseline (same run) |")
    print("|---|---|---|")
    print(
        f"| Stripe events accepted at `POST /webhooks/stripe`, {args.clients} clients "
        f"| {figures['inbound_accepted_per_second']:.0f}/s "
        f"| enable-user commands accepted (`respond-async`): "
        f"{figures['enable_user_accepted_per_second']:.0f}/s |"
    )
    print(
        f"| Stripe events synced by the worker (re-read from Stripe) "
        f"| {figures['inbound_processed_per_second']:.0f}/s | - |"
    )
    print(
        f"| reconciliation sweep's Stripe reads | {read_rate:.1f}/s "
        f"| the budget it was given: {args.sweep_rate:.1f}/s |"
    )


if __name__ == "__main__":
    main()

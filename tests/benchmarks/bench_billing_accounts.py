"""Billing account creation end to end: accounts per second and latency.

Run: ``.venv/bin/python tests/benchmarks/bench_billing_accounts.py [--accounts N] [--clients C]``

Starts the real system on embedded parts (Redis, SQLite, the Stripe emulator, one Celery
worker with two processes, the API under uvicorn), then creates ``N`` billing accounts from
``C`` concurrent HTTP clients in synchronous mode (each request waits for its outcome):
online (HTTP → Redis → worker → Stripe customer → database → answer) and, as the baseline in
the same run, offline (the same path without the Stripe call). Prints throughput and latency
percentiles for each. Client, API, worker, Redis and emulator share the machine's cores.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from adapters.clock import SystemClock  # noqa: E402
from adapters.db.migrate import upgrade  # noqa: E402
from tests.support.emulator import start_emulator  # noqa: E402
from tests.support.records import create_organization  # noqa: E402
from tests.support.stack import Stack, stack_env  # noqa: E402
from worker.local.embedded import ProcessGroup, start_redis  # noqa: E402


def run(stack: Stack, org_ids: list[str], clients: int, offline: bool) -> tuple[float, list[float]]:
    latencies: list[float] = []
    lock = threading.Lock()
    queue = list(org_ids)

    def client() -> None:
        with stack.http() as http:
            while True:
                with lock:
                    if not queue:
                        return
                    org_id = queue.pop()
                started = time.perf_counter()
                response = http.post(
                    f"/v1beta1/organizations/{org_id}/billing",
                    json={
                        "body": {"name": "Bench", "email": "bench@example.com"},
                        "offline": offline,
                    },
                )
                elapsed = time.perf_counter() - started
                if response.status_code != 200:
                    raise RuntimeError(f"{response.status_code}: {response.text}")
                with lock:
                    latencies.append(elapsed)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, latencies


def report(label: str, seconds: float, latencies: list[float]) -> None:
    ordered = sorted(latencies)
    p50 = statistics.median(ordered) * 1000
    p95 = ordered[int(len(ordered) * 0.95) - 1] * 1000
    print(
        f"{label:<28} {len(ordered):>6} {seconds:>8.2f} {len(ordered) / seconds:>10.1f}"
        f" {p50:>9.1f} {p95:>9.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accounts", type=int, default=300)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-billing-") as tmp:
        workdir = Path(tmp)
        group = ProcessGroup()
        emulator = start_emulator(workdir / "emulator.log", "--rate-limit", "0")
        try:
            redis_url = start_redis(group, workdir / "redis", log_path=workdir / "redis.log")
            database_url = f"sqlite:///{workdir / 'bench.db'}"
            upgrade(database_url)
            env = stack_env(
                database_url=database_url,
                redis_url=redis_url,
                data_dir=workdir,
                stripe_url=emulator.url,
                BILLING_LOG_LEVEL="WARNING",
                BILLING_HTTP_WAIT_TIMEOUT_SECONDS="60",
            )
            stack = Stack(
                name="bench",
                database_url=database_url,
                redis_url=redis_url,
                workdir=workdir,
                env=env,
                stripe_url=emulator.url,
            )
            try:
                stack.start_worker(concurrency=2)
                stack.start_api()
                stack.client = stack.new_client()
                clock = SystemClock()

                def orgs(count: int) -> list[str]:
                    return [
                        create_organization(
                            stack.sessions, clock, name=f"bench-{uuid.uuid4().hex}"
                        ).id
                        for _ in range(count)
                    ]

                run(stack, orgs(20), args.clients, offline=True)  # warm up every process
                print(f"{args.accounts} accounts, {args.clients} concurrent clients, SQLite")
                print(
                    f"{'':<28} {'count':>6} {'seconds':>8} {'accounts/s':>10}"
                    f" {'p50 ms':>9} {'p95 ms':>9}"
                )
                seconds, latencies = run(stack, orgs(args.accounts), args.clients, offline=True)
                report("offline (baseline)", seconds, latencies)
                seconds, latencies = run(stack, orgs(args.accounts), args.clients, offline=False)
                report("online (Stripe emulator)", seconds, latencies)
            finally:
                stack.stop()
        finally:
            group.stop()
            emulator.stop()


if __name__ == "__main__":
    main()

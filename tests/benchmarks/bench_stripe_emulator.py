"""Throughput of the Stripe emulator: customer creates per second.

Run: ``.venv/bin/python tests/benchmarks/bench_stripe_emulator.py [--requests N] [--threads T]``

Starts the emulator as a subprocess (rate limit off, no faults), then creates customers through
the real ``stripe`` SDK from a few threads, and again with raw ``httpx`` (the SDK's own cost
taken out), and prints requests, seconds and requests per second for each. Client and server
share the machine's cores, as they do in the test suite. The target is >= 500 creates/s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import requests
import stripe  # noqa: TID251 - the benchmark drives the emulator through the real SDK

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from worker.local.embedded import free_port  # noqa: E402

API_KEY = "sk_test_emulator"


def start_emulator(port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "stripe_emulator", "--port", str(port), "--rate-limit", "0"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/_emulator/health", timeout=1).raise_for_status()
            return process
        except httpx.TransportError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the emulator did not start")


def run_threads(
    total: int, threads: int, make_worker: Callable[[], Callable[[int], None]]
) -> float:
    """Run ``total`` calls split over ``threads``; return the elapsed seconds."""
    per_thread = [
        total // threads + (1 if index < total % threads else 0) for index in range(threads)
    ]
    barrier = threading.Barrier(threads + 1)
    failures: list[BaseException] = []

    def body(count: int) -> None:
        call = make_worker()
        barrier.wait()
        try:
            for index in range(count):
                call(index)
        except BaseException as error:  # reported after the run
            failures.append(error)

    workers = [threading.Thread(target=body, args=(count,)) for count in per_thread]
    for worker in workers:
        worker.start()
    barrier.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} worker(s) failed") from failures[0]
    return elapsed


def sdk_worker(base_url: str, *, trust_env: bool = True) -> Callable[[], Callable[[int], None]]:
    """Creates through ``stripe.StripeClient``.

    With ``trust_env=False`` the SDK's requests session skips proxy discovery: requests
    otherwise rescans ``os.environ`` for proxy variables on every call, which on a machine with
    a large environment costs the client more CPU than the emulator spends on the request.
    """
    http_client = None
    if not trust_env:
        session = requests.Session()
        session.trust_env = False
        http_client = stripe.RequestsClient(session=session)
    client = stripe.StripeClient(
        API_KEY, base_addresses={"api": base_url}, max_network_retries=0, http_client=http_client
    )

    def make() -> Callable[[int], None]:
        def call(index: int) -> None:
            client.v1.customers.create(
                params={
                    "email": f"bench{index}@example.com",
                    "name": "Bench",
                    "metadata": {"i": str(index)},
                }
            )

        return call

    return make


def httpx_worker(base_url: str) -> Callable[[], Callable[[int], None]]:
    def make() -> Callable[[int], None]:
        http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {API_KEY}"})

        def call(index: int) -> None:
            response = http.post(
                "/v1/customers",
                content=f"email=bench{index}%40example.com&name=Bench&metadata[i]={index}",
                headers={
                    "Content-Type": "application/x-www-form-urlencoded",
                    "Idempotency-Key": str(uuid.uuid4()),  # as the SDK sends on every POST
                },
            )
            if response.status_code != 200:
                raise RuntimeError(f"{response.status_code}: {response.text}")

        return call

    return make


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="creates per scenario")
    parser.add_argument("--threads", type=int, default=3)
    args = parser.parse_args()

    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    process = start_emulator(port)
    try:
        run_threads(200, args.threads, sdk_worker(base_url))  # warm-up (imports, connections)
        rows = []
        for label, make in (
            (f"stripe SDK, {args.threads} threads", sdk_worker(base_url)),
            ("  same, no proxy env scan", sdk_worker(base_url, trust_env=False)),
            (f"raw httpx, {args.threads} threads", httpx_worker(base_url)),
        ):
            seconds = run_threads(args.requests, args.threads, make)
            rows.append((label, args.requests, seconds, args.requests / seconds))
    finally:
        process.terminate()
        process.wait(timeout=10)

    print(
        f"Stripe emulator: POST /v1/customers ({os.cpu_count()} CPUs, client and server share them)"
    )
    print(f"{'scenario':<28} {'requests':>9} {'seconds':>9} {'req/s':>9}")
    for label, count, seconds, rate in rows:
        print(f"{label:<28} {count:>9} {seconds:>9.2f} {rate:>9.0f}")


if __name__ == "__main__":
    main()

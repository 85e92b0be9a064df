"""A valid client's latency while 16 threads send wrong secrets.

Run: ``.venv/bin/python tests/benchmarks/bench_auth_flood.py [--seconds 10]``

Starts the API on embedded parts (Redis, SQLite; no worker is needed for
``GET /v1beta1/commands/{id}``, which answers 404 from the database), then measures a valid,
already verified client's request latency: idle (the baseline), and during a flood of 16
threads of wrong secrets for random client ids, twice: with the API's defaults (failures
throttled per source, at most 2 slow hashes at once), and with the throttle lifted (only the
cap on concurrent hashes protects). Also the first request of a valid client that is not
verified yet (it needs the slow hash), idle and under each flood. The flood comes from
127.0.0.2, the valid clients from 127.0.0.1: sources take turns at the hashes, so the new
client waits for the hashes under way and one of the flood's turns, not the flood's queue.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from adapters.db.migrate import upgrade  # noqa: E402
from tests.support.stack import Stack, stack_env  # noqa: E402
from worker.local.embedded import ProcessGroup, start_redis  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latencies(stack: Stack, seconds: float) -> list[float]:
    measured: list[float] = []
    deadline = time.monotonic() + seconds
    with stack.http() as http:
        while time.monotonic() < deadline:
            began = time.perf_counter()
            assert http.get(f"/v1beta1/commands/{uuid.uuid4()}").status_code == 404
            measured.append(time.perf_counter() - began)
            time.sleep(0.02)
    return measured


def first_request(stack: Stack) -> tuple[float, int]:
    """A new valid client's first request (from 127.0.0.1, another source than the flood's)."""
    client = stack.new_client(f"fresh-{uuid.uuid4().hex[:6]}")
    with stack.http(client) as http:
        began = time.perf_counter()
        status = http.get(f"/v1beta1/commands/{uuid.uuid4()}").status_code
        return time.perf_counter() - began, status


def flood(api_url: str, seconds: float, answers: Any) -> None:
    """16 threads of wrong secrets from 127.0.0.2, in a process of their own (not sharing the
    measuring client's interpreter lock)."""
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def attacker() -> None:
        transport = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(base_url=api_url, timeout=30, transport=transport) as http:
            while time.monotonic() < deadline:
                response = http.get(
                    "/v1beta1/commands/x", auth=(f"cli_{uuid.uuid4().hex[:16]}", "wrong")
                )
                with lock:
                    statuses[response.status_code] += 1

    threads = [threading.Thread(target=attacker) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    answers.put(dict(statuses))


def measure(stack: Stack, seconds: float) -> tuple[list[float], tuple[float, int], Counter[int]]:
    answers: Any = multiprocessing.Queue()
    attackers = multiprocessing.Process(target=flood, args=(stack.api_url, seconds + 3.0, answers))
    attackers.start()
    time.sleep(1.0)  # the flood under way
    measured, first = latencies(stack, seconds), first_request(stack)
    statuses: Counter[int] = Counter(answers.get(timeout=60))
    attackers.join()
    return measured, first, statuses


def row(name: str, values: list[float], first: tuple[float, int]) -> str:
    seconds, status = first
    return (
        f"| {name} | {statistics.median(values) * 1000:.1f} ms | "
        f"{percentile(values, 0.95) * 1000:.1f} ms | {seconds * 1000:.0f} ms ({status}) |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-auth-") as tmp:
        workdir = Path(tmp)
        group = ProcessGroup()
        redis_url = start_redis(group, workdir / "redis")
        database_url = f"sqlite:///{workdir / 'billing.db'}"
        upgrade(database_url)
        results = []
        try:
            for name, overrides in (
                ("defaults", {}),
                ("throttle lifted", {"BILLING_AUTH_MAX_FAILURES_PER_SOURCE": "100000000"}),
            ):
                env = stack_env(
                    database_url=database_url, redis_url=redis_url, data_dir=workdir, **overrides
                )
                env["BILLING_AUTH_MAX_FAILURES_PER_SOURCE"] = overrides.get(
                    "BILLING_AUTH_MAX_FAILURES_PER_SOURCE", "30"
                )
                stack = Stack(name, database_url, redis_url, workdir, env)
                stack.start_api()
                stack.client = stack.new_client()
                try:
                    idle, idle_first = latencies(stack, args.seconds), first_request(stack)
                    flooded, flooded_first, statuses = measure(stack, args.seconds)
                finally:
                    stack.stop()
                results.append((name, idle, idle_first, flooded, flooded_first, statuses))
        finally:
            group.stop()
    print(
        "| API settings, valid client | p50 | p95 "
        "| a new client's first request (status), from another source than the flood's |"
    )
    print("|---|---|---|---|")
    for name, idle, idle_first, flooded, flooded_first, statuses in results:
        print(row(f"{name}: idle (baseline)", idle, idle_first))
        print(row(f"{name}: 16-thread flood of wrong secrets", flooded, flooded_first))
        print(f"|   flood answers: {dict(statuses)} | | | |")


if __name__ == "__main__":
    main()

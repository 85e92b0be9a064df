"""Another client's synchronous preview while one client floods previews of made-up
organizations (issue 42: a fair share nobody can multiply).

Run: ``python3 -m worker.dev bench made-up-flood`` (``--seconds 40`` each phase, the default)

Starts the system on embedded parts (Redis, SQLite, a worker, the API, the Stripe emulator),
subscribes one organization, then measures a client's synchronous plan-change preview of it
(``POST …/change/preview``, answered once the worker has asked the emulator): idle (the
baseline), and while another client sends previews naming made-up organizations from 8
threads, in a process of its own. Twice: with the API's defaults (a client's refusals past its
first few a minute are held a second, ``BILLING_AUTH_THROTTLED_HOLD_SECONDS``) and with the
hold lifted (0 s: every refusal sent at once, as before the hold). Every share is at its
default, so the flood also shows that made-up ids take nothing from anyone's share.
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
from tests.benchmarks.figures import percentile  # noqa: E402
from tests.support.emulator import start_emulator  # noqa: E402
from tests.support.stack import Stack, stack_env  # noqa: E402
from tests.support.subscriptions import new_account, new_plan, operator, subscribe  # noqa: E402
from worker.local.embedded import ProcessGroup, start_redis  # noqa: E402
from worker.settings import Settings  # noqa: E402

SHARES = (
    "client_commands_per_second",
    "client_command_burst",
    "client_total_commands_per_second",
    "client_total_command_burst",
)
DEFAULTS = {f"BILLING_{name.upper()}": str(Settings.model_fields[name].default) for name in SHARES}
FLOOD_THREADS = 8


def previews(stack: Stack, path: str, plan: str, seconds: float) -> list[float]:
    """The latencies of synchronous previews, one after another, for ``seconds``. Each stays
    within the client's share for its organization (one a second, a burst of 20)."""
    measured: list[float] = []
    deadline = time.monotonic() + seconds
    with stack.http() as http:
        while time.monotonic() < deadline:
            began = time.perf_counter()
            answer = http.post(path, json={"plan": plan})
            assert answer.status_code == 200, answer.text
            measured.append(time.perf_counter() - began)
            time.sleep(max(0.0, 1.05 - (time.perf_counter() - began)))
    return measured


def flood(api_url: str, auth: tuple[str, str], seconds: float, answers: Any) -> None:
    """Previews of made-up organizations from ``FLOOD_THREADS`` threads."""
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def flooder() -> None:
        with httpx.Client(base_url=api_url, timeout=30, auth=auth) as http:
            while time.monotonic() < deadline:
                org = f"org_made_up_{uuid.uuid4().hex[:12]}"
                path = (
                    f"/v1beta1/organizations/{org}/billing/ba_x/subscriptions/sub_x/change/preview"
                )
                status = http.post(path, json={"plan": "team"}).status_code
                with lock:
                    statuses[status] += 1

    threads = [threading.Thread(target=flooder) for _ in range(FLOOD_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    answers.put(dict(statuses))


def row(name: str, values: list[float]) -> str:
    return (
        f"| {name} | {len(values)} | {statistics.median(values) * 1000:.1f} ms | "
        f"{percentile(values, 0.95) * 1000:.1f} ms |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    args = parser.parse_args()
    results: list[tuple[str, list[float], list[float], Counter[int], float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-made-up-") as tmp:
        workdir = Path(tmp)
        group = ProcessGroup()
        redis_url = start_redis(group, workdir / "redis")
        emulator = start_emulator(workdir / "stripe-emulator.log", "--rate-limit", "0")
        try:
            for name, hold in (("defaults", None), ("hold lifted", "0")):
                database_url = f"sqlite:///{workdir / f'billing-{len(results)}.db'}"
                upgrade(database_url)
                overrides = {**DEFAULTS}
                if hold is not None:
                    overrides["BILLING_AUTH_THROTTLED_HOLD_SECONDS"] = hold
                env = stack_env(
                    database_url=database_url,
                    redis_url=redis_url,
                    data_dir=workdir,
                    stripe_url=emulator.url,
                    **overrides,
                )
                stack = Stack(name, database_url, redis_url, workdir, env, stripe_url=emulator.url)
                stack.start_worker()
                stack.start_api()
                stack.client = stack.new_client()
                try:
                    ctx = operator(stack)
                    target = subscribe(ctx, new_account(ctx), new_plan(ctx, "bench", 900))
                    to_plan = new_plan(ctx, "bench-to", 2900).name
                    path = f"{target.change_url}/preview"
                    previews(stack, path, to_plan, 3.0)  # warm: the worker, the emulator
                    idle = previews(stack, path, to_plan, args.seconds)
                    flooder = stack.new_client(f"flooder-{uuid.uuid4().hex[:6]}")
                    answers: Any = multiprocessing.Queue()
                    attackers = multiprocessing.Process(
                        target=flood,
                        args=(
                            stack.api_url,
                            (flooder.client_id, flooder.secret),
                            args.seconds + 4.0,
                            answers,
                        ),
                    )
                    attackers.start()
                    time.sleep(2.0)  # the flood under way, past its free refusals
                    flooded = previews(stack, path, to_plan, args.seconds)
                    statuses: Counter[int] = Counter(answers.get(timeout=120))
                    attackers.join()
                finally:
                    stack.stop()
                results.append((name, idle, flooded, statuses, args.seconds + 4.0))
        finally:
            emulator.stop()
            group.stop()
    print("| API settings: another client's synchronous preview | previews | p50 | p95 |")
    print("|---|---|---|---|")
    for name, idle, flooded, statuses, flood_seconds in results:
        print(row(f"{name}: idle (baseline)", idle))
        print(row(f"{name}: {FLOOD_THREADS}-thread flood of made-up organizations", flooded))
        rate = sum(statuses.values()) / flood_seconds
        print(f"|   flood answers: {dict(statuses)}, {rate:.0f} a second | | | |")
        ratio = statistics.median(flooded) / statistics.median(idle)
        print(f"|   p50 flooded ÷ idle: {ratio:.2f} | | | |")


if __name__ == "__main__":
    main()

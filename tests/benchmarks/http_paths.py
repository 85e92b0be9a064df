"""The API's command path: P2 (``Prefer: respond-async`` accepts beside raw publishes), the
same accepts through one and two API processes, and P3 (the synchronous round trip beside
raw Celery's, and 8 synchronous clients beside one)."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from tests.benchmarks.figures import Figure, Target, percentile
from tests.benchmarks.harness import BenchContext, another_service, bare_worker, seed_users, system
from tests.support.stack import Stack

CLIENTS = 8


@dataclass
class Requests:
    """``count`` requests sent in ``seconds``: their latencies and answers' statuses."""

    seconds: float
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds > 0 else float("nan")

    def details(self, expected: int) -> dict[str, object]:
        return {
            "count": len(self.latencies),
            "seconds": round(self.seconds, 4),
            "p50_ms": round(1000 * percentile(self.latencies, 0.5), 3),
            "p99_ms": round(1000 * percentile(self.latencies, 0.99), 3),
            "errors": sum(n for status, n in self.statuses.items() if status != expected),
            "statuses": {str(status): n for status, n in self.statuses.items()},
        }


def enable_over_http(
    stack: Stack, user_ids: Sequence[str], clients: int, *, respond_async: bool
) -> Requests:
    """``clients`` threads, each with one kept connection, enable the users in turn."""
    queue = list(user_ids)
    lock = threading.Lock()
    outcome = Requests(0.0)
    headers = {"Prefer": "respond-async"} if respond_async else {}

    def client() -> None:
        with stack.http() as http:
            while True:
                with lock:
                    if not queue:
                        return
                    user_id = queue.pop()
                began = time.perf_counter()
                status = http.post(f"/v1beta1/users/{user_id}/enable", json={}, headers=headers)
                latency = time.perf_counter() - began
                with lock:
                    outcome.latencies.append(latency)
                    outcome.statuses[status.status_code] += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outcome.seconds = time.perf_counter() - started
    return outcome


def raw_publishes(redis_url: str, count: int, clients: int) -> Requests:
    """``clients`` threads publish ``count`` enable-user messages with one plain Celery
    client (nothing consumes them)."""
    app = another_service(redis_url)
    app.send_task("users.enable", kwargs={"user_id": "usr_warm"}, queue="users")
    remaining = [count]
    lock = threading.Lock()
    outcome = Requests(0.0)

    def client() -> None:
        while True:
            with lock:
                if not remaining[0]:
                    return
                remaining[0] -= 1
            began = time.perf_counter()
            app.send_task(
                "users.enable",
                kwargs={"command_id": str(uuid.uuid4()), "user_id": "usr_raw"},
                queue="users",
            )
            latency = time.perf_counter() - began
            with lock:
                outcome.latencies.append(latency)
                outcome.statuses[0] += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outcome.seconds = time.perf_counter() - started
    app.close()
    return outcome


def p2(ctx: BenchContext) -> list[Figure]:
    """HTTP ``Prefer: respond-async`` accepts/s (8 clients, kept connections) ÷ raw
    publishes/s (8 threads calling ``send_task``). No worker runs during either: the API's
    accept path alone (record, publish, answer 202), on SQLite."""
    count, warm_up = ctx.size(200, 3000), ctx.size(20, 200)
    accepted = accepts(ctx, "p2", count, warm_up, processes=1)
    raw = raw_publishes(ctx.redis_url(), count, CLIENTS)
    return [
        Figure(
            "p2",
            "respond-async accepts/s, 8 clients (SQLite)",
            accepted.rate,
            "/s",
            raw.rate,
            "raw publishes/s, 8 threads",
            # One process, for the record: issue 34's target (0.35) is for the API's
            # processes the machine allows, two on two cores: ``api-processes.2``.
            None,
            also_required=accepted.statuses[202] == count,
            details={"ours": accepted.details(202), "baseline": raw.details(0)},
        )
    ]


def api_processes(ctx: BenchContext) -> list[Figure]:
    """P2's accepts/s (respond-async, 8 clients, kept connections, no worker) through an API
    of one process, then of two on one port (``billing-worker api --workers 2``), each
    beside P2's baseline measured in the same run: raw publishes/s, 8 threads. On PostgreSQL,
    where two processes can record commands at once (SQLite writes one at a time)."""
    count, warm_up = ctx.size(200, 3000), ctx.size(20, 200)
    one = accepts(ctx, "api-processes1", count, warm_up, processes=1, backend="postgresql")
    two = accepts(ctx, "api-processes2", count, warm_up, processes=2, backend="postgresql")
    raw = raw_publishes(ctx.redis_url(), count, CLIENTS)
    # Issue 34's P2 target, for the processes the machine allows: two on two cores. One
    # process has none here: what a second gains depends on a core being free for it (the
    # clients and PostgreSQL run on the same machine).
    return [
        Figure(
            f"api-processes.{processes}",
            f"respond-async accepts/s, 8 clients, {processes} API process"
            f"{'es' if processes > 1 else ''} (PostgreSQL)",
            accepted.rate,
            "/s",
            raw.rate,
            "raw publishes/s, 8 threads",
            Target(">=", 0.35, text="ratio ≥ 0.35") if processes == 2 else None,
            also_required=accepted.statuses[202] == count,
            details={
                "ours": accepted.details(202),
                "baseline": raw.details(0),
                "two_over_one": round(two.rate / one.rate, 3) if one.rate else None,
            },
        )
        for processes, accepted in ((1, one), (2, two))
    ]


def accepts(
    ctx: BenchContext,
    name: str,
    count: int,
    warm_up: int,
    processes: int,
    backend: str = "sqlite",
    settings: dict[str, str] | None = None,
) -> Requests:
    """``count`` respond-async enables (after ``warm_up`` more) from 8 clients, on an API of
    ``processes`` processes and no worker, with ``settings`` in its environment."""
    with system(ctx, name, backend, settings=settings) as stack:
        stack.start_api(processes=processes)
        stack.client = stack.new_client()
        users = seed_users(stack, warm_up + count)
        enable_over_http(stack, users[:warm_up], CLIENTS, respond_async=True)
        return enable_over_http(stack, users[warm_up:], CLIENTS, respond_async=True)


def p3(ctx: BenchContext) -> list[Figure]:
    """The synchronous HTTP enable (one client) p50/p99 beside raw Celery's round trip (a
    no-op task sent, its result awaited); and 8 synchronous clients' rate ÷ one client's.
    Two worker processes, SQLite."""
    one, eight, warm_up = ctx.size(50, 1000), ctx.size(100, 2000), ctx.size(10, 100)
    with bare_worker(ctx) as bare:
        for _ in range(warm_up):
            bare.round_trip()
        raw = [bare.round_trip() for _ in range(one)]
    with system(ctx, "p3") as stack:
        stack.start_worker()
        stack.start_api()
        stack.client = stack.new_client()
        users = seed_users(stack, warm_up + one + eight)
        enable_over_http(stack, users[:warm_up], 1, respond_async=False)
        single = enable_over_http(stack, users[warm_up : warm_up + one], 1, respond_async=False)
        many = enable_over_http(stack, users[warm_up + one :], CLIENTS, respond_async=False)
    raw_details = {
        "count": len(raw),
        "p50_ms": round(1000 * percentile(raw, 0.5), 3),
        "p99_ms": round(1000 * percentile(raw, 0.99), 3),
    }
    ok = single.statuses[200] == one and many.statuses[200] == eight
    details = {"ours": single.details(200), "baseline": raw_details}
    return [
        Figure(
            "p3.p50",
            "synchronous HTTP enable, one client, p50",
            1000 * percentile(single.latencies, 0.5),
            "ms",
            1000 * percentile(raw, 0.5),
            "raw Celery round trip p50",
            Target("<=", 5.0, on="difference", text="≤ 5 ms over raw Celery"),
            also_required=ok,
            details=details,
        ),
        Figure(
            "p3.p99",
            "synchronous HTTP enable, one client, p99",
            1000 * percentile(single.latencies, 0.99),
            "ms",
            1000 * percentile(raw, 0.99),
            "raw Celery round trip p99",
            details=details,
            shown="difference",
        ),
        Figure(
            "p3.clients8",
            "synchronous enables/s, 8 clients",
            many.rate,
            "/s",
            single.rate,
            "one client's rate",
            Target(">=", 5.0, text="≥ 5 x one client"),
            also_required=ok,
            details={"eight": many.details(200), "one": single.details(200)},
        ),
    ]

"""Events out: how long after a command its event reaches a stream consumer and a webhook.

Run: ``.venv/bin/python tests/benchmarks/bench_events.py [--users N] [--clients C]``

Starts the real system on embedded parts (Redis, SQLite, one Celery worker with two
processes, beat, the API), registers one webhook endpoint (a receiver in this process that
verifies every signature with ``standardwebhooks``) and one stream consumer group, then
enables ``N`` users from ``C`` concurrent HTTP clients in synchronous mode. For each command
it measures, from the moment its request was sent: the HTTP answer (the baseline: the command
itself, done and recorded), the event read from the stream, and the signed webhook received.
Prints p50/p95/max of each, the events per second delivered, and anything lost or doubled.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import redis
from standardwebhooks import Webhook

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from adapters.clock import SystemClock  # noqa: E402
from adapters.db.migrate import upgrade  # noqa: E402
from adapters.db.uow import SqlUnitOfWork  # noqa: E402
from domain.webhooks import WebhookEndpoint  # noqa: E402
from tests.support.events import STREAM, stream_entries  # noqa: E402
from tests.support.records import create_user  # noqa: E402
from tests.support.stack import Stack, stack_env  # noqa: E402
from worker.local.embedded import ProcessGroup, free_port, start_redis  # noqa: E402


class Arrivals:
    """When each subject's event arrived, by channel; and how often."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.first: dict[str, float] = {}
        self.count: dict[str, int] = {}

    def saw(self, subject_id: str) -> None:
        now = time.perf_counter()
        with self.lock:
            self.first.setdefault(subject_id, now)
            self.count[subject_id] = self.count.get(subject_id, 0) + 1


def receiver(secret: str, arrivals: Arrivals) -> ThreadingHTTPServer:
    webhook = Webhook(secret)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            event: dict[str, Any] = webhook.verify(body, dict(self.headers))
            if event["type"] == "user.enabled":
                arrivals.saw(event["subject"]["id"])
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def consume(redis_url: str, arrivals: Arrivals, stop: threading.Event) -> None:
    client = redis.Redis.from_url(redis_url)
    client.xgroup_create(STREAM, "bench", id="$", mkstream=True)
    while not stop.is_set():
        answer = client.xreadgroup("bench", "c1", {STREAM: ">"}, count=500, block=200)
        for entry_id, fields in stream_entries(answer):
            event = json.loads(fields[b"event"])
            if event["type"] == "user.enabled":
                arrivals.saw(event["subject"]["id"])
            client.xack(STREAM, "bench", entry_id)


def enable_all(
    stack: Stack, user_ids: list[str], clients: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Each user's request start and answer times (``perf_counter``)."""
    sent: dict[str, float] = {}
    answered: dict[str, float] = {}
    lock = threading.Lock()
    queue = list(user_ids)

    def client() -> None:
        with stack.http() as http:
            while True:
                with lock:
                    if not queue:
                        return
                    user_id = queue.pop()
                    sent[user_id] = time.perf_counter()
                response = http.post(f"/v1beta1/users/{user_id}/enable", json={})
                if response.status_code != 200:
                    raise RuntimeError(f"{response.status_code}: {response.text}")
                with lock:
                    answered[user_id] = time.perf_counter()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sent, answered


def report(label: str, sent: dict[str, float], arrived: dict[str, float]) -> None:
    delays = sorted((arrived[key] - sent[key]) * 1000 for key in sent if key in arrived)
    if not delays:
        print(f"{label:<34} nothing arrived")
        return
    p95 = delays[max(0, int(len(delays) * 0.95) - 1)]
    print(
        f"{label:<34} {len(delays):>6} {statistics.median(delays):>9.1f} {p95:>9.1f}"
        f" {delays[-1]:>9.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=500)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--wait", type=float, default=60.0, help="seconds to wait for stragglers")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-events-") as tmp:
        workdir = Path(tmp)
        group = ProcessGroup()
        try:
            redis_url = start_redis(group, workdir / "redis", log_path=workdir / "redis.log")
            database_url = f"sqlite:///{workdir / 'bench.db'}"
            upgrade(database_url)
            env = stack_env(
                database_url=database_url,
                redis_url=redis_url,
                data_dir=workdir,
                BILLING_LOG_LEVEL="WARNING",
                BILLING_HTTP_WAIT_TIMEOUT_SECONDS="60",
            )
            stack = Stack(
                name="bench",
                database_url=database_url,
                redis_url=redis_url,
                workdir=workdir,
                env=env,
            )
            webhook_arrivals, stream_arrivals = Arrivals(), Arrivals()
            stop = threading.Event()
            try:
                stack.start_worker(concurrency=2)
                stack.start_beat()
                stack.start_api()
                stack.client = stack.new_client()
                clock = SystemClock()
                endpoint = WebhookEndpoint.new("http://127.0.0.1:1/hook", ["*"], clock.now())
                server = receiver(endpoint.secret, webhook_arrivals)
                endpoint.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
                with SqlUnitOfWork(stack.sessions) as uow:
                    uow.webhook_endpoints.add(endpoint)
                    uow.commit()
                consumer = threading.Thread(
                    target=consume, args=(redis_url, stream_arrivals, stop), daemon=True
                )
                consumer.start()

                def users(count: int) -> list[str]:
                    return [
                        str(
                            create_user(
                                stack.sessions,
                                clock,
                                email=f"{uuid.uuid4().hex}@x.io",
                                disabled=True,
                            ).id
                        )
                        for _ in range(count)
                    ]

                enable_all(stack, users(20), args.clients)  # warm up every process
                ids = users(args.users)
                started = time.perf_counter()
                sent, answered = enable_all(stack, ids, args.clients)
                deadline = time.perf_counter() + args.wait
                while time.perf_counter() < deadline and not (
                    set(ids) <= set(webhook_arrivals.first)
                    and set(ids) <= set(stream_arrivals.first)
                ):
                    time.sleep(0.1)
                last = max([*webhook_arrivals.first.values(), *stream_arrivals.first.values()])
                print(f"{args.users} users enabled by {args.clients} concurrent clients, SQLite")
                print(
                    f"{'from the request to':<34} {'count':>6} {'p50 ms':>9} {'p95 ms':>9}"
                    f" {'max ms':>9}"
                )
                report("the HTTP answer (baseline)", sent, answered)
                report("the event on the stream", sent, stream_arrivals.first)
                report("the signed webhook received", sent, webhook_arrivals.first)
                print(
                    "events/s delivered (first request → last event): "
                    f"{args.users / (last - started):.1f}"
                )
                for label, arrivals in (("stream", stream_arrivals), ("webhook", webhook_arrivals)):
                    missing = len(set(ids) - set(arrivals.first))
                    doubled = sum(1 for key in ids if arrivals.count.get(key, 0) > 1)
                    print(f"{label}: {missing} missing, {doubled} received more than once")
            finally:
                stop.set()
                stack.stop()
        finally:
            group.stop()


if __name__ == "__main__":
    main()

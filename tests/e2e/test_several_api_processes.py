"""Two API processes on one port, started by the real launcher (`billing-worker api
--workers 2`) beside the stack's worker, on SQLite and PostgreSQL: both answer commands, one
scrape of ``/metrics`` counts every request whichever process answered it, and the
failed-authentication throttle trips after the same number of failures as with one process.

Which process answered what is read from the metrics' per-process files
(prometheus-client's multiprocess mode writes one per process id)."""

from __future__ import annotations

import os
import signal
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from adapters.clock import SystemClock
from tests.e2e.test_authentication_bursts import burst
from tests.support.records import create_user, user_state
from tests.support.stack import Stack, eventually
from worker.local.embedded import ProcessGroup, free_port

pytestmark = pytest.mark.e2e

ENABLE_ROUTE = "/v1beta1/users/{id}/enable"
FAILURES_PER_CLIENT = 10  # BILLING_AUTH_MAX_FAILURES_PER_SOURCE_AND_CLIENT's default


@dataclass
class TwoProcesses:
    url: str
    supervisor_pid: int
    metrics_dir: Path

    def processes(self) -> set[int]:
        """The API processes the supervisor runs now (not multiprocessing's resource
        tracker, its other child)."""
        children = Path(f"/proc/{self.supervisor_pid}/task/{self.supervisor_pid}/children")
        pids = [int(pid) for pid in children.read_text().split()]
        return {pid for pid in pids if b"multiprocessing.spawn" in _command_line(pid)}

    def served(self, counter: str, **labels: str) -> dict[int, float]:
        """Per API process id, the value of ``counter`` it wrote (its own file)."""
        values: dict[int, float] = {}
        for file in self.metrics_dir.glob("counter_*.db"):
            pid = int(file.stem.rsplit("_", 1)[1])
            merged = MultiProcessCollector.merge([str(file)], accumulate=True)  # type: ignore[no-untyped-call]
            for family in merged:
                for sample in family.samples:
                    if (
                        sample.name == f"{counter}_total"
                        and labels.items() <= sample.labels.items()
                    ):
                        values[pid] = values.get(pid, 0.0) + sample.value
        return values


@pytest.fixture(scope="module")
def two_processes(stack: Stack) -> Iterator[TwoProcesses]:
    """``billing-worker api --workers 2`` on one port, with the stack's database, Redis and
    settings; its metrics in the launcher's default directory."""
    port = free_port()
    metrics_dir = stack.workdir / "metrics" / f"api-{port}"
    metrics_dir.mkdir(parents=True, exist_ok=True)
    (metrics_dir / "counter_1.db").write_bytes(b"an earlier run's values")
    group = ProcessGroup()
    launcher = group.start(
        "api-two-processes",
        [sys.executable, "-m", "worker.cli", "api", "--workers", "2", "--port", str(port)],
        env={**stack.env, "BILLING_API_HOST": "127.0.0.1"},
        log_path=stack.workdir / "api-two-processes.log",
    )
    url = f"http://127.0.0.1:{port}"
    try:
        eventually(lambda: _answers(f"{url}/healthz"), 60, "two API processes")
        yield TwoProcesses(url, launcher.pid, metrics_dir)
    finally:
        group.stop()


def _command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return b""


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def enable_on_a_new_connection(stack: Stack, url: str, user_id: str) -> httpx.Response:
    """Each request on a connection of its own: the kernel hands each to either process."""
    assert stack.client is not None
    with httpx.Client(
        base_url=url, auth=(stack.client.client_id, stack.client.secret), timeout=60
    ) as http:
        return http.post(f"/v1beta1/users/{user_id}/enable", json={})


def test_two_processes_answer_every_command_and_one_scrape_counts_all_their_requests(
    stack: Stack, two_processes: TwoProcesses
) -> None:
    responses: dict[str, httpx.Response] = {}

    def send_batch() -> bool:
        users = [
            str(
                create_user(
                    stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@ex.com", disabled=True
                ).id
            )
            for _ in range(20)
        ]
        with ThreadPoolExecutor(8) as pool:
            answers = pool.map(
                lambda user_id: enable_on_a_new_connection(stack, two_processes.url, user_id),
                users,
            )
            responses.update(zip(users, answers, strict=True))
        served = two_processes.served("billing_http_requests", route=ENABLE_ROUTE)
        return len([pid for pid, count in served.items() if count > 0]) >= 2

    # Batches until both processes have answered some (a few batches at most).
    eventually(send_batch, 120, "requests answered by both processes", interval=0)

    for user_id, response in responses.items():
        assert (response.status_code, response.json()) == (200, {}), response.text
        assert stack.command(response.headers["Command-Id"]).status.value == "succeeded"
        assert user_state(stack.sessions, user_id) == "enabled"
    served = two_processes.served(
        "billing_http_requests", route=ENABLE_ROUTE, method="POST", status="200"
    )
    assert len(served) == 2
    assert two_processes.supervisor_pid not in served
    scraped = httpx.get(f"{two_processes.url}/metrics", timeout=10).text
    counted = sum(
        sample.value
        for family in text_string_to_metric_families(scraped)
        for sample in family.samples
        if sample.name == "billing_http_requests_total"
        and sample.labels == {"route": ENABLE_ROUTE, "method": "POST", "status": "200"}
    )
    timed = sum(
        sample.value
        for family in text_string_to_metric_families(scraped)
        for sample in family.samples
        if sample.name == "billing_http_request_seconds_count"
        and sample.labels == {"route": ENABLE_ROUTE, "method": "POST"}
    )
    assert counted == timed == len(responses) == sum(served.values())


def test_values_an_earlier_run_left_in_the_metrics_directory_are_not_added(
    two_processes: TwoProcesses,
) -> None:
    assert not (two_processes.metrics_dir / "counter_1.db").exists()
    assert httpx.get(f"{two_processes.url}/metrics", timeout=10).status_code == 200


def test_guesses_spread_over_both_processes_trip_the_throttle_after_the_same_failures(
    stack: Stack, two_processes: TwoProcesses
) -> None:
    target = Stack(stack.name, stack.database_url, stack.redis_url, stack.workdir, stack.env)
    target.api_url = two_processes.url

    def guesses_reached_both_processes() -> bool:
        victim = stack.new_client(f"guessed-{uuid.uuid4().hex[:6]}")
        before = two_processes.served("billing_api_client_verifications", outcome="invalid")
        # Twenty wrong secrets at once, each on a connection of its own, from a source of
        # its own (the per-source limit is out of the way in tests).
        statuses = burst(target, [(victim.client_id, f"guess-{n}") for n in range(20)], "127.0.0.5")
        after = two_processes.served("billing_api_client_verifications", outcome="invalid")
        hashed = {pid: after[pid] - before.get(pid, 0.0) for pid in after}
        # As with one process: the limit's worth verified and failed, the rest refused.
        assert Counter(statuses) == Counter(
            {401: FAILURES_PER_CLIENT, 429: 20 - FAILURES_PER_CLIENT}
        )
        assert sum(hashed.values()) == FAILURES_PER_CLIENT
        if len([pid for pid, count in hashed.items() if count > 0]) < 2:
            return False  # one process took every guess: try another victim
        # And later guesses from that source, whichever process takes them, are refused
        # without a hash.
        transport = httpx.HTTPTransport(local_address="127.0.0.5")
        with httpx.Client(base_url=two_processes.url, timeout=60, transport=transport) as http:
            for n in range(4):
                late = http.get(
                    f"/v1beta1/commands/{uuid.uuid4()}",
                    auth=(victim.client_id, f"late-{n}"),
                    headers={"Connection": "close"},
                )
                assert late.status_code == 429, late.text
        return True

    eventually(guesses_reached_both_processes, 300, "guesses taken by both processes", interval=0)


def test_an_api_process_killed_is_replaced_and_its_requests_still_count_in_the_scrape(
    stack: Stack, two_processes: TwoProcesses
) -> None:
    def enable_some(count: int) -> list[httpx.Response]:
        users = [
            str(
                create_user(
                    stack.sessions, SystemClock(), email=f"{uuid.uuid4().hex}@ex.com", disabled=True
                ).id
            )
            for _ in range(count)
        ]
        with ThreadPoolExecutor(4) as pool:
            return list(
                pool.map(lambda u: enable_on_a_new_connection(stack, two_processes.url, u), users)
            )

    def counted() -> float:
        scraped = httpx.get(f"{two_processes.url}/metrics", timeout=10).text
        return sum(
            sample.value
            for family in text_string_to_metric_families(scraped)
            for sample in family.samples
            if sample.name == "billing_http_requests_total"
            and sample.labels == {"route": ENABLE_ROUTE, "method": "POST", "status": "200"}
        )

    before = counted()
    first = enable_some(10)
    served = two_processes.served("billing_http_requests", route=ENABLE_ROUTE)
    running = two_processes.processes()
    victim = next(pid for pid in served if pid in running)

    os.kill(victim, signal.SIGKILL)

    # uvicorn's supervisor starts another in its place.
    def two_without_the_victim() -> set[int] | None:
        now = two_processes.processes()
        return now if len(now) == 2 and victim not in now else None

    replaced = eventually(two_without_the_victim, 60, "a new API process in the killed one's place")
    eventually(lambda: _answers(f"{two_processes.url}/healthz"), 30, "the API")
    then = enable_some(10)

    assert [r.status_code for r in first + then] == [200] * 20
    assert running - {victim} <= replaced
    # The killed process's counts stay in its file: the scrape still adds them up. A request
    # is counted once its answer went out (worker/api/middleware.py), so the last answer may
    # reach the client a moment before its count reaches the scrape: wait for it.
    eventually(lambda: counted() == before + 20 or None, 10, "the scrape to count all 20")
    assert counted() == before + 20

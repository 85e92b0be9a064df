"""PostgreSQL restarted (``pg_ctl restart -m fast``, in its two steps: ``stop -m fast``, then
``start``) under a load of commands.

While the database cannot record, the API answers 503 with the spec's error body (code
UNAVAILABLE), never a 500 and never a hang; every command it accepted runs once PostgreSQL is
back, exactly once at Stripe; the API, the worker node (and its pool) and beat carry on
without a restart. PostgreSQL only: the subject is a server that goes away and comes back.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from adapters.clock import SystemClock
from adapters.db.migrate import upgrade
from adapters.db.models import EventRow
from domain.errors import ErrorCode, error_info
from domain.messages import CommandStatus
from tests.support.postgres import PostgresCluster, start_cluster
from tests.support.records import create_organization
from tests.support.stack import Stack, eventually, stack_of_its_own

pytestmark = pytest.mark.chaos

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

COMMANDS = int(os.environ.get("CHAOS_PG_RESTART_COMMANDS", "300"))
"""Commands sent (issue 32 asks for 1,000: ``CHAOS_PG_RESTART_COMMANDS=1000``; CI sends
fewer to keep its time reasonable on a small machine: the restart lands among them all the
same)."""
SENDERS = 8
"""Clients sending at once."""
REQUEST_DEADLINE_SECONDS = 20.0
"""Every request is answered within this, or it hung (the API's own waits are shorter)."""
SYNC_EVERY = 10
"""Every tenth request waits for its command's outcome (no ``Prefer: respond-async``)."""
SYNC_WAIT_SECONDS = 3
"""How long the API waits for an outcome before it answers 202."""
REDIS_DB = 11
"""A Redis database no other stack of the session uses."""


@pytest.fixture
def cluster() -> Iterator[PostgresCluster]:
    """A PostgreSQL cluster of the test's own: restarting the session's would disturb the
    other tests' stacks."""
    try:
        own = start_cluster()
    except Exception as error:
        if IN_CI:
            raise
        pytest.skip(f"PostgreSQL not available: {error}")
    yield own
    own.stop()


@contextlib.contextmanager
def stack_on(
    cluster: PostgresCluster, workdir: Path, redis_server: str, **settings: str
) -> Iterator[Stack]:
    """A stack of its own on ``cluster`` (no process started yet), with a client."""
    name = f"pg_restart_{uuid.uuid4().hex[:8]}"
    database_url = cluster.create_database(name)
    upgrade(database_url)
    redis_url = f"{redis_server}/{REDIS_DB}"
    with stack_of_its_own(name, workdir, database_url, redis_url, **settings) as system:
        system.client = system.new_client()
        yield system


@pytest.fixture
def stack(cluster: PostgresCluster, workdir: Path, redis_server: str) -> Iterator[Stack]:
    # A short synchronous wait: the load's synchronous requests answer 202 soon.
    with stack_on(
        cluster, workdir, redis_server, BILLING_HTTP_WAIT_TIMEOUT_SECONDS=str(SYNC_WAIT_SECONDS)
    ) as system:
        system.start_worker("w1", concurrency=2)
        system.start_beat()
        system.start_api()
        yield system


@dataclass(frozen=True)
class Answer:
    org_id: str
    status: int | None
    """``None``: no answer within the deadline, or the connection broke."""
    body: dict[str, object]
    headers: httpx.Headers | None
    sent_at: float
    answered_at: float
    failure: str = ""


def idempotency_key(org_id: str) -> str:
    return f"pg-restart-{org_id}"


def create_billing_account(http: httpx.Client, org_id: str, *, waits: bool = False) -> Answer:
    """``waits``: the API answers once the command ended, or 202 when its wait is over."""
    headers = {"Idempotency-Key": idempotency_key(org_id)}
    if not waits:
        headers["Prefer"] = "respond-async"
    sent_at = time.monotonic()
    try:
        response = http.post(
            f"/v1beta1/organizations/{org_id}/billing",
            json={"body": {"name": "Acme Ltd", "email": "billing@acme.example"}},
            headers=headers,
        )
    except httpx.HTTPError as error:
        return Answer(org_id, None, {}, None, sent_at, time.monotonic(), repr(error))
    return Answer(
        org_id, response.status_code, response.json(), response.headers, sent_at, time.monotonic()
    )


def log_errors(path: Path, lines: int = 20) -> str:
    """The last error lines of a process's log."""
    errors = [line for line in path.read_text(errors="replace").splitlines() if "ERROR" in line]
    return "\n".join(errors[-lines:]) or "(no error logged)"


def pool_pids(pid: int) -> set[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    return {int(child) for child in found.stdout.split()}


def process_pids(stack: Stack) -> dict[str, set[int]]:
    """Each process of the stack, and the worker's pool processes."""
    pids = {child.name: {child.process.pid} for child in stack.group.children}
    worker = next(child for child in stack.group.children if child.name.startswith("worker"))
    pids["worker pool"] = pool_pids(worker.process.pid)
    return pids


def beat_reads_the_database(stack: Stack) -> bool:
    try:
        scrape = httpx.get(stack.beat_metrics_url, timeout=5).text
    except httpx.HTTPError:
        return False
    return 'billing_collector_up{part="database"} 1.0' in scrape


def unpublished_events(stack: Stack) -> int:
    with stack.sessions() as session:
        return int(
            session.scalar(
                select(func.count()).select_from(EventRow).where(EventRow.published_at.is_(None))
            )
            or 0
        )


def customers_created(stack: Stack) -> Counter[str]:
    """Customers the emulator created, by the organization named in their metadata
    (idempotent replays are no second customer)."""
    with stack.stripe as emulator:
        requests = emulator.requests(path_prefix="/v1/customers", method="POST")
    return Counter(
        str(request.form.get("metadata", {}).get("org_id"))
        for request in requests
        if request.path == "/v1/customers" and request.status == 200 and not request.replayed
    )


@pytest.mark.timeout(120 + COMMANDS)  # the worker drains a few commands a second on a busy box
def test_postgres_restarted_under_load_loses_and_doubles_nothing_and_restarts_no_process(
    stack: Stack, cluster: PostgresCluster
) -> None:
    orgs = [
        create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex[:12]}").id
        for _ in range(COMMANDS)
    ]
    eventually(lambda: beat_reads_the_database(stack), timeout=30, what="beat's first scrape")
    before = process_pids(stack)
    assert before["worker pool"], "the worker has its pool processes"

    answered = 0
    counted = threading.Lock()
    restart_due = threading.Event()
    restart_began = threading.Event()
    refused_seen = threading.Event()
    restart_at = max(1, COMMANDS // 5)

    assert stack.client is not None
    auth = (stack.client.client_id, stack.client.secret)
    own = threading.local()
    clients: list[httpx.Client] = []

    def send(index: int, org_id: str) -> Answer:
        """Send from this thread's own client (its own keep-alive connection)."""
        nonlocal answered
        if not hasattr(own, "http"):
            own.http = httpx.Client(
                base_url=stack.api_url, auth=auth, timeout=REQUEST_DEADLINE_SECONDS
            )
            with counted:
                clients.append(own.http)
        if index >= restart_at:
            # The rest of the load goes out once the restart begins, so that it meets it (sent
            # at once, it could all be answered before PostgreSQL went).
            restart_began.wait(timeout=REQUEST_DEADLINE_SECONDS)
        answer = create_billing_account(own.http, org_id, waits=index % SYNC_EVERY == 0)
        with counted:
            answered += 1
            if answered >= restart_at:
                restart_due.set()
        if answer.status == 503:
            refused_seen.set()
        return answer

    restarted: dict[str, float] = {}

    def restart() -> None:
        restart_due.wait()
        restarted["began"] = time.monotonic()
        restarted["began_wall"] = time.time()
        restart_began.set()
        cluster.stop_server("fast")
        # Started again once a request met it away (the load is still going: bounded all the
        # same, so that a load that missed it fails below rather than hangs).
        refused_seen.wait(timeout=REQUEST_DEADLINE_SECONDS)
        cluster.start_server()
        restarted["back"] = time.monotonic()

    try:
        with ThreadPoolExecutor(SENDERS + 1) as pool:
            restarting = pool.submit(restart)
            answers = list(pool.map(lambda sent: send(*sent), enumerate(orgs)))
            restarting.result()
    finally:
        for http in clients:
            http.close()

    unanswered = [answer for answer in answers if answer.status is None]
    assert not unanswered, (
        f"{len(unanswered)} requests got no answer: {unanswered[:3]}; the API's errors:\n"
        + log_errors(stack.workdir / "api.log")
    )
    statuses = Counter(answer.status for answer in answers)
    assert set(statuses) <= {200, 202, 503}, f"answers other than 200, 202, 503: {statuses}"
    refused = [answer for answer in answers if answer.status == 503]
    assert refused, "no request met the restart: the load was over before PostgreSQL went"
    for answer in refused:
        assert answer.body["code"] == ErrorCode.UNAVAILABLE, answer.body
        assert isinstance(answer.body["message"], str)
        assert answer.body["details"] == [error_info("DATABASE_UNAVAILABLE")], answer.body
        assert answer.headers is not None
        assert answer.headers["Retry-After"] == "1"
    during = [
        answer
        for answer in answers
        if restarted["began"] <= answer.sent_at and answer.answered_at <= restarted["back"]
    ]
    print(
        f"\n{COMMANDS} commands: {statuses[200]} answered done, {statuses[202]} accepted, "
        f"{statuses[503]} refused with 503; "
        f"{len(during)} sent and answered while PostgreSQL restarted "
        f"({restarted['back'] - restarted['began']:.2f}s)"
    )

    accepted = {
        answer.org_id: answer.headers["Command-Id"]
        for answer in answers
        if answer.status in (200, 202) and answer.headers is not None
    }
    # A 503 says "not recorded, send it again": no command of a refused request was kept.
    assert stack.client is not None
    kept = [
        answer.org_id
        for answer in refused
        if stack.commands.find_by_idempotency_key(
            stack.client.client_id, idempotency_key(answer.org_id)
        )
        is not None
    ]
    assert not kept, f"refused with 503, yet recorded: {kept}"
    ended = {
        org_id: stack.finished(command_id, timeout=120) for org_id, command_id in accepted.items()
    }
    not_succeeded = {
        org_id: (record.status.value, record.error)
        for org_id, record in ended.items()
        if record.status is not CommandStatus.SUCCEEDED
    }
    assert not not_succeeded, f"accepted commands that did not succeed: {not_succeeded}"

    back_at = restarted["began_wall"] + (restarted["back"] - restarted["began"])
    finished_after = [
        record.finished_at.replace(tzinfo=record.finished_at.tzinfo or UTC).timestamp()
        for record in ended.values()
        if record.finished_at is not None
        and record.finished_at.replace(tzinfo=record.finished_at.tzinfo or UTC).timestamp()
        > back_at
    ]
    if finished_after:
        print(
            f"commands completing again {min(finished_after) - restarted['began_wall']:.2f}s "
            f"after the restart began; the last at "
            f"{max(finished_after) - restarted['began_wall']:.2f}s"
        )

    created = customers_created(stack)
    doubled = {org_id: count for org_id, count in created.items() if count > 1}
    assert not doubled, f"organizations with more than one Stripe customer: {doubled}"
    missing = [org_id for org_id in accepted if created[org_id] != 1]
    assert not missing, f"accepted commands with no customer at Stripe: {missing[:5]}"
    assert not [answer.org_id for answer in refused if created[answer.org_id]]

    # Their events too leave the outbox (the relay after each commit, or beat's sweep).
    eventually(lambda: unpublished_events(stack) == 0, timeout=60, what="every event published")

    # Nothing restarted: the same processes (the worker's pool included) answer as before.
    eventually(lambda: beat_reads_the_database(stack), timeout=30, what="beat reading again")
    after = process_pids(stack)
    assert after == before, f"processes replaced: before {before}, after {after}"
    assert not stack.group.exited()


def test_a_command_recorded_before_postgres_went_away_is_answered_202_not_503(
    cluster: PostgresCluster, workdir: Path, redis_server: str
) -> None:
    # No worker: the command stays queued, and the API waits for it while PostgreSQL is away.
    with stack_on(
        cluster, workdir, redis_server, BILLING_HTTP_WAIT_TIMEOUT_SECONDS=str(SYNC_WAIT_SECONDS)
    ) as stack:
        stack.start_api()
        assert stack.client is not None
        client_id = stack.client.client_id
        org_id = create_organization(stack.sessions, SystemClock(), name="org-waiting").id
        with (
            httpx.Client(
                base_url=stack.api_url,
                auth=(client_id, stack.client.secret),
                timeout=REQUEST_DEADLINE_SECONDS,
            ) as http,
            ThreadPoolExecutor(1) as pool,
        ):
            waiting = pool.submit(create_billing_account, http, org_id, waits=True)
            recorded = eventually(
                lambda: stack.commands.find_by_idempotency_key(client_id, idempotency_key(org_id)),
                what="the command recorded",
            )
            cluster.stop_server("fast")
            try:
                answer = waiting.result()
            finally:
                cluster.start_server()
        # Accepted, and told so: a 503 would have the caller send it again.
        assert answer.status == 202, (answer.status, answer.body)
        assert answer.headers is not None
        assert answer.headers["Command-Id"] == recorded.id
        stack.start_worker("w1", concurrency=1)
        assert stack.finished(recorded.id, timeout=60).status is CommandStatus.SUCCEEDED

"""The API, or the worker and beat, cut from PostgreSQL by a network partition under a load of
commands, then healed (issue 41, item 4b).

Topology: PostgreSQL runs in a network namespace of its own (tests/support/netns.py) with three
links to the root namespace, where every other process runs. The API reaches the database
through one link, the worker and beat through another, the test through the third. Cutting
one link is a partition between those processes and PostgreSQL only: their packets vanish (no
refusal, no reset), their open connections stall, while the others go on.

The worker and beat cut off: the API goes on accepting; commands the worker was running when
the cut came (a start, a Stripe call's record, an outcome whose commit may have gone through
unanswered) and those accepted during it all end succeeded after the heal, each customer made
once, without waiting for a lease or a sweep (both out of reach here).

The API cut off: while cut, the API answers 503 with the spec's error body (code
UNAVAILABLE), never a 500 and never a hang: its connections give up after
``BILLING_DATABASE_NETWORK_TIMEOUT_SECONDS``. A 503 means "send it again"; the load does, with
the same ``Idempotency-Key``, as a client should, so a command whose commit reached PostgreSQL
but whose answer did not (a 503 that in fact recorded it) is found again rather than made
twice, and published by the API once the database answers again. After the heal every
command ends succeeded, one customer per account at Stripe, no process restarted, and the
time from the cut to commands completing again is printed and bounded.
"""

from __future__ import annotations

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

from adapters.clock import SystemClock
from adapters.db.migrate import upgrade
from domain.errors import ErrorCode, error_info
from domain.messages import CommandStatus
from tests.chaos.test_postgres_restart import (
    Answer,
    create_billing_account,
    customers_created,
    log_errors,
    process_pids,
)
from tests.support.netns import Link, namespace, require_namespaces
from tests.support.postgres import start_cluster
from tests.support.records import create_organization
from tests.support.stack import Stack, stack_of_its_own

pytestmark = pytest.mark.chaos

COMMANDS = 60
SENDERS = 6
CUT_SECONDS = 8.0
"""How long the API stays cut off: longer than its network timeout, so that requests meet
the partition and are refused, not merely slowed."""
NETWORK_TIMEOUT_SECONDS = 3
"""The API's ``BILLING_DATABASE_NETWORK_TIMEOUT_SECONDS`` here (shorter than the default so
the test takes seconds)."""
REQUEST_DEADLINE_SECONDS = 20.0
"""Every request is answered within this, or it hung."""
RESUME_BOUND_SECONDS = 30.0
"""From the cut to commands completing again (the issue's bound)."""
REDIS_DB = 12


@dataclass
class Partitioned:
    stack: Stack
    cut_off: str
    """Who the partition cuts from PostgreSQL: ``api`` or ``worker-and-beat``."""
    link: Link


@pytest.fixture(params=["api", "worker-and-beat"])
def partitioned(
    request: pytest.FixtureRequest, workdir: Path, redis_server: str
) -> Iterator[Partitioned]:
    require_namespaces()
    with namespace("pg") as pg_namespace:
        # The test's own link first: where the cluster's URL points.
        links = [pg_namespace.add_link() for _ in range(3)]
        _tests_link, api_link, workers_link = links
        cluster = start_cluster(
            run_in=pg_namespace.exec_prefix,
            listen=tuple(link.namespace_address for link in links),
            trust=tuple(str(link.network) for link in links),
        )
        try:
            name = f"partition_pg_{uuid.uuid4().hex[:8]}"
            database_url = cluster.create_database(name)
            upgrade(database_url)
            with stack_of_its_own(
                name,
                workdir,
                database_url,
                f"{redis_server}/{REDIS_DB}",
                BILLING_HTTP_WAIT_TIMEOUT_SECONDS="3",
                BILLING_DATABASE_NETWORK_TIMEOUT_SECONDS=str(NETWORK_TIMEOUT_SECONDS),
                # Out of reach: what the cut interrupted ends without a sweep or a lease.
                BILLING_STALLED_COMMAND_SECONDS="300",
                BILLING_BROKER_VISIBILITY_TIMEOUT_SECONDS="300",
            ) as stack:
                stack.client = stack.new_client()
                through_workers_link = {
                    "BILLING_DATABASE_URL": cluster.url(name, host=workers_link.namespace_address)
                }
                stack.start_worker("w1", concurrency=2, extra_env=through_workers_link)
                stack.start_beat(extra_env=through_workers_link)
                stack.start_api(
                    extra_env={
                        "BILLING_DATABASE_URL": cluster.url(name, host=api_link.namespace_address)
                    }
                )
                cut_off = str(request.param)
                yield Partitioned(stack, cut_off, api_link if cut_off == "api" else workers_link)
        finally:
            cluster.stop()


@pytest.mark.timeout(180)
def test_a_process_cut_from_postgres_loses_and_doubles_no_command_and_the_api_never_says_500(
    partitioned: Partitioned,
) -> None:
    """Cut off, the API answers 503 and every command runs once after the heal; the worker
    and beat cut off, the API accepts on and every command runs once after the heal."""
    stack, link = partitioned.stack, partitioned.link
    orgs = [
        create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex[:12]}").id
        for _ in range(COMMANDS)
    ]
    before = process_pids(stack)
    assert stack.client is not None
    auth = (stack.client.client_id, stack.client.secret)
    cut_due, cut_began = threading.Event(), threading.Event()
    cut_at = COMMANDS // 5
    answered = 0
    counted = threading.Lock()
    own = threading.local()
    clients: list[httpx.Client] = []
    times: dict[str, float] = {}

    def send(index: int, org_id: str) -> list[Answer]:
        """Send until accepted, as a client told 503 does: again, with the same key."""
        nonlocal answered
        if not hasattr(own, "http"):
            own.http = httpx.Client(
                base_url=stack.api_url, auth=auth, timeout=REQUEST_DEADLINE_SECONDS
            )
            with counted:
                clients.append(own.http)
        if index >= cut_at:
            cut_began.wait(timeout=REQUEST_DEADLINE_SECONDS)  # the rest meets the partition
        tries: list[Answer] = []
        while True:
            answer = create_billing_account(own.http, org_id, waits=index % 10 == 0)
            tries.append(answer)
            if answer.status != 503 or len(tries) > 30:
                break
            retry_after = answer.headers.get("Retry-After", "1") if answer.headers else "1"
            time.sleep(float(retry_after))
        with counted:
            answered += 1
            if answered >= cut_at:
                cut_due.set()
        return tries

    def partition() -> None:
        cut_due.wait()
        times["cut"], times["cut_wall"] = time.monotonic(), time.time()
        link.cut()
        cut_began.set()
        time.sleep(CUT_SECONDS)
        link.heal()
        times["healed"] = time.monotonic()

    try:
        with ThreadPoolExecutor(SENDERS + 1) as pool:
            partitioning = pool.submit(partition)
            sent = list(pool.map(lambda item: send(*item), enumerate(orgs)))
            partitioning.result()
    finally:
        for http in clients:
            http.close()

    answers = [answer for tries in sent for answer in tries]
    unanswered = [answer for answer in answers if answer.status is None]
    assert not unanswered, (
        f"{len(unanswered)} requests got no answer: {unanswered[:3]}; the API's errors:\n"
        + log_errors(stack.workdir / "api.log")
    )
    statuses = Counter(answer.status for answer in answers)
    assert set(statuses) <= {200, 202, 503}, f"answers other than 200, 202, 503: {statuses}"
    refused = [answer for answer in answers if answer.status == 503]
    if partitioned.cut_off == "api":
        assert refused, "no request met the partition"
    else:
        assert not refused, "the API refused while only the worker and beat were cut off"
    for answer in refused:
        assert answer.body["code"] == ErrorCode.UNAVAILABLE, answer.body
        assert answer.body["details"] == [error_info("DATABASE_UNAVAILABLE")], answer.body
        assert answer.headers is not None
        assert answer.headers["Retry-After"] == "1"
    slowest = max(answer.answered_at - answer.sent_at for answer in answers)
    accepted = {tries[-1].org_id: tries[-1] for tries in sent}
    not_accepted = [a.org_id for a in accepted.values() if a.status not in (200, 202)]
    assert not not_accepted, f"never accepted, even after the heal: {not_accepted[:5]}"

    ended = {
        org_id: stack.finished(answer.headers["Command-Id"], timeout=60)
        for org_id, answer in accepted.items()
        if answer.headers is not None
    }
    not_succeeded = {
        org_id: (record.status.value, record.error)
        for org_id, record in ended.items()
        if record.status is not CommandStatus.SUCCEEDED
    }
    assert not not_succeeded, f"accepted commands that did not succeed: {not_succeeded}"
    created = customers_created(stack)
    doubled = {org_id: count for org_id, count in created.items() if count > 1}
    assert not doubled, f"organizations with more than one Stripe customer: {doubled}"
    missing = [org_id for org_id in orgs if created[org_id] != 1]
    assert not missing, f"accounts with no customer at Stripe: {missing[:5]}"

    # The time to resume: from the cut to the first request sent during the partition that
    # the API accepted, and to the first such command succeeding.
    accepted_again = min(
        answer.answered_at
        for answer in answers
        if answer.sent_at >= times["cut"] and answer.status in (200, 202)
    )
    finished_again = min(
        record.finished_at.replace(tzinfo=record.finished_at.tzinfo or UTC).timestamp()
        for org_id, record in ended.items()
        if record.finished_at is not None and accepted[org_id].sent_at >= times["cut"]
    )
    resume = finished_again - times["cut_wall"]
    healed_after = times["healed"] - times["cut"]
    print(
        f"\n{partitioned.cut_off} cut from PostgreSQL for {CUT_SECONDS:.0f}s under {COMMANDS} "
        f"commands: {statuses[503]} answers 503 (longest answer {slowest:.1f}s), "
        f"{statuses[200] + statuses[202]} accepted; the API accepting during or after the cut "
        f"{accepted_again - times['cut']:.2f}s after it; commands completing again "
        f"{resume:.2f}s after the cut ({resume - healed_after:.2f}s after the heal)"
    )
    assert slowest < REQUEST_DEADLINE_SECONDS
    assert resume < RESUME_BOUND_SECONDS

    after = process_pids(stack)
    assert after == before, f"processes replaced: before {before}, after {after}"
    assert not stack.group.exited()

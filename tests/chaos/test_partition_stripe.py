"""A worker cut from Stripe (the emulator) by a network partition in the middle of its calls,
then healed (issue 41, item 4c).

Topology: the emulator runs in a network namespace of its own (tests/support/netns.py), the
worker node, beat, the API and Redis in the root namespace; the worker reaches Stripe through
the namespace's one link. The emulator holds each customer creation 800 ms after making it
(a latency fault after execution), and the link is cut the moment a creation has been made:
the calls in flight have been executed at Stripe but their answers never arrive. The worker's
calls time out (``BILLING_STRIPE_TIMEOUT_SECONDS``) and are retried with backoff and the same
idempotency key; once healed, the retry of a call whose answer was lost is Stripe's replay of
it, not a second customer.

Every command the API accepted ends succeeded, with one customer per account in the
emulator's request log, no process restarted, and the time from the cut to commands
completing again printed and bounded.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

import httpx
import pytest
import redis

from adapters.clock import SystemClock
from domain.messages import CommandStatus
from tests.chaos.test_postgres_restart import (
    create_billing_account,
    customers_created,
    process_pids,
)
from tests.support.emulator import EMULATOR_KEY, start_emulator
from tests.support.netns import Link, namespace, require_namespaces
from tests.support.records import create_organization
from tests.support.stack import Stack, eventually, stack_env

pytestmark = pytest.mark.chaos

COMMANDS = 24
CUT_SECONDS = 10.0
STRIPE_TIMEOUT_SECONDS = 3
"""The worker's ``BILLING_STRIPE_TIMEOUT_SECONDS`` here: a call whose answer the partition
swallowed is given up after this (the default is 30 s)."""
HELD_AFTER_CREATION_MS = 800
"""How long the emulator holds a customer creation's answer: the window the cut lands in."""
RESUME_BOUND_SECONDS = 30.0
REDIS_DB = 14

PARTITION_SETTINGS = {
    "BILLING_STRIPE_TIMEOUT_SECONDS": str(STRIPE_TIMEOUT_SECONDS),
    # A budget that outlasts the cut: eight attempts of at least a timeout each (the tests'
    # usual four attempts of fast retries would end the commands failed meanwhile).
    "BILLING_RETRY_MAX_ATTEMPTS": "8",
    "BILLING_RETRY_BASE_DELAY_SECONDS": "0.5",
    "BILLING_RETRY_MAX_DELAY_SECONDS": "4",
    # Beat's stalled sweep stays out of it: the commands are retrying, not lost.
    "BILLING_STALLED_COMMAND_SECONDS": "300",
}


@dataclass
class Partitioned:
    stack: Stack
    stripe_link: Link


@pytest.fixture
def partitioned(
    workdir: Path, redis_server: str, make_database: Callable[[str], str]
) -> Iterator[Partitioned]:
    require_namespaces()
    name = f"partition_stripe_{uuid.uuid4().hex[:8]}"
    base = workdir / name
    base.mkdir(parents=True)
    with namespace("stripe") as stripe_namespace:
        link = stripe_namespace.add_link()
        emulator = start_emulator(
            base / "stripe-emulator.log",
            "--rate-limit",
            "0",
            run_in=stripe_namespace.exec_prefix,
            host=link.namespace_address,
        )
        database_url = make_database(name)
        redis_url = f"{redis_server}/{REDIS_DB}"
        redis.Redis.from_url(redis_url).flushdb()  # no messages or clock of another test
        env = stack_env(
            database_url=database_url,
            redis_url=redis_url,
            data_dir=base,
            stripe_url=emulator.url,
            **PARTITION_SETTINGS,
        )
        stack = Stack(
            name=name,
            database_url=database_url,
            redis_url=redis_url,
            workdir=base,
            env=env,
            stripe_url=emulator.url,
        )
        try:
            stack.client = stack.new_client()
            stack.start_worker("w1", concurrency=2)
            stack.start_beat()
            stack.start_api()
            yield Partitioned(stack, link)
        finally:
            stack.stop()
            emulator.stop()


def customers_at_stripe(stack: Stack) -> int:
    """Customers the emulator holds now: each is there from the moment its creation executed,
    before the held answer leaves (its request log, written as the answer goes, comes too
    late to aim the cut)."""
    listed = httpx.get(
        f"{stack.stripe_url}/v1/customers",
        params={"limit": 100},
        auth=(EMULATOR_KEY, ""),
        timeout=5,
    )
    listed.raise_for_status()
    return len(listed.json()["data"])


@pytest.mark.timeout(180)
def test_a_worker_cut_from_stripe_mid_call_retries_and_makes_each_customer_once_after_the_heal(
    partitioned: Partitioned,
) -> None:
    stack, link = partitioned.stack, partitioned.stripe_link
    orgs = [
        create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex[:12]}").id
        for _ in range(COMMANDS)
    ]
    before = process_pids(stack)
    with stack.stripe as stripe:
        stripe.add_fault(
            "latency",
            "POST /v1/customers",
            latency_ms=HELD_AFTER_CREATION_MS,
            after_execution=True,
        )
    with stack.http() as http:
        answers = [create_billing_account(http, org_id) for org_id in orgs]
    assert [answer.status for answer in answers] == [202] * COMMANDS, answers[:3]
    command_ids = {
        answer.org_id: answer.headers["Command-Id"] for answer in answers if answer.headers
    }

    # The cut lands just after a creation was made: its answer is still held by the emulator.
    made_before = eventually(lambda: customers_at_stripe(stack) >= 3 and customers_at_stripe(stack))
    eventually(
        lambda: customers_at_stripe(stack) > made_before,
        timeout=10,
        what="the next customer creation",
        interval=0.01,
    )
    cut_at, cut_wall = time.monotonic(), time.time()
    link.cut()
    time.sleep(CUT_SECONDS)
    link.heal()
    healed_at = time.monotonic()

    ended = {
        org_id: stack.finished(command_id, timeout=90) for org_id, command_id in command_ids.items()
    }
    not_succeeded = {
        org_id: (record.status.value, record.error)
        for org_id, record in ended.items()
        if record.status is not CommandStatus.SUCCEEDED
    }
    assert not not_succeeded, f"commands that did not succeed: {not_succeeded}"

    created = customers_created(stack)
    doubled = {org_id: count for org_id, count in created.items() if count > 1}
    assert not doubled, f"organizations with more than one Stripe customer: {doubled}"
    missing = [org_id for org_id in orgs if created[org_id] != 1]
    assert not missing, f"accounts with no customer at Stripe: {missing[:5]}"
    with stack.stripe as stripe:
        posted = stripe.requests(path_prefix="/v1/customers", method="POST")
    replayed = Counter(
        str(request.form.get("metadata", {}).get("org_id"))
        for request in posted
        if request.path == "/v1/customers" and request.replayed
    )
    assert replayed, "no call was cut mid-way (no creation answered again as a replay)"

    finished_after_cut = sorted(
        record.finished_at.replace(tzinfo=record.finished_at.tzinfo or UTC).timestamp()
        for record in ended.values()
        if record.finished_at is not None
        and record.finished_at.replace(tzinfo=record.finished_at.tzinfo or UTC).timestamp()
        > cut_wall
    )
    resume = finished_after_cut[0] - cut_wall
    print(
        f"\nworker cut from Stripe for {CUT_SECONDS:.0f}s mid-call under {COMMANDS} commands: "
        f"{len(replayed)} calls cut after Stripe made the customer, answered by a replay "
        f"after the heal; commands completing again {resume:.2f}s after the cut "
        f"({resume - (healed_at - cut_at):.2f}s after the heal), the last "
        f"{finished_after_cut[-1] - cut_wall:.2f}s after it"
    )
    assert resume < RESUME_BOUND_SECONDS

    after = process_pids(stack)
    assert after == before, f"processes replaced: before {before}, after {after}"
    assert not stack.group.exited()

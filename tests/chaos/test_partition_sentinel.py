"""A worker node cut off with the Redis primary while the sentinels promote the replica, then
healed (issue 41, item 4a; Jepsen's partition of a Sentinel-managed Redis).

Topology (tests/support/sentinel_partition.py): the primary and one worker node (w1) run in a
network namespace of their own; the replica, three sentinels, a second worker node (w2), beat,
the API and the Stripe emulator run in the root namespace. Two links join the sides: one
carries Redis (the sentinels', the replica's and every client's traffic to the primary, and
w1's to the sentinels and, later, the new primary); the other carries w1's calls to Stripe,
and is never cut (the database is SQLite: a file, which w1 reaches from either side).

Cutting the Redis link is a partition, not a pause: the old primary keeps serving w1 (its
consumer's connection is local to their side, and the old primary still believes it is the
primary), while the sentinels, on the majority's side, see it down and promote the replica,
which w2, beat and the API follow. What w1 does with what the old primary delivers depends on
its other Redis clients (the result backend, the rate budget, the relay's lock): a client whose
pooled connection to the old primary survived the cut goes on using it, and w1 finishes the
command there (its result and its budget go to a server that will drop them; its relay's
appends too, but they do not count: the sentinels, out of reach, cannot name that server the
primary, so the outbox keeps the events); a client that must open a connection asks the
sentinels, out of w1's reach, and the command fails transiently and goes back to the old
primary, again and again, until the heal. Which one happens is a race of the pools, and both
must hold. The majority's side runs the backlog meanwhile. Healed, the sentinels make the old
primary a replica of the new one (which drops what it took meanwhile), and w1 follows the
sentinels to the new primary, where the commands it held replay their recorded outcome.

Every command the API accepted ends succeeded, with one customer per account in the
emulator's request log (a command that both sides ran is one customer: the command log and
the idempotency key) and its event on the new primary's stream (what w1's relay appended to
the old primary stayed unpublished in the outbox, and a relay on the new primary appended
it), no process restarted, and the time from the cut to commands sent after it completing is
printed and bounded.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path

import httpx
import pytest

from adapters.clock import SystemClock
from adapters.db.migrate import upgrade
from domain.messages import CommandStatus
from tests.chaos.test_postgres_restart import Answer, create_billing_account, customers_created
from tests.support.emulator import start_emulator
from tests.support.events import events_on_stream
from tests.support.netns import Link, namespace, require_namespaces
from tests.support.records import create_organization
from tests.support.sentinel_partition import SplitSentinels
from tests.support.stack import Stack, eventually, stack_env

pytestmark = pytest.mark.chaos

BURST = 30
"""Commands sent at once just before the cut: the backlog the old primary holds."""
SEND_EVERY_SECONDS = 0.25
"""Then one command this often, through the cut and a few seconds past the heal."""
CUT_SECONDS = 12.0
AFTER_HEAL_SECONDS = 3.0
HELD_AFTER_CREATION_MS = 300
"""Each customer creation takes this long at the emulator: the backlog lasts into the cut."""
RESUME_BOUND_SECONDS = 30.0

PARTITION_SETTINGS = {
    # The backlog's duplicates (one copy run on each side) wait for each other, then replay.
    "BILLING_RETRY_MAX_ATTEMPTS": "8",
    "BILLING_RETRY_BASE_DELAY_SECONDS": "0.5",
    "BILLING_RETRY_MAX_DELAY_SECONDS": "4",
    # Out of reach, as in production (300 s): what the failover or the partition kept from
    # the new primary comes back through beat's failover watch, not the tests' 3 s sweep.
    "BILLING_STALLED_COMMAND_SECONDS": "300",
}


@dataclass
class Partitioned:
    stack: Stack
    redis: SplitSentinels
    redis_link: Link


def pids_of(stack: Stack) -> dict[str, set[int]]:
    """Each process of the stack with its children (a worker node's pool)."""
    found: dict[str, set[int]] = {}
    for child in stack.group.children:
        listed = subprocess.run(
            ["pgrep", "-P", str(child.process.pid)], capture_output=True, text=True, check=False
        )
        found[child.name] = {child.process.pid, *map(int, listed.stdout.split())}
    return found


@pytest.fixture
def partitioned(workdir: Path) -> Iterator[Partitioned]:
    require_namespaces()
    name = f"partition_sentinel_{uuid.uuid4().hex[:8]}"
    base = workdir / name
    base.mkdir(parents=True)
    with namespace("redis") as side:
        redis_link, stripe_link = side.add_link(), side.add_link()
        topology = SplitSentinels(base / "redis", side, redis_link)
        emulator = None
        stack = None
        try:
            topology.start()
            # On the never-cut link's root address: both sides reach it.
            emulator = start_emulator(
                base / "stripe-emulator.log", "--rate-limit", "0", host=stripe_link.root_address
            )
            database_url = f"sqlite:///{base / 'billing.db'}"
            upgrade(database_url)
            env = stack_env(
                database_url=database_url,
                redis_url=topology.primary_url(),
                data_dir=base,
                stripe_url=emulator.url,
                **topology.settings_env(),
                **PARTITION_SETTINGS,
            )
            del env["BILLING_REDIS_URL"]  # every process finds the primary through the sentinels
            stack = Stack(
                name=name,
                database_url=database_url,
                redis_url=topology.primary_url(),
                workdir=base,
                env=env,
                stripe_url=emulator.url,
            )
            stack.client = stack.new_client()
            stack.start_worker("w1", concurrency=2, run_in=side.exec_prefix)
            stack.start_worker("w2", concurrency=2)
            stack.start_beat()
            stack.start_api()
            yield Partitioned(stack, topology, redis_link)
        finally:
            if stack is not None:
                stack.stop()
            if emulator is not None:
                emulator.stop()
            topology.stop()


def log_lines_between(log: Path, needle: str, start: float, end: float) -> int:
    """Lines of a process's JSON log whose message holds ``needle``, stamped between
    ``start`` and ``end`` (Unix times)."""
    count = 0
    for line in log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line of a library's own printing
        if needle not in str(entry.get("message", "")) or "time" not in entry:
            continue
        if start <= datetime.fromisoformat(entry["time"]).timestamp() <= end:
            count += 1
    return count


def longest_stall(finished: list[float], since: float) -> tuple[float, float]:
    """The longest time after ``since`` with no command finishing: when it began and when
    commands were completing again (the time to resume is the end's distance from the
    fault)."""
    times = sorted(moment for moment in finished if moment > since)
    if not times:
        return since, since
    edges = [since, *times]
    return max(pairwise(edges), key=lambda gap: gap[1] - gap[0])


@pytest.mark.timeout(240)
def test_a_worker_cut_off_with_the_old_primary_loses_and_doubles_nothing_once_healed(
    partitioned: Partitioned,
) -> None:
    stack, topology, link = partitioned.stack, partitioned.redis, partitioned.redis_link
    with stack.stripe as stripe:
        stripe.add_fault(
            "latency",
            "POST /v1/customers",
            latency_ms=HELD_AFTER_CREATION_MS,
            after_execution=True,
        )
    before = pids_of(stack)
    assert stack.client is not None
    auth = (stack.client.client_id, stack.client.secret)

    def new_org() -> str:
        return create_organization(
            stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex[:12]}"
        ).id

    answers: list[Answer] = []
    times: dict[str, float] = {}
    with (
        httpx.Client(base_url=stack.api_url, auth=auth, timeout=30) as http,
        ThreadPoolExecutor(4) as pool,
    ):
        burst = [new_org() for _ in range(BURST)]
        answers += pool.map(lambda org_id: create_billing_account(http, org_id), burst)

        times["cut"], times["cut_wall"] = time.monotonic(), time.time()
        link.cut()
        healed = threading.Event()

        def heal() -> None:
            eventually(topology.replica_promoted, timeout=CUT_SECONDS, what="the promotion")
            times["promoted"] = time.monotonic()
            time.sleep(max(0.0, times["cut"] + CUT_SECONDS - time.monotonic()))
            link.heal()
            times["healed"], times["healed_wall"] = time.monotonic(), time.time()
            healed.set()

        healing = pool.submit(heal)
        sending: list[Future[Answer]] = []
        while not healed.is_set() or time.monotonic() < times["healed"] + AFTER_HEAL_SECONDS:
            org_id = new_org()
            sending.append(pool.submit(create_billing_account, http, org_id))
            time.sleep(SEND_EVERY_SECONDS)
            if healing.done():
                healing.result()  # a promotion that never came fails here
        healing.result()
        answers += [future.result() for future in sending]

    statuses = Counter(answer.status for answer in answers)
    assert set(statuses) <= {200, 202}, f"answers other than 200 and 202: {statuses}"
    eventually(topology.old_primary_demoted, timeout=30, what="the old primary demoted")
    demoted = time.monotonic()

    command_ids = {
        answer.org_id: answer.headers["Command-Id"] for answer in answers if answer.headers
    }
    ended = {org_id: stack.finished(cid, timeout=90) for org_id, cid in command_ids.items()}
    not_succeeded = {
        org_id: (record.status.value, record.error)
        for org_id, record in ended.items()
        if record.status is not CommandStatus.SUCCEEDED
    }
    assert not not_succeeded, f"accepted commands that did not succeed: {not_succeeded}"
    created = customers_created(stack)
    doubled = {org_id: count for org_id, count in created.items() if count > 1}
    assert not doubled, f"organizations with more than one Stripe customer: {doubled}"
    missing = [org_id for org_id in command_ids if created[org_id] != 1]
    assert not missing, f"accounts with no customer at Stripe: {missing[:5]}"

    # The old primary kept serving the node on its side: it delivered commands to w1 while cut
    # off, which w1 either finished there or handed back (see the module's docstring).
    window = (times["cut_wall"], times["healed_wall"] - 0.5)
    log = stack.workdir / "worker-w1.log"
    delivered = log_lines_between(log, "billing.create_account[", *window)
    handed_back = log_lines_between(log, "reject requeue=True", *window)
    finished_by_w1 = log_lines_between(log, "succeeded in", *window)
    finished = [
        record.finished_at.replace(tzinfo=record.finished_at.tzinfo or UTC).timestamp()
        for record in ended.values()
        if record.finished_at is not None
    ]
    stall_began, resumed = longest_stall(finished, times["cut_wall"])
    resume = resumed - times["cut_wall"]
    print(
        f"\nRedis primary and w1 cut off for {CUT_SECONDS:.0f}s under {len(answers)} commands "
        f"({BURST} queued at the cut): the replica promoted "
        f"{times['promoted'] - times['cut']:.2f}s after the cut, the old primary demoted "
        f"{demoted - times['healed']:.2f}s after the heal; while cut off the old primary "
        f"delivered w1 {delivered} task lines ({handed_back} handed back, {finished_by_w1} "
        f"finished); no command finished from {stall_began - times['cut_wall']:.2f}s to "
        f"{resume:.2f}s after the cut (the time to resume); the last finished "
        f"{max(finished) - times['cut_wall']:.2f}s after it"
    )
    assert delivered, "the old primary delivered w1 nothing while cut off"
    assert resume < RESUME_BOUND_SECONDS

    # What w1 finished on the old primary had its events appended there, which the demotion
    # dropped: they count as published only on the primary the sentinels name.
    new_primary = topology.client(topology.replica_host, topology.replica_port)
    expected = {f"billing_account.created {command_id}" for command_id in command_ids.values()}
    eventually(
        lambda: expected <= events_on_stream(new_primary),
        timeout=60,
        what="every account's event on the new primary's stream",
    )

    after = pids_of(stack)
    assert after == before, f"processes replaced: before {before}, after {after}"
    assert not stack.group.exited()

"""kill -9 during a commit, of a worker node and of the API: no command lost or doubled, no
half-written state.

On PostgreSQL the kill lands *inside* the commit, every time: with ``synchronous_commit`` on
and a synchronous standby named that never connects, each writing ``COMMIT`` is flushed and
marked committed locally, then waits (``SyncRep``) for a standby that never answers, its row
locks held. The process is killed while its commits wait there; the wait is then released,
so those transactions end committed although the process that made them never learned it
(the case a lost connection at commit makes). SQLite has no such wait: there the process is
killed at random moments under load, several times, and some kills land in commits.

Afterwards every command the API accepted ends ``succeeded``; each organization has exactly
one Stripe customer (the emulator's request log, replays excluded) and an ``active`` billing
account naming it; no command is left ``queued`` or ``running``.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import select

from adapters.clock import SystemClock
from adapters.db.models import BillingAccountRow, CommandRow
from domain.messages import CommandStatus
from tests.chaos.test_postgres_restart import (
    Answer,
    cluster,  # noqa: F401 - the fixture: a PostgreSQL cluster of the test's own
    create_billing_account,
    customers_created,
    idempotency_key,
    stack_on,
)
from tests.support.postgres import PostgresCluster
from tests.support.records import create_organization
from tests.support.stack import Stack, eventually, stack_of_its_own

pytestmark = pytest.mark.chaos

ORGS = 24
"""Organizations whose billing accounts the load creates (one command each)."""
LOAD_PACE = 0.15
"""Seconds between two requests of the load the random kills meet."""
LOAD_AFTER_THE_KILLS = 10
"""Requests the load still sends once the last process killed is started again: the load
lasts through every kill however long the restarts take on a busy machine."""
RANDOM_ORGS_AT_MOST = 400
"""Organizations made ready for that load (at ``LOAD_PACE``, a minute of requests)."""
SETTINGS = {
    # A killed node's unacknowledged messages come back soon, and a command recorded but never
    # published (the API killed in its commit) is published again soon.
    "BILLING_BROKER_VISIBILITY_TIMEOUT_SECONDS": "4",
    "BILLING_STALLED_COMMAND_SECONDS": "2",
    "BILLING_HTTP_WAIT_TIMEOUT_SECONDS": "2",
}


# --- PostgreSQL: commits held, then the process killed inside them --------------------------


class CommitHold:
    """Holds every writing commit on a server: each waits for a synchronous standby that
    never comes (``hold``) until ``release``; ``waiting`` counts the commits waiting now,
    of every client or of the processes of one group (``of_group``)."""

    def __init__(self, server: PostgresCluster) -> None:
        self._url = f"postgresql://postgres@127.0.0.1:{server.port}/postgres"
        self._admin = psycopg.connect(self._url, autocommit=True)
        self._admin.execute("CREATE TABLE IF NOT EXISTS commit_hold_probe (at timestamptz)")

    def hold(self) -> None:
        """Hold commits from now on: returns once a commit is seen held.

        ``pg_reload_conf`` only signals the server: until its processes read the new
        setting, a commit still goes through. One that did answered 202 to a test that
        expected every commit held, and its ``published_at`` update took its place among the
        commits counted waiting (CI of stop 51)."""
        self._admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'never_connects'")
        self._admin.execute("SELECT pg_reload_conf()")
        deadline = time.monotonic() + 30
        while not self._a_probe_commit_is_held():
            assert time.monotonic() < deadline, "commits still go through 30 s after the hold"

    def _a_probe_commit_is_held(self) -> bool:
        with psycopg.connect(self._url, autocommit=True) as probe:
            probe.execute("SET synchronous_commit = on")
            pid = probe.info.backend_pid
            committing = threading.Thread(
                target=probe.execute, args=("INSERT INTO commit_hold_probe VALUES (now())",)
            )
            committing.start()
            held = False
            until = time.monotonic() + 0.5
            while committing.is_alive() and time.monotonic() < until:
                row = self._admin.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE pid = %s AND wait_event = 'SyncRep'",
                    (pid,),
                ).fetchone()
                if row and row[0]:
                    held = True
                    break
                time.sleep(0.02)
            # A held commit is made locally: cancelling its wait ends the statement.
            self._admin.execute("SELECT pg_cancel_backend(%s)", (pid,))
            committing.join(10)
            return held

    def release(self) -> None:
        self._admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
        self._admin.execute("SELECT pg_reload_conf()")

    def drop_waiting(self, of_group: int | None = None) -> int:
        """End the sessions whose commits wait (of process group ``of_group``'s connections
        only, if given): each commit stays made, and its client hears only that the
        connection went. Returns how many."""
        row = self._admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE wait_event = 'SyncRep' "
            "AND (%(ports)s::int[] IS NULL OR client_port = ANY(%(ports)s::int[]))",
            _ports_of(of_group),
        ).fetchone()
        return int(row[0]) if row else 0

    def waiting(self, of_group: int | None = None) -> int:
        row = self._admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep' "
            "AND (%(ports)s::int[] IS NULL OR client_port = ANY(%(ports)s::int[]))",
            _ports_of(of_group),
        ).fetchone()
        return int(row[0]) if row else 0

    def __enter__(self) -> CommitHold:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._admin:
            self.release()


def _ports_of(pgid: int | None) -> dict[str, list[int] | None]:
    """The query's ``ports``: every client's (null), or the local ports of group ``pgid``."""
    return {"ports": None if pgid is None else sorted(local_tcp_ports_of_group(pgid))}


def local_tcp_ports_of_group(pgid: int) -> set[int]:
    """The local ports of the TCP sockets the processes of group ``pgid`` hold (from
    ``/proc``): which of a server's clients they are (``pg_stat_activity.client_port``).
    A beat sweep's worker commits too; only the API's are the test's."""
    inodes: set[str] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            # The fields after the command's closing parenthesis: state, ppid, pgrp, …
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            for descriptor in (stat.parent / "fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(descriptor)
                    if target.startswith("socket:["):
                        inodes.add(target[len("socket:[") : -1])
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@contextlib.contextmanager
def commits_held_on(
    server: PostgresCluster, workdir: Path, redis_server: str, **settings: str
) -> Iterator[Stack]:
    """A stack on a cluster of its own whose sessions commit synchronously (the cluster's
    default is off, for speed: a commit that does not wait cannot be held)."""
    with stack_on(server, workdir, redis_server, **settings) as system:
        database = system.database_url.rsplit("/", 1)[-1]
        with psycopg.connect(
            f"postgresql://postgres@127.0.0.1:{server.port}/postgres", autocommit=True
        ) as connection:
            connection.execute(f'ALTER DATABASE "{database}" SET synchronous_commit = on')
        system.start_beat()
        yield system


@pytest.fixture
def held_stack(
    cluster: PostgresCluster,  # noqa: F811 - the imported fixture
    workdir: Path,
    redis_server: str,
) -> Iterator[Stack]:
    with commits_held_on(cluster, workdir, redis_server, **SETTINGS) as system:
        yield system


@pytest.fixture
def held_stack_without_sweeps(
    cluster: PostgresCluster,  # noqa: F811 - the imported fixture
    workdir: Path,
    redis_server: str,
) -> Iterator[Stack]:
    """Commits held, and the stalled-command sweep out of reach: what the test proves ends
    without it."""
    with commits_held_on(
        cluster, workdir, redis_server, **{**SETTINGS, "BILLING_STALLED_COMMAND_SECONDS": "300"}
    ) as system:
        yield system


def kill_group(process: object) -> None:
    pid = getattr(process, "pid")  # noqa: B009 - a Popen or a ProcessGroup child alike
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


@pytest.mark.timeout(240)
def test_a_worker_killed_inside_its_commits_on_postgresql_loses_and_doubles_nothing(
    held_stack: Stack,
    cluster: PostgresCluster,  # noqa: F811 - the imported fixture
) -> None:
    stack = held_stack
    stack.start_api()
    orgs = organizations(stack)
    with stack.http() as http:
        answers = [create_billing_account(http, org_id) for org_id in orgs]  # queued, no worker
    accepted = command_ids(answers)
    assert len(accepted) == ORGS, [a for a in answers if a.status not in (200, 202)]

    rounds: list[int] = []
    with CommitHold(cluster) as commits:
        for round_number in range(3):
            commits.hold()  # the new worker's first commits (each command marked running) wait
            worker = stack.start_worker(f"held{round_number}", concurrency=2)
            if round_number:  # later stages too: its commands go on a moment, then wait again
                commits.release()
                time.sleep(0.1 * round_number)
                commits.hold()
            eventually(
                lambda: commits.waiting() >= 1, timeout=30, what="a commit of the worker to wait"
            )
            rounds.append(commits.waiting())
            kill_group(worker)
            killed_at = time.monotonic()
            commits.release()
    print(f"\ncommits waiting when the worker was killed, by round: {rounds}")

    stack.start_worker("after", concurrency=2)
    assert_every_command_ran_once(stack, accepted, orgs, since=killed_at)


@pytest.mark.timeout(240)
def test_the_api_killed_inside_its_commits_on_postgresql_loses_and_doubles_nothing(
    held_stack: Stack,
    cluster: PostgresCluster,  # noqa: F811 - the imported fixture
) -> None:
    stack = held_stack
    stack.start_worker("w1", concurrency=2)
    stack.start_api()
    orgs = organizations(stack)
    held = orgs[: ORGS // 2]
    first: dict[str, Answer] = {}

    def send_once(org_id: str) -> None:
        with stack.http() as http:
            first[org_id] = create_billing_account(http, org_id)

    with CommitHold(cluster) as commits:
        commits.hold()
        waiting = commits.waiting
        senders = [threading.Thread(target=send_once, args=(org_id,)) for org_id in held]
        for sender in senders:
            sender.start()
        eventually(lambda: waiting() >= len(held) // 2, timeout=30, what="the API's commits")
        waiting_now = waiting()
        api = next(child for child in stack.group.children if child.name == "api")
        kill_group(api.process)
        killed_at = time.monotonic()
        for sender in senders:
            sender.join(30)
    print(f"\nthe API was killed with {waiting_now} of its commits waiting")
    assert all(answer.status is None for answer in first.values()), "answered after the kill?"

    stack.start_api()  # as a supervisor would
    # The callers send again, under the same idempotency keys, with the rest of the load.
    answers = [send(stack, org_id) for org_id in orgs]
    accepted = command_ids(answers)
    assert len(accepted) == ORGS, [a for a in answers if a.status not in (200, 202)]
    assert_every_command_ran_once(stack, accepted, orgs, since=killed_at)


@pytest.mark.timeout(180)
def test_commands_the_api_recorded_but_never_heard_so_are_published_by_it_without_the_sweep(
    held_stack_without_sweeps: Stack,
    cluster: PostgresCluster,  # noqa: F811 - the imported fixture
) -> None:
    """The API's connections dropped while their commits wait (``pg_terminate_backend``):
    each command is committed, the API hears only that its connection went (a switchover's
    lost answer) and answers 503; once the database answers it publishes each command itself,
    and no caller sends anything again."""
    stack = held_stack_without_sweeps
    stack.start_worker("w1", concurrency=2)
    stack.start_api()
    orgs = organizations(stack, 6)
    first: dict[str, Answer] = {}

    def send_once(org_id: str) -> None:
        with stack.http() as http:
            first[org_id] = create_billing_account(http, org_id)

    with CommitHold(cluster) as commits:
        commits.hold()
        senders = [threading.Thread(target=send_once, args=(org_id,)) for org_id in orgs]
        for sender in senders:
            sender.start()
        api = next(child for child in stack.group.children if child.name == "api")
        eventually(
            lambda: commits.waiting(of_group=api.process.pid) >= len(orgs),
            timeout=30,
            what="the API's commits",
        )
        dropped = commits.drop_waiting(of_group=api.process.pid)
        dropped_at = time.monotonic()
        commits.release()
        for sender in senders:
            sender.join(30)
    print(f"\n{dropped} connections dropped inside their commits")
    assert {org_id: answer.status for org_id, answer in first.items()} == dict.fromkeys(orgs, 503)

    recorded = commands_by_idempotency_key(stack, orgs)
    assert set(recorded) == set(orgs), "a command whose commit was dropped was not recorded"
    assert_every_command_ran_once(stack, recorded, orgs, since=dropped_at)


def commands_by_idempotency_key(stack: Stack, orgs: list[str]) -> dict[str, str]:
    """Organization → the command recorded under its request's idempotency key."""
    keys = {idempotency_key(org_id): org_id for org_id in orgs}
    with stack.sessions() as session:
        rows = session.execute(
            select(CommandRow.idempotency_key, CommandRow.id).where(
                CommandRow.idempotency_key.in_(keys)
            )
        ).all()
    return {keys[str(key)]: command_id for key, command_id in rows}


# --- both databases: killed at random moments under load -------------------------------------


@pytest.fixture
def stack(
    backend: str, workdir: Path, redis_server: str, make_database: Callable[[str], str]
) -> Iterator[Stack]:
    name = f"kills_{uuid.uuid4().hex[:8]}"
    redis_url = f"{redis_server}/{10 + (backend == 'postgresql')}"
    with stack_of_its_own(name, workdir, make_database(name), redis_url, **SETTINGS) as system:
        system.client = system.new_client()
        system.start_beat()
        yield system


@pytest.mark.timeout(240)
def test_a_worker_and_the_api_killed_at_random_moments_under_load_lose_and_double_nothing(
    stack: Stack,
) -> None:
    ready = organizations(stack, RANDOM_ORGS_AT_MOST)
    chance = random.Random(os.environ.get("CHAOS_SEED", "kills"))
    worker = stack.start_worker("r0", concurrency=2)
    stack.start_api()
    answers: dict[str, Answer] = {}
    kills_over = threading.Event()

    def load() -> None:
        """A request every ``LOAD_PACE`` seconds (each sent again until the API answers, as a
        caller would), through the kills and ``LOAD_AFTER_THE_KILLS`` requests past them."""
        after_the_kills = 0
        for org_id in ready:
            answers[org_id] = send(stack, org_id)
            after_the_kills += kills_over.is_set()
            if after_the_kills >= LOAD_AFTER_THE_KILLS:
                return
            time.sleep(LOAD_PACE)

    sending = threading.Thread(target=load)
    sending.start()
    kills = []
    for round_number in range(4):
        time.sleep(chance.uniform(0.2, 1.0))
        if round_number % 2:
            api = next(child for child in stack.group.children if child.name == "api")
            kill_group(api.process)
            kills.append(f"api after {len(answers)} answers")
            stack.start_api()
        else:
            kill_group(worker)
            kills.append(f"worker after {len(answers)} answers")
            worker = stack.start_worker(f"r{round_number + 1}", concurrency=2)
    killed_at = time.monotonic()
    kills_over.set()
    sending.join(120)
    orgs = list(answers)
    print(f"\nkilled, in turn: {kills}; {len(orgs)} requests")
    assert len(orgs) < len(ready), "the load ran out of organizations before the last kill"

    accepted = command_ids(list(answers.values()))
    assert len(accepted) == len(orgs), [a for a in answers.values() if a.status not in (200, 202)]
    assert_every_command_ran_once(stack, accepted, orgs, since=killed_at)


# --- the load and the verdict ----------------------------------------------------------------


def organizations(stack: Stack, count: int = ORGS) -> list[str]:
    return [
        create_organization(stack.sessions, SystemClock(), name=f"org-{uuid.uuid4().hex[:12]}").id
        for _ in range(count)
    ]


def send(stack: Stack, org_id: str) -> Answer:
    """One request to create the organization's billing account, under its idempotency key;
    a request cut by a kill is sent again (as a caller would) until the API answers."""
    deadline = time.monotonic() + 60
    while True:
        with stack.http() as http:
            answer = create_billing_account(http, org_id)
        if answer.status is not None or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def command_ids(answers: list[Answer]) -> dict[str, str]:
    return {
        answer.org_id: answer.headers["Command-Id"]
        for answer in answers
        if answer.status in (200, 202) and answer.headers is not None
    }


def assert_every_command_ran_once(
    stack: Stack, accepted: dict[str, str], orgs: list[str], *, since: float
) -> None:
    ended = {org_id: stack.finished(command_id, 90) for org_id, command_id in accepted.items()}
    resumed = time.monotonic() - since
    not_succeeded = {
        org_id: (record.status.value, record.error)
        for org_id, record in ended.items()
        if record.status is not CommandStatus.SUCCEEDED
    }
    assert not not_succeeded, f"accepted commands that did not succeed: {not_succeeded}"
    print(f"every accepted command succeeded {resumed:.1f}s after the last kill")
    assert resumed < 30

    created = customers_created(stack)
    assert {org_id: created[org_id] for org_id in orgs} == dict.fromkeys(orgs, 1), (
        "not one Stripe customer per organization"
    )
    with stack.sessions() as session:
        accounts = session.scalars(
            select(BillingAccountRow).where(BillingAccountRow.org_id.in_(orgs))
        ).all()
    by_org: dict[str, list[BillingAccountRow]] = {}
    for account in accounts:
        by_org.setdefault(account.org_id, []).append(account)
    half_written = {
        org_id: [(row.state, row.provider_id) for row in rows]
        for org_id, rows in by_org.items()
        if len(rows) != 1 or rows[0].state != "active" or not rows[0].provider_id
    }
    assert not half_written, f"accounts not exactly one, active, with its customer: {half_written}"
    assert set(by_org) == set(orgs)
    for org_id in orgs:
        assert stack.client is not None
        assert (
            stack.commands.find_by_idempotency_key(stack.client.client_id, idempotency_key(org_id))
            is not None
        )

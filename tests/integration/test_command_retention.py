"""Pruning the command log on real databases (SQLite, PostgreSQL): what goes, what stays, the
idempotency keys that go with it, batches that each commit, and the operator's command."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, select

from adapters.clock import SystemClock
from adapters.db.command_log import SqlCommandLog
from adapters.db.engine import get_engine, session_factory
from adapters.db.models import CommandRow, ProviderCallRow
from adapters.db.provider_calls import SqlProviderCallLog
from application.handlers.operations.retention import prune_command_log
from application.requests.sweeps import PruneCommandLog
from domain.messages import CommandStatus
from domain.ports.commands import DuplicateCommand
from domain.provider.calls import CallOutcome, ProviderCall
from tests.support.environment import settings_environment
from tests.support.fakes.clock import FakeClock
from worker.bootstrap import Services, build_services
from worker.settings import Settings

ENABLE = "users.enable"


@dataclass
class Retention:
    """The application's services on a database of their own, with a clock the test moves."""

    url: str
    clock: FakeClock
    app: Services

    @property
    def log(self) -> SqlCommandLog:
        return self.app.commands

    def run(self, status: CommandStatus, *, key: str | None = None) -> str:
        """Accept a command (under ``key``) and take it to ``status`` now; its id."""
        command_id = f"cmd_{uuid.uuid4().hex[:12]}"
        payload = {"user_id": command_id}
        self.log.accept(
            command_id=command_id,
            command_type=ENABLE,
            payload=payload,
            client_id="cli_1",
            idempotency_key=key,
            request_fingerprint="f",
        )
        if status is not CommandStatus.QUEUED:
            self.log.begin(command_id, ENABLE, payload, source="api")
        if status is CommandStatus.SUCCEEDED:
            self.log.succeed(command_id, {})
        elif status is CommandStatus.FAILED:
            self.log.fail(command_id, {"code": 14, "message": "down", "details": []})
        elif status is CommandStatus.REJECTED:
            self.log.reject(command_id, {"code": 5, "message": "gone", "details": []})
        elif status is CommandStatus.RETRYING:
            self.log.retrying(command_id, {"code": 14, "message": "down", "details": []})
        elif status is CommandStatus.WAITING:
            self.log.waiting(command_id, 1.0)
        return command_id

    def kept(self, *command_ids: str) -> list[bool]:
        return [self.log.get(command_id) is not None for command_id in command_ids]


@pytest.fixture
def retention(make_database: Callable[[str], str]) -> Callable[..., Retention]:
    def make(**settings: Any) -> Retention:
        url = make_database(f"retention_{uuid.uuid4().hex[:8]}")
        clock = FakeClock()
        app = build_services(
            Settings(database_url=url, **settings), sessions=session_factory(url), clock=clock
        )
        return Retention(url, clock, app)

    return make


def test_old_succeeded_and_expired_failed_commands_go_and_every_other_stays(
    retention: Callable[..., Retention],
) -> None:
    log = retention()
    failed_91_days_ago = log.run(CommandStatus.FAILED)
    unfinished_91_days_ago = [
        log.run(status)
        for status in (
            CommandStatus.QUEUED,
            CommandStatus.RUNNING,
            CommandStatus.RETRYING,
            CommandStatus.WAITING,
        )
    ]
    log.clock.advance(timedelta(days=60))
    succeeded_31_days_ago = log.run(CommandStatus.SUCCEEDED)
    failed_31_days_ago = log.run(CommandStatus.FAILED)
    log.clock.advance(timedelta(days=29))
    succeeded_2_days_ago = log.run(CommandStatus.SUCCEEDED)
    log.clock.advance(timedelta(days=2))

    report = prune_command_log(PruneCommandLog(), log.app)

    assert (report.total, report.complete) == (2, True)
    assert log.kept(succeeded_31_days_ago, failed_91_days_ago) == [False, False]
    assert log.kept(succeeded_2_days_ago, failed_31_days_ago) == [True, True]
    assert log.kept(*unfinished_91_days_ago) == [True] * 4


def test_a_pruned_commands_provider_calls_go_with_it_and_the_others_stay(
    retention: Callable[..., Retention],
) -> None:
    log = retention()
    calls = SqlProviderCallLog(log.app.database())
    old = log.run(CommandStatus.SUCCEEDED)
    log.clock.advance(timedelta(days=29))
    recent = log.run(CommandStatus.SUCCEEDED)
    for command_id, key in ((old, "k-old"), (recent, "k-recent"), (None, "k-operator")):
        calls.record(
            ProviderCall(
                operation="create_customer",
                subject="billing_account:ba_1",
                command_id=command_id,
                idempotency_key=key,
                outcome=CallOutcome.SUCCEEDED,
                error=None,
                started_at=log.clock.now() - timedelta(days=29),
                duration_ms=3,
            )
        )
    log.clock.advance(timedelta(days=2))

    assert prune_command_log(PruneCommandLog(), log.app).total == 1

    with log.app.database()() as session:
        kept = session.scalars(select(ProviderCallRow.idempotency_key)).all()
    assert set(kept) == {"k-operator", "k-recent"}


def test_rejected_commands_go_after_their_own_shorter_retention(
    retention: Callable[..., Retention],
) -> None:
    log = retention(rejected_command_retention_days=3)
    rejected_4_days_ago = log.run(CommandStatus.REJECTED)
    failed_4_days_ago = log.run(CommandStatus.FAILED)
    log.clock.advance(timedelta(days=2))
    rejected_2_days_ago = log.run(CommandStatus.REJECTED)
    log.clock.advance(timedelta(days=2))

    report = prune_command_log(PruneCommandLog(), log.app)

    assert [(part.status, part.count) for part in report.pruned] == [
        (CommandStatus.SUCCEEDED, 0),
        (CommandStatus.FAILED, 0),
        (CommandStatus.REJECTED, 1),
    ]
    assert log.kept(rejected_4_days_ago, rejected_2_days_ago, failed_4_days_ago) == [
        False,
        True,
        True,
    ]


def test_a_replayed_failed_command_is_kept_until_its_new_run_is_old(
    retention: Callable[..., Retention],
) -> None:
    log = retention()
    command_id = log.run(CommandStatus.FAILED)
    log.clock.advance(timedelta(days=100))

    log.log.requeue(command_id)
    prune_command_log(PruneCommandLog(), log.app)
    kept_while_queued = log.kept(command_id)
    log.log.begin(command_id, ENABLE, {"user_id": command_id}, source="api")
    log.log.succeed(command_id, {})
    log.clock.advance(timedelta(days=29))
    prune_command_log(PruneCommandLog(), log.app)
    kept_29_days_after_its_new_run = log.kept(command_id)
    log.clock.advance(timedelta(days=2))
    prune_command_log(PruneCommandLog(), log.app)

    assert kept_while_queued + kept_29_days_after_its_new_run == [True, True]
    assert log.kept(command_id) == [False]


def test_the_idempotency_key_of_a_pruned_command_makes_a_new_command(
    retention: Callable[..., Retention],
) -> None:
    log = retention()
    key = uuid.uuid4().hex
    first = log.run(CommandStatus.SUCCEEDED, key=key)
    with pytest.raises(DuplicateCommand):
        log.run(CommandStatus.QUEUED, key=key)
    log.clock.advance(timedelta(days=31))

    prune_command_log(PruneCommandLog(), log.app)
    forgotten = log.log.find_by_idempotency_key("cli_1", key)
    second = log.run(CommandStatus.QUEUED, key=key)
    found = log.log.find_by_idempotency_key("cli_1", key)

    assert forgotten is None
    assert found is not None
    assert (found.id, found.status) == (second, CommandStatus.QUEUED)
    assert second != first


@dataclass
class Transactions:
    """The statements of each transaction an engine committed: the first word of each."""

    committed: list[list[str]]
    current: list[str]

    def with_a_delete(self) -> list[list[str]]:
        return [statements for statements in self.committed if "DELETE" in statements]


@pytest.fixture
def transactions(retention: Callable[..., Retention]) -> Iterator[Callable[[str], Transactions]]:
    """Watch the transactions committed on a database's engine (in this process)."""
    listening: list[tuple[Any, str, Callable[..., None]]] = []

    def watch(url: str) -> Transactions:
        seen = Transactions([], [])
        engine = get_engine(url)

        def statement(_conn: Any, _cursor: Any, sql: str, *_: Any) -> None:
            seen.current.append(sql.split()[0].upper())

        def commit(_conn: Any) -> None:
            seen.committed.append(seen.current[:])
            seen.current.clear()

        for name, listener in (("before_cursor_execute", statement), ("commit", commit)):
            event.listen(engine, name, listener)
            listening.append((engine, name, listener))
        return seen

    yield watch
    for engine, name, listener in listening:
        event.remove(engine, name, listener)


def test_more_candidates_than_a_batch_are_deleted_in_batches_each_its_own_commit(
    retention: Callable[..., Retention], transactions: Callable[[str], Transactions]
) -> None:
    log = retention(command_retention_batch=2, command_retention_max_batches=3)
    commands = [log.run(CommandStatus.SUCCEEDED) for _ in range(7)]
    log.clock.advance(timedelta(days=31))
    seen = transactions(log.url)

    first_sweep = prune_command_log(PruneCommandLog(), log.app)
    left_after_the_first = log.kept(*commands)
    second_sweep = prune_command_log(PruneCommandLog(), log.app)

    assert (first_sweep.total, first_sweep.batches, first_sweep.complete) == (6, 3, False)
    assert left_after_the_first == [False] * 6 + [True]
    assert (second_sweep.total, second_sweep.batches, second_sweep.complete) == (1, 3, True)
    # Each batch that found commands deleted their provider calls, then them, in a transaction
    # of its own (failed and rejected found none, and deleted nothing).
    assert [statements.count("DELETE") for statements in seen.with_a_delete()] == [2] * 4
    assert log.kept(*commands) == [False] * 7


def billing_worker(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    """Run ``billing-worker ARGS`` as an operator would, on the database at ``url``."""
    return subprocess.run(
        [sys.executable, "-m", "worker.cli", *args],
        env=settings_environment({"BILLING_DATABASE_URL": url}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_operator_counts_with_a_dry_run_then_prunes_from_the_command_line(
    retention: Callable[..., Retention],
) -> None:
    log = retention()  # its clock stands long before the real one
    old = [
        log.run(CommandStatus.SUCCEEDED),
        log.run(CommandStatus.FAILED),
        log.run(CommandStatus.REJECTED),
    ]
    log.clock.advance(SystemClock().now() - log.clock.now() - timedelta(days=1))
    recent = log.run(CommandStatus.SUCCEEDED)

    dry_run = billing_worker("commands", "prune", "--dry-run", url=log.url)
    kept_by_the_dry_run = log.kept(*old)
    pruned = billing_worker("commands", "prune", url=log.url)

    assert dry_run.returncode == 0, dry_run.stderr
    assert dry_run.stdout.startswith("would prune 3 commands: 1 succeeded before ")
    assert ", 1 failed before " in dry_run.stdout
    assert ", 1 rejected before " in dry_run.stdout
    assert kept_by_the_dry_run == [True, True, True]
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.startswith("pruned 3 commands: 1 succeeded before ")
    assert log.kept(*old, recent) == [False, False, False, True]


def test_on_postgresql_a_command_another_transaction_holds_is_left_for_a_later_sweep(
    retention: Callable[..., Retention], backend: str
) -> None:
    if backend != "postgresql":
        pytest.skip("SQLite has no row locks: one writer at a time")
    log = retention()
    held, other = log.run(CommandStatus.SUCCEEDED), log.run(CommandStatus.SUCCEEDED)
    log.clock.advance(timedelta(days=31))

    with session_factory(log.url).begin() as replaying:  # e.g. an operator's replay
        replaying.get(CommandRow, held, with_for_update=True)
        while_held = prune_command_log(PruneCommandLog(), log.app)
        kept_while_held = log.kept(held, other)
    afterwards = prune_command_log(PruneCommandLog(), log.app)

    assert (while_held.total, kept_while_held) == (1, [True, False])
    assert (afterwards.total, log.kept(held)) == (1, [False])

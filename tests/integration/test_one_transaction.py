"""A command run in one transaction (``CommandJournal.run_in_one_transaction``) on the real
command log and tables (SQLite, PostgreSQL), with the real enable-user handler: its start, its
change, its event and its outcome are committed together, or nothing is."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from adapters.db.command_log import SqlCommandLog
from adapters.db.engine import session_factory
from adapters.db.models import EventRow, UserRow
from adapters.db.uow import SqlUnitOfWork
from application.handlers.users import enable_user
from application.one_transaction import InOneTransaction
from domain.errors import NotFound
from domain.messages import CommandStatus
from domain.ports.commands import CannotRunInOneTransaction
from domain.ports.repositories import UnitOfWork
from domain.users import EnableUser, NewUser, User, UserState
from tests.support.fakes.application import FakeBillingPolicy
from tests.support.fakes.clock import FakeClock

ENABLE = EnableUser.TASK_NAME
Work = Callable[[UnitOfWork], dict[str, Any]]


def payload(command_id: str, user_id: str) -> dict[str, Any]:
    return {"command_id": command_id, "user_id": user_id, "version": 1}


@dataclass
class Context:
    """The handler's context: the test's clock and the billing defaults."""

    clock: FakeClock = field(default_factory=FakeClock)
    billing: FakeBillingPolicy = field(default_factory=FakeBillingPolicy)

    def unit_of_work(self) -> UnitOfWork:
        raise AssertionError("a command run in one transaction opens no unit of work")

    def billing_provider(self) -> Any:
        raise AssertionError("not called")


@dataclass
class Database:
    sessions: sessionmaker[Session]
    log: SqlCommandLog
    context: Context
    runs: list[str] = field(default_factory=list)

    def add_user(self, user_id: str, *, disabled: bool = True) -> None:
        spec = NewUser(email=f"{user_id}@acme.example", id=user_id, disabled=disabled)
        with SqlUnitOfWork(self.sessions) as uow:
            uow.users.add(User.new(user_id, spec, self.context.clock.now()))
            uow.commit()

    def accept_as_the_api(self, command_id: str, user_id: str) -> None:
        self.log.accept(
            command_id=command_id,
            command_type=ENABLE,
            payload=payload(command_id, user_id),
            client_id=None,
            idempotency_key=None,
            request_fingerprint=None,
        )

    def enable(self, command_id: str, user_id: str) -> Callable[[UnitOfWork], dict[str, Any]]:
        """The runner's work for an enable-user command (the real handler)."""
        command = EnableUser(command_id=command_id, user_id=user_id)

        def work(uow: UnitOfWork) -> dict[str, Any]:
            self.runs.append(command_id)
            result = enable_user(command, InOneTransaction(self.context, uow))
            return result.model_dump(mode="json")

        return work

    def run(
        self,
        command_id: str,
        user_id: str,
        work: Callable[[UnitOfWork], dict[str, Any]] | None = None,
    ) -> Any:
        return self.log.run_in_one_transaction(
            command_id,
            ENABLE,
            payload(command_id, user_id),
            source="queue",
            work=work or self.enable(command_id, user_id),
        )

    def user_disabled(self, user_id: str) -> bool:
        with SqlUnitOfWork(self.sessions) as uow:
            user = uow.users.get(user_id)
            assert user is not None
            return user.state is UserState.DISABLED

    def events(self) -> int:
        with self.sessions() as session:
            return session.scalar(select(func.count()).select_from(EventRow)) or 0


@contextmanager
def statements_of(sessions: sessionmaker[Session]) -> Iterator[list[str]]:
    """The statements sent to the database meanwhile, each as its verb and table
    (``SELECT users``), and ``COMMIT``."""
    engine: Engine = sessions.kw["bind"]
    sent: list[str] = []

    def on_statement(*arguments: Any) -> None:
        words = arguments[2].split()
        verb = words[0].upper()
        keyword = {"SELECT": "FROM", "INSERT": "INTO", "UPDATE": "UPDATE"}.get(verb)
        upper = [word.upper() for word in words]
        table = words[upper.index(keyword) + 1] if keyword in upper else "?"
        sent.append(f"{verb} {table}")

    def on_commit(_connection: Any) -> None:
        sent.append("COMMIT")

    event.listen(engine, "before_cursor_execute", on_statement)
    event.listen(engine, "commit", on_commit)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", on_statement)
        event.remove(engine, "commit", on_commit)


@pytest.fixture
def db(make_database: Callable[[str], str]) -> Database:
    context = Context()
    sessions = session_factory(make_database(f"one_tx_{uuid.uuid4().hex[:8]}"))
    return Database(sessions, SqlCommandLog(sessions, context.clock), context)


def test_a_command_run_in_one_transaction_commits_its_change_event_and_outcome_together(
    db: Database,
) -> None:
    db.add_user("usr_1")

    outcome = db.run("c1", "usr_1")

    assert outcome.status is CommandStatus.SUCCEEDED
    assert outcome.result == {"user_id": "usr_1", "was_already_enabled": False}
    record = db.log.get("c1")
    assert record is not None
    assert (record.status, record.attempts, record.source) == (CommandStatus.SUCCEEDED, 1, "queue")
    assert record.finished_at is not None
    assert not db.user_disabled("usr_1")
    assert db.events() == 1


def test_an_enable_user_command_reads_its_user_once_and_sends_four_statements_and_a_commit(
    db: Database,
) -> None:
    db.add_user("usr_1")
    db.add_user("usr_2")
    db.accept_as_the_api("c2", "usr_2")

    with statements_of(db.sessions) as published_straight:
        db.run("c1", "usr_1")
    with statements_of(db.sessions) as accepted_by_the_api:
        db.run("c2", "usr_2")

    # The user the handler read (and locked) is the row it saves: not read a second time.
    # The entry is not read first: one insert logs it succeeded, or finishes the entry the
    # API logged (its ON CONFLICT branch).
    assert published_straight == [
        "SELECT users",
        "UPDATE users",
        "INSERT events",
        "INSERT commands",
        "COMMIT",
    ]
    assert accepted_by_the_api == published_straight


def test_a_command_the_api_accepted_ends_succeeded_on_its_entry(db: Database) -> None:
    db.add_user("usr_1")
    db.accept_as_the_api("c1", "usr_1")

    outcome = db.run("c1", "usr_1")

    assert outcome.status is CommandStatus.SUCCEEDED
    record = db.log.get("c1")
    assert record is not None
    assert (record.status, record.attempts, record.source) == (CommandStatus.SUCCEEDED, 1, "api")
    assert record.result == {"user_id": "usr_1", "was_already_enabled": False}


def test_a_redelivered_command_returns_its_outcome_and_changes_nothing(db: Database) -> None:
    db.add_user("usr_1")
    first = db.run("c1", "usr_1")
    with db.sessions.begin() as session:  # the user disabled again: a second run would show
        session.execute(update(UserRow).where(UserRow.id == "usr_1").values(state="disabled"))

    outcome = db.run("c1", "usr_1")

    assert (outcome.status, outcome.result, outcome.attempts) == (
        CommandStatus.SUCCEEDED,
        first.result,
        first.attempts,
    )
    assert db.user_disabled("usr_1")
    assert db.events() == 1


def test_when_the_handler_raises_nothing_is_recorded(db: Database) -> None:
    with pytest.raises(NotFound):
        db.run("c1", "usr_missing")

    assert db.log.get("c1") is None
    assert db.events() == 0


def test_a_change_left_uncommitted_rolls_everything_back(db: Database) -> None:
    db.add_user("usr_1")

    def enable_without_commit(uow: UnitOfWork) -> dict[str, Any]:
        with uow:
            user = uow.users.get("usr_1", for_update=True)
            assert user is not None
            user.enable(db.context.clock.now())
            uow.users.save(user)
        return {}

    with pytest.raises(CannotRunInOneTransaction):
        db.run("c1", "usr_1", enable_without_commit)

    assert db.log.get("c1") is None
    assert db.user_disabled("usr_1")


def test_a_command_another_delivery_runs_is_left_to_it(db: Database) -> None:
    db.add_user("usr_1")
    assert db.log.begin("c1", ENABLE, payload("c1", "usr_1"), source="queue") is None

    assert db.run("c1", "usr_1") is None

    assert db.user_disabled("usr_1")
    assert db.events() == 0
    record = db.log.get("c1")
    assert record is not None
    assert record.status is CommandStatus.RUNNING


def test_an_id_naming_another_command_is_left_to_the_usual_way(db: Database) -> None:
    db.add_user("usr_1")
    db.add_user("usr_2")
    db.run("c1", "usr_1")

    assert db.run("c1", "usr_2") is None

    assert db.user_disabled("usr_2")
    assert db.events() == 1


def test_a_delivery_that_began_meanwhile_is_left_the_command_and_this_one_rolls_back(
    db: Database,
) -> None:
    db.add_user("usr_1")
    db.accept_as_the_api("c1", "usr_1")
    enable = db.enable("c1", "usr_1")

    def raced(uow: UnitOfWork) -> dict[str, Any]:
        # Another delivery of the same command starts before this one writes its entry.
        db.log.begin("c1", ENABLE, payload("c1", "usr_1"), source="queue")
        return enable(uow)

    assert db.run("c1", "usr_1", raced) is None

    assert db.user_disabled("usr_1")
    record = db.log.get("c1")
    assert record is not None
    assert (record.status, record.attempts) == (CommandStatus.RUNNING, 1)
    assert db.events() == 0

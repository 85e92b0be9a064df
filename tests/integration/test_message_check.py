"""The e2e tests' schema check (``tests/support/message_check.py``) names each recorded
message that does not match its schema, on both databases, once."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from sqlalchemy.orm import Session, sessionmaker

from adapters.clock import SystemClock
from adapters.db.command_log import SqlCommandLog
from adapters.db.engine import get_engine, session_factory
from adapters.db.models import Base, EventRow
from domain.events.users import UserEnabledEvent
from domain.users import User, UserState
from tests.support.message_check import MessageCheck

NOW = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
ENABLE_SCHEMA = "schemas/commands/users.enable.v1.json"


@pytest.fixture
def database_url(make_database: Callable[[str], str]) -> str:
    return make_database(f"message_check_{uuid.uuid4().hex[:8]}")


@pytest.fixture
def sessions(database_url: str) -> sessionmaker[Session]:
    return session_factory(database_url)


def succeeded(log: SqlCommandLog, command_type: str, **payload: object) -> str:
    command_id = f"c-{uuid.uuid4().hex[:8]}"
    log.begin(command_id, command_type, {"command_id": command_id, **payload}, source="queue")
    log.succeed(command_id, {})
    return command_id


def test_a_succeeded_command_that_does_not_match_its_schema_is_named_once_with_its_paths(
    sessions: sessionmaker[Session],
) -> None:
    log = SqlCommandLog(sessions, SystemClock())
    succeeded(log, "users.enable", user_id="usr_1")
    bad = succeeded(log, "users.enable", user="usr_1")
    unknown = succeeded(log, "users.rename", user_id="usr_1")
    failed = f"c-{uuid.uuid4().hex[:8]}"
    log.begin(failed, "users.enable", {"command_id": failed, "user_id": 7}, source="queue")
    log.fail(failed, {"code": 3})
    check = MessageCheck(sessions)

    assert set(check.violations()) == {
        f"command {bad} (users.enable) does not match {ENABLE_SCHEMA}: at $: "
        "'user_id' is a required property",
        f"command {bad} (users.enable) does not match {ENABLE_SCHEMA}: at $: "
        "Additional properties are not allowed ('user' was unexpected)",
        f"command {unknown} (users.rename): there is no schema "
        "schemas/commands/users.rename.v1.json (run python -m adapters.contracts.schemas)",
    }
    assert check.violations() == []
    later = succeeded(log, "users.enable", user_id="usr 2")
    assert [line.split(": ", 2)[:2] for line in check.violations()] == [
        [f"command {later} (users.enable) does not match {ENABLE_SCHEMA}", "at $.user_id"]
    ]


def test_events_are_checked_once_their_table_exists(
    database_url: str, sessions: sessionmaker[Session]
) -> None:
    engine = get_engine(database_url)
    events = Base.metadata.tables[EventRow.__tablename__]
    events.drop(engine)  # as before migration 0008
    check = MessageCheck(sessions)
    assert check.violations() == []
    events.create(engine)
    user = User("usr_1", "a@example.com", "A", UserState.ENABLED, NOW, NOW)
    good = UserEnabledEvent.of(user, command_id="c1", now=NOW)
    document = good.model_dump(mode="json")
    rows = [
        (good.id, 1, document),
        ("evt_bad", 1, {**document, "id": "evt_" + "b" * 32, "data": {"user_id": "usr_1"}}),
        ("evt_v2", 2, {**document, "id": "evt_v2", "version": 2}),
    ]
    with engine.begin() as connection:
        for event_id, version, body in rows:
            connection.execute(
                events.insert().values(
                    id=event_id,
                    type=good.type,
                    version=version,
                    subject_key=good.subject_key,
                    command_id="c1",
                    occurred_at=NOW,
                    document=body,
                )
            )

    found = check.violations()

    assert [line.split(": at ")[0] for line in found] == [
        "event evt_bad (user.enabled v1, sequence 2) does not match "
        "schemas/events/user.enabled.v1.json",
        "event evt_v2 (user.enabled v2, sequence 3): there is no schema "
        "schemas/events/user.enabled.v2.json (run python -m adapters.contracts.schemas)",
    ]
    assert "$.data: 'state' is a required property" in found[0]
    assert check.violations() == []

"""What the API asks of the command log on every command, on SQLite and PostgreSQL (issue
34): recording it and reading it are one statement each, sent without the ORM's session and
unit of work, and read back exactly as recorded."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from adapters.clock import SystemClock
from adapters.db.command_log import SqlCommandLog
from adapters.db.engine import get_engine, session_factory


@contextmanager
def counted(url: str) -> Iterator[tuple[list[str], list[Session]]]:
    """The statements sent to ``url``'s engine, and the ORM sessions begun, in the block."""
    statements: list[str] = []
    sessions: list[Session] = []

    def statement(_conn: Any, _cursor: Any, sql: str, *_args: Any) -> None:
        statements.append(sql.split(None, 1)[0].upper())

    def session_begun(session: Session, *_args: Any) -> None:
        sessions.append(session)

    engine = get_engine(url)
    event.listen(engine, "before_cursor_execute", statement)
    event.listen(Session, "after_begin", session_begun)
    try:
        yield statements, sessions
    finally:
        event.remove(engine, "before_cursor_execute", statement)
        event.remove(Session, "after_begin", session_begun)


def test_the_api_records_a_command_in_one_insert_and_reads_it_in_one_select_without_the_orm(
    fresh_database: str,
) -> None:
    log = SqlCommandLog(session_factory(fresh_database), SystemClock())
    get_engine(fresh_database).connect().close()  # the pool's first connection set up before
    command_id = str(uuid.uuid4())

    with counted(fresh_database) as (recording, sessions_recording):
        recorded = log.accept(
            command_id=command_id,
            command_type="users.enable",
            payload={"command_id": command_id, "user_id": "usr_1", "version": 1},
            client_id="cli_1",
            idempotency_key="key-1",
            request_fingerprint="f" * 64,
        )
    with counted(fresh_database) as (reading, sessions_reading):
        read = log.get(command_id)

    assert (recording, reading) == (["INSERT"], ["SELECT"])
    assert sessions_recording == sessions_reading == []
    assert read == recorded
    assert log.get(str(uuid.uuid4())) is None

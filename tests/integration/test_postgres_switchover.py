"""A PostgreSQL switchover seen by one engine on libpq's multi-host URL
(``host=primary&host=standby&target_session_attrs=read-write``): the standby promoted, the
old primary stopped or left up read-only. The first write that meets the old primary fails
with an error the unit of work counts as transient, its connection and the pool's older ones
are discarded, and the next write lands on the new primary without a restart."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import sessionmaker

from adapters.clock import SystemClock
from adapters.db.command_log import SqlCommandLog
from adapters.db.engine import build_engine
from adapters.db.migrate import upgrade
from adapters.db.uow import is_transient_db_error, is_unreachable_or_read_only
from domain.messages import CommandStatus
from tests.support.postgres import StreamingPair, start_streaming_pair

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture
def pair() -> Iterator[StreamingPair]:
    try:
        started = start_streaming_pair()
    except Exception as error:
        if IN_CI:
            raise
        pytest.skip(f"PostgreSQL (with pg_basebackup) not available: {error}")
    yield started
    started.stop()


@pytest.fixture
def engine(pair: StreamingPair) -> Iterator[Engine]:
    url = pair.create_database(f"switch_{uuid.uuid4().hex[:8]}")
    upgrade(url)
    built = build_engine(url)
    yield built
    built.dispose()


def accept(log: SqlCommandLog) -> str:
    command_id = uuid.uuid4().hex
    log.accept(
        command_id=command_id,
        command_type="users.enable",
        payload={"user_id": "usr_1"},
        client_id=None,
        idempotency_key=None,
        request_fingerprint=None,
    )
    return command_id


def server_port(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT current_setting('port')")).scalar_one())


def write_once_after_a_transient_error(log: SqlCommandLog) -> tuple[BaseException | None, str]:
    """Accept a command; on an error, say whether it is transient and try once more."""
    try:
        return None, accept(log)
    except Exception as error:
        failed = error
    assert is_transient_db_error(failed), f"not counted as transient: {failed!r}"
    return failed, accept(log)


@pytest.mark.parametrize("old_primary", ["stopped", "read-only"])
def test_after_a_switchover_the_next_write_after_one_transient_error_lands_on_the_new_primary(
    pair: StreamingPair, engine: Engine, old_primary: str
) -> None:
    log = SqlCommandLog(sessionmaker(bind=engine), SystemClock())
    before = accept(log)
    assert server_port(engine) == pair.primary.port
    # Connections in the pool, to the old primary, as a busy process has.
    held = [engine.connect() for _ in range(3)]
    for connection in held:
        connection.close()

    if old_primary == "stopped":
        pair.primary.stop_server("fast")
    else:
        pair.make_primary_read_only()
        pair.caught_up()
    pair.promote()

    error, after = write_once_after_a_transient_error(log)
    if old_primary == "read-only":
        assert error is not None, "the pooled connection to the read-only server was used"
        assert getattr(getattr(error, "orig", None), "sqlstate", None) == "25006"
    assert server_port(engine) == pair.standby.port
    assert log.get(before) is not None, "what the old primary acknowledged is on the new one"
    assert log.get(after) is not None
    # Every pooled connection to the old primary was discarded with the one that failed:
    # the next checkouts all reach the new primary.
    assert {server_port(engine) for _ in range(4)} == {pair.standby.port}


def test_a_write_refused_by_a_read_only_server_is_transient(pair: StreamingPair) -> None:
    # What a demoted primary left up read-only answers every write with: 25006.
    pair.make_primary_read_only()
    engine = build_engine(pair.primary.admin_url)
    try:
        with engine.connect() as connection:
            connection.execute(text("CREATE TABLE t (x int)"))
    except Exception as error:
        read_only = error
    else:
        raise AssertionError("a write on a read-only server succeeded")
    finally:
        engine.dispose()
    assert getattr(getattr(read_only, "orig", None), "sqlstate", None) == "25006"
    assert is_transient_db_error(read_only)
    assert is_unreachable_or_read_only(read_only)  # a delivery's records wait it out


@pytest.mark.parametrize("old_primary", ["stopped", "read-only"])
def test_a_delivery_records_its_retry_and_its_outcome_across_a_switchover_that_takes_seconds(
    pair: StreamingPair, engine: Engine, old_primary: str
) -> None:
    # A command running on the old primary; its delivery's records meet the switchover
    # while no server accepts writes yet (the standby is promoted 1.5 s later).
    runs = SqlCommandLog(sessionmaker(bind=engine), SystemClock())
    retried, finished = uuid.uuid4().hex, uuid.uuid4().hex
    for command_id in (retried, finished):
        assert runs.begin(command_id, "users.enable", {"user_id": "u"}, source="queue") is None
    if old_primary == "stopped":
        pair.primary.stop_server("fast")
    else:
        pair.make_primary_read_only()
        pair.caught_up()
    promoting = threading.Timer(1.5, pair.promote)
    promoting.start()
    try:
        began = time.monotonic()
        runs.retrying(retried, {"code": 14, "message": "database", "details": []})
        runs.succeed(finished, {})
        waited = time.monotonic() - began
    finally:
        promoting.join()
    # Neither is left running (under the lease of a delivery that has gone).
    assert [
        record.status if (record := runs.get(each)) else None for each in (retried, finished)
    ] == [
        CommandStatus.RETRYING,
        CommandStatus.SUCCEEDED,
    ]
    assert waited >= 1.0, "recorded before any server could write"
    assert server_port(engine) == pair.standby.port

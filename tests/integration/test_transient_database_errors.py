"""Which database errors are transient (retried by workers, a 503 from the API): the errors
are made by real drivers, not built by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from adapters.db.uow import is_transient_db_error, is_unreachable_or_read_only
from tests.support.postgres import PostgresCluster
from worker.local.embedded import free_port


def error_of(url: str, statement: str = "SELECT 1") -> Exception:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            connection.execute(text(statement))
    except Exception as error:
        return error
    finally:
        engine.dispose()
    raise AssertionError(f"{statement} on {url} did not fail")


def test_a_postgresql_server_refusing_connections_is_transient() -> None:
    # Nothing listens there: what a client meets while PostgreSQL restarts.
    refused = error_of(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/billing")
    assert "refused" in str(refused).lower()
    assert is_transient_db_error(refused)


def test_a_postgresql_session_ended_by_an_administrator_is_transient(
    postgres_cluster: PostgresCluster,
) -> None:
    # An administrator ending the session: the first error a restart (-m fast) gives.
    ended = error_of(postgres_cluster.admin_url, "SELECT pg_terminate_backend(pg_backend_pid())")
    assert is_transient_db_error(ended)


@pytest.mark.parametrize("statement", ["SELECT * FROM no_such_table", "SELEC 1"])
def test_a_mistake_in_a_statement_is_not_transient(tmp_path: Path, statement: str) -> None:
    assert not is_transient_db_error(error_of(f"sqlite:///{tmp_path / 'x.db'}", statement))


def test_a_refused_connection_is_unreachable_but_a_locked_sqlite_database_is_only_busy(
    tmp_path: Path,
) -> None:
    # What a delivery waits out when it records its command (a switchover's seconds), and
    # what it leaves to its retry's backoff (a lock held elsewhere).
    refused = error_of(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/billing")
    assert is_unreachable_or_read_only(refused)
    url = f"sqlite:///{tmp_path / 'x.db'}"
    holder = create_engine(url)
    with holder.connect() as connection:
        connection.execute(text("CREATE TABLE t (x int)"))
        connection.commit()
        connection.execute(text("BEGIN EXCLUSIVE"))
        locked = error_of(url + "?timeout=0", "INSERT INTO t VALUES (1)")
    holder.dispose()
    assert is_transient_db_error(locked)
    assert not is_unreachable_or_read_only(locked)

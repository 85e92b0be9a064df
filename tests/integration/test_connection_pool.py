"""The PostgreSQL engine's pool (``adapters.db.engine``): a pooled connection is pinged at
checkout only when it may be dead, and a dead one is replaced without an error."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import Connection, Engine, text

from adapters.db import engine as engines
from tests.support.postgres import PostgresCluster
from tests.support.stack import eventually

LAST_STATEMENT = "SELECT 'the last statement'"
PING = ";"
"""SQLAlchemy's ping on PostgreSQL (an empty statement)."""


@pytest.fixture
def engine(postgres_cluster: PostgresCluster) -> Iterator[Engine]:
    built = engines.build_engine(postgres_cluster.create_database("pool_checkout"), 5.0)
    yield built
    built.dispose()


def last_query(cluster: PostgresCluster, pid: int) -> str | None:
    """What the server process ``pid`` ran last, as the server reports it (``None``: the
    process is gone)."""
    admin = cluster.admin_url.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(admin, autocommit=True) as connection:
        row = connection.execute(
            "SELECT query FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
    return None if row is None else str(row[0])


def server_pid(connection: Connection) -> int:
    """The server process of the pooled connection ``connection`` holds."""
    driver = connection.connection.driver_connection
    assert driver is not None
    return int(driver.info.backend_pid)


def used_once(engine: Engine) -> int:
    """Run the last statement on a pooled connection, give it back; its server pid."""
    with engine.connect() as connection:
        pid = int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())
        connection.execute(text(LAST_STATEMENT))
    return pid


def test_a_connection_given_back_moments_ago_is_handed_out_without_a_ping(
    engine: Engine, postgres_cluster: PostgresCluster
) -> None:
    pid = used_once(engine)
    given_back = last_query(postgres_cluster, pid)  # the pool's reset on return

    with engine.connect() as connection:
        assert server_pid(connection) == pid
        assert last_query(postgres_cluster, pid) == given_back


def test_a_connection_idle_past_the_threshold_is_pinged_first(
    engine: Engine, postgres_cluster: PostgresCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = used_once(engine)
    monkeypatch.setattr(engines, "IDLE_BEFORE_PING_SECONDS", 0.0)

    with engine.connect() as connection:
        assert server_pid(connection) == pid
        assert last_query(postgres_cluster, pid) == PING


def test_a_pooled_connection_the_server_ended_is_replaced_at_checkout_without_an_error(
    engine: Engine, postgres_cluster: PostgresCluster
) -> None:
    pid = used_once(engine)
    admin = postgres_cluster.admin_url.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute("SELECT pg_terminate_backend(%s)", (pid,))
    eventually(lambda: last_query(postgres_cluster, pid) is None, 10, "the server process gone")

    with engine.connect() as connection:
        assert connection.execute(text("SELECT 1")).scalar_one() == 1
        assert server_pid(connection) != pid


def test_a_connection_gives_up_on_a_silent_network_after_the_network_timeout(
    postgres_cluster: PostgresCluster,
) -> None:
    built = engines.build_engine(postgres_cluster.create_database("pool_network"), 5.0, 4.0)
    try:
        with built.connect() as connection:
            dbapi = connection.connection.dbapi_connection
            assert dbapi is not None
            parameters = dbapi.info.get_parameters()  # what libpq connected with
    finally:
        built.dispose()
    # Without them a partition holds a statement for the kernel's retransmissions (minutes):
    # tests/chaos/test_partition_postgres.py.
    assert parameters["connect_timeout"] == "4"
    assert parameters["tcp_user_timeout"] == "4000"
    assert parameters["keepalives"] == "1"

"""A PostgreSQL commit held on a live server ends within its bound, as a commit whose outcome
is unknown (``adapters/db/commit_bound.py``), on a real server whose commits wait for a
synchronous standby that never comes: what an old primary left up after a switchover does to
every commit while its standby is gone."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from adapters.db.commit_bound import CommitOutcomeUnknown, CommitWatchdog
from adapters.db.engine import build_engine
from adapters.db.uow import is_transient_db_error, is_unreachable_or_read_only
from tests.support.postgres import PostgresCluster, start_cluster

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
BOUND_SECONDS = 1.0


@pytest.fixture
def held_cluster() -> Iterator[PostgresCluster]:
    """A cluster of the test's own whose commits wait for a standby that never connects."""
    try:
        cluster = start_cluster()
    except Exception as error:
        if IN_CI:
            raise
        pytest.skip(f"PostgreSQL not available: {error}")
    with psycopg.connect(
        f"postgresql://postgres@127.0.0.1:{cluster.port}/postgres", autocommit=True
    ) as admin:
        # The cluster runs with synchronous_commit off (for speed): on, for its sessions.
        admin.execute("ALTER DATABASE postgres SET synchronous_commit = on")
        admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'never_connects'")
        admin.execute("SELECT pg_reload_conf()")
    yield cluster
    cluster.stop()


@pytest.mark.timeout(60)
def test_a_held_commit_raises_an_unknown_outcome_and_the_pool_drops_its_connection(
    held_cluster: PostgresCluster,
) -> None:
    engine = build_engine(held_cluster.url("postgres"), network_timeout=BOUND_SECONDS)
    started = time.monotonic()
    with pytest.raises(OperationalError) as raised, engine.begin() as connection:
        connection.execute(text("CREATE TABLE marks (id int)"))
    waited = time.monotonic() - started

    assert isinstance(raised.value.orig, CommitOutcomeUnknown)
    assert raised.value.connection_invalidated
    assert is_transient_db_error(raised.value)
    assert is_unreachable_or_read_only(raised.value)
    assert BOUND_SECONDS <= waited < BOUND_SECONDS + 5
    # Unknown, not undone: PostgreSQL ends a cancelled wait with the commit made locally.
    with psycopg.connect(
        f"postgresql://postgres@127.0.0.1:{held_cluster.port}/postgres", autocommit=True
    ) as admin:
        made = admin.execute("SELECT to_regclass('marks') IS NOT NULL").fetchone()
    assert made == (True,)
    engine.dispose()


def test_the_watchdog_cancels_only_what_outlives_its_deadline() -> None:
    watchdog = CommitWatchdog()
    cancelled: list[str] = []

    quick = watchdog.watch(5.0, lambda: cancelled.append("quick"))
    assert watchdog.done(quick) is False
    slow = watchdog.watch(0.05, lambda: cancelled.append("slow"))
    time.sleep(0.3)

    assert watchdog.done(slow) is True
    assert cancelled == ["slow"]


def test_an_earlier_deadline_wakes_the_watchdog_from_a_later_one() -> None:
    watchdog = CommitWatchdog()
    fired = threading.Event()
    later = watchdog.watch(30.0, lambda: None)
    sooner = watchdog.watch(0.05, fired.set)

    assert fired.wait(2.0)
    assert watchdog.done(sooner) is True
    assert watchdog.done(later) is False

"""Every query a hot path sends finds its rows through an index, on both databases (issue 46).

A database seeded by ``python3 -m worker.dev seed``'s own generator (a small size: the plans
are what is judged, not the time) is read by each of beat's sweeps, the console's pages and
stories, beat's gauges and the retention, as they run; every statement they send is then
planned (``tests/support/query_plans.py``). A statement that reads a growing table whole (a
sequential scan on PostgreSQL even when scans are made a last resort; a ``SCAN`` on SQLite)
fails the test with its plan, unless it is listed in :data:`READ_WHOLE` with the reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from adapters.db.engine import session_factory
from tests.benchmarks.scale import reads
from tests.benchmarks.scale.rows import Size
from tests.benchmarks.scale.seed import seed_postgresql, seed_sqlite
from tests.support.query_plans import full_scans, plan

SMALL = Size(
    commands=3_000, organizations=1_000, changes=1_500, due_changes=50, scheduled_changes=100
)

READ_WHOLE: dict[str, str] = {}
"""Statements allowed to read a growing table whole (a piece of their SQL → why)."""


@pytest.fixture(scope="module")
def seeded(make_database: Callable[[str], str], backend: str) -> str:
    url = make_database("query_plans")
    if backend == "postgresql":
        seed_postgresql(url, SMALL, 46, time.time())
    else:
        seed_sqlite(Path(url.removeprefix("sqlite:///")), SMALL, 46, time.time())
    return url


def test_no_hot_path_reads_a_growing_table_whole(seeded: str, redis_server: str) -> None:
    recording = reads.what_the_hot_paths_send(seeded, f"{redis_server}/9")
    engine = session_factory(seeded)().get_bind()
    whole: list[str] = []
    for statement in recording.distinct():
        if any(piece in statement.sql for piece in READ_WHOLE):
            continue
        planned = plan(engine, statement)  # type: ignore[arg-type]
        if full_scans(planned):
            whole.append(f"{' '.join(statement.sql.split())}\n  {planned}")
    assert len(recording.distinct()) > 30
    assert not whole, "\n\n".join(whole)

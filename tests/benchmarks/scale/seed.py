"""Seed a production-sized database through our own schema (issue 46).

    python3 -m worker.dev seed [--database postgresql|sqlite|both] [--commands N] [--dir DIR]

PostgreSQL gets 10,000,000 commands (a year at about 0.3 a second… of history kept, with
their provider calls, events and deliveries), 1,000,000 organizations with billing accounts
and subscriptions, and 1,000,000 plan changes of which 1,000 are due; SQLite a tenth of it.
The schema is Alembic's (``adapters.db.migrate.upgrade``); rows are streamed from Python
generators (``rows``, ``history``) with PostgreSQL's ``COPY`` (one connection per table, all
streaming at once) or SQLite's ``executemany`` in one transaction, secondary indexes dropped
first and built after, then ``ANALYZE``. The PostgreSQL cluster is kept in ``DIR/postgresql``
(``cluster.py``) and the SQLite file in ``DIR/sqlite/billing.db``; ``DIR/seeded.json``
records what was seeded, when, and how long each step took. ``bench scale`` uses them.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.db import status_counts
from adapters.db.migrate import upgrade
from tests.benchmarks.harness import ROOT
from tests.benchmarks.scale import history, rows
from tests.benchmarks.scale.cluster import scale_cluster
from tests.benchmarks.scale.rows import COLUMNS, Row, Size

DEFAULT_DIR = ROOT / ".benchmarks" / "scale"
BATCH = 20_000


def streams(size: Size, dialect: str, seed: int, now: float) -> Iterator[tuple[str, Iterable[Row]]]:
    """Every table's rows in load order; the command log's tables come together, command by
    command (``_log``)."""
    stamp = rows.stamp_for(dialect, now)
    rng = random.Random(seed)
    yield "plans", rows.plans(stamp)
    yield "organizations", rows.organizations(size, stamp)
    yield "users", rows.users(size, stamp)
    yield "billing_accounts", rows.billing_accounts(size, stamp, rng)
    yield "subscriptions", rows.subscriptions(size, stamp, rng)
    yield "scheduled_changes", rows.scheduled_changes(size, stamp, rng)
    yield "webhook_endpoints", history.webhook_endpoints(stamp)


LOG_TABLES = ("commands", "provider_calls", "events", "webhook_deliveries")


def _log(size: Size, dialect: str, seed: int, now: float) -> Iterator[tuple[str, Row]]:
    for written in history.History(size, rows.stamp_for(dialect, now), random.Random(seed + 1)):
        yield "commands", written.command
        for call in written.provider_calls:
            yield "provider_calls", call
        for event in written.events:
            yield "events", event
        for delivery in written.webhook_deliveries:
            yield "webhook_deliveries", delivery


def _copy_text(row: Row) -> str:
    # Our values hold no tab, newline or backslash: COPY's text format needs no escaping.
    return "\t".join(r"\N" if value is None else str(value) for value in row) + "\n"


# --- PostgreSQL ---------------------------------------------------------------------------


def seed_postgresql(url: str, size: Size, seed: int, now: float) -> dict[str, float]:
    import psycopg

    timings: dict[str, float] = {}
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    began = time.perf_counter()
    upgrade(url)
    tables = list(COLUMNS)
    with psycopg.connect(dsn, autocommit=True) as admin:
        dropped = _drop_indexes_postgresql(admin, tables)
    timings["schema_s"] = time.perf_counter() - began

    began = time.perf_counter()
    with ExitStack() as stack:
        copies: dict[str, Any] = {}
        for table in tables:
            connection = stack.enter_context(psycopg.connect(dsn))
            # Foreign keys are not checked row by row while loading (the rows hold together
            # by construction); constraints come back, checked, with the indexes.
            connection.execute("SET session_replication_role = replica")
            cursor = stack.enter_context(connection.cursor())
            columns = ", ".join(f'"{name}"' for name in COLUMNS[table])
            copies[table] = stack.enter_context(cursor.copy(f"COPY {table} ({columns}) FROM STDIN"))
        buffers: dict[str, list[str]] = {table: [] for table in tables}

        def put(table: str, row: Row) -> None:
            buffer = buffers[table]
            buffer.append(_copy_text(row))
            if len(buffer) >= BATCH:
                copies[table].write("".join(buffer))
                buffer.clear()

        for table, table_rows in streams(size, "postgresql", seed, now):
            for row in table_rows:
                put(table, row)
        for table, row in _log(size, "postgresql", seed, now):
            put(table, row)
        for table, buffer in buffers.items():
            if buffer:
                copies[table].write("".join(buffer))
    timings["copy_s"] = time.perf_counter() - began

    began = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SET maintenance_work_mem = '1GB'")
        for statement in dropped:
            admin.execute(statement)
        for table, column in (("events", "sequence"), ("provider_calls", "id")):
            admin.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "  # noqa: S608
                f"(SELECT coalesce(max({column}), 1) FROM {table}))"
            )
        # The counts the triggers keep, which did not fire while loading.
        status_counts.recount(admin.execute)
    timings["indexes_s"] = time.perf_counter() - began
    began = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("VACUUM (ANALYZE)")
    timings["analyze_s"] = time.perf_counter() - began
    return timings


def _drop_indexes_postgresql(connection: Any, tables: list[str]) -> list[str]:
    """Drop every index and constraint of ``tables`` but ``NOT NULL``, and every foreign key
    (some point at them from other tables); return the statements
    that make them again: keys and unique constraints, then indexes, then foreign keys
    (checked as they come back)."""
    constraints = connection.execute(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid), contype "
        "FROM pg_constraint WHERE connamespace = 'public'::regnamespace AND "
        "(contype = 'f' OR contype IN ('p', 'u') AND conrelid::regclass::text = ANY(%s)) "
        "ORDER BY contype = 'f' DESC",
        (tables,),
    ).fetchall()
    indexes = connection.execute(
        "SELECT indexname, indexdef FROM pg_indexes "
        "WHERE schemaname = 'public' AND tablename = ANY(%s)",
        (tables,),
    ).fetchall()
    owned = {name for _, name, _, _ in constraints}
    for table, name, _, _ in constraints:  # foreign keys first: they need the keys
        connection.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    for name, _ in indexes:
        if name not in owned:
            connection.execute(f'DROP INDEX "{name}"')
    add = [
        (kind, f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
        for table, name, definition, kind in constraints
    ]
    return (
        [statement for kind, statement in add if kind != "f"]
        + [definition for name, definition in indexes if name not in owned]
        + [statement for kind, statement in add if kind == "f"]
    )


# --- SQLite -------------------------------------------------------------------------------


def seed_sqlite(path: Path, size: Size, seed: int, now: float) -> dict[str, float]:
    timings: dict[str, float] = {}
    began = time.perf_counter()
    path.parent.mkdir(parents=True, exist_ok=True)
    upgrade(f"sqlite:///{path}")
    connection = sqlite3.connect(path, isolation_level=None)
    tables = list(COLUMNS)
    indexes = connection.execute(
        f"SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "  # noqa: S608
        f"AND tbl_name IN ({', '.join('?' for _ in tables)})",
        tables,
    ).fetchall()
    for name, _ in indexes:
        connection.execute(f'DROP INDEX "{name}"')
    connection.execute("PRAGMA journal_mode=OFF")
    connection.execute("PRAGMA synchronous=OFF")
    connection.execute("PRAGMA cache_size=-1000000")
    timings["schema_s"] = time.perf_counter() - began

    began = time.perf_counter()
    connection.execute("BEGIN")
    statements = {
        table: f"INSERT INTO {table} ({', '.join(map(_quoted, columns))}) "  # noqa: S608
        f"VALUES ({', '.join('?' for _ in columns)})"
        for table, columns in COLUMNS.items()
    }
    buffers: dict[str, list[Row]] = {table: [] for table in tables}

    def put(table: str, row: Row) -> None:
        buffer = buffers[table]
        buffer.append(row)
        if len(buffer) >= BATCH:
            connection.executemany(statements[table], buffer)
            buffer.clear()

    for table, table_rows in streams(size, "sqlite", seed, now):
        for row in table_rows:
            put(table, row)
        if buffers[table]:
            connection.executemany(statements[table], buffers[table])
            buffers[table].clear()
    for table, row in _log(size, "sqlite", seed, now):
        put(table, row)
    for table, buffer in buffers.items():
        if buffer:
            connection.executemany(statements[table], buffer)
    connection.execute("COMMIT")
    timings["copy_s"] = time.perf_counter() - began

    began = time.perf_counter()
    for _, sql in indexes:
        connection.execute(sql)
    timings["indexes_s"] = time.perf_counter() - began
    # No ANALYZE: the application never runs it on SQLite, so its planner works without
    # statistics there, and so must the seeded database's.
    connection.execute("PRAGMA journal_mode=WAL")
    connection.close()
    return timings


def _quoted(name: str) -> str:
    return '"' + name + '"'


# --- the command --------------------------------------------------------------------------


def seeded(directory: Path) -> dict[str, Any]:
    """What ``directory`` holds (``seeded.json``), or ``{}``."""
    path = directory / "seeded.json"
    return json.loads(path.read_text()) if path.exists() else {}


def sqlite_path(directory: Path) -> Path:
    return directory / "sqlite" / "billing.db"


def seed(directory: Path, database: str, size: Size, seed_value: int = 46) -> dict[str, Any]:
    """Seed ``database`` (``postgresql`` or ``sqlite``) in ``directory`` afresh; record it."""
    now = time.time()
    if database == "postgresql":
        cluster = scale_cluster(directory / "postgresql", fresh=True)
        try:
            url = cluster.create_database("billing_scale")
            timings = seed_postgresql(url, size, seed_value, now)
            bytes_on_disk = _postgresql_bytes(url)
        finally:
            cluster.stop_server()
    else:
        path = sqlite_path(directory)
        for stale in path.parent.glob("billing.db*"):
            stale.unlink()
        timings = seed_sqlite(path, size, seed_value, now)
        bytes_on_disk = {"database": path.stat().st_size}
    record = {
        "database": database,
        "size": size.__dict__,
        "seed": seed_value,
        "seeded_at": datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
        "seconds": {name: round(value, 1) for name, value in timings.items()},
        "bytes": bytes_on_disk,
    }
    everything = seeded(directory)
    everything[database] = record
    (directory / "seeded.json").write_text(json.dumps(everything, indent=2) + "\n")
    return record


def _postgresql_bytes(url: str) -> dict[str, int]:
    import psycopg

    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn) as connection:
        sizes = connection.execute(
            "SELECT relname, pg_total_relation_size(oid) FROM pg_class "
            "WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace"
        ).fetchall()
        total = connection.execute("SELECT pg_database_size(current_database())").fetchone()
    return {**{name: int(size) for name, size in sizes}, "database": int(total[0] if total else 0)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m worker.dev seed", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--database", choices=("postgresql", "sqlite", "both"), default="both")
    parser.add_argument(
        "--commands",
        type=int,
        default=Size().commands,
        help="commands on PostgreSQL (SQLite gets a tenth); the rest in proportion",
    )
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="where to keep them")
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    size = Size().scaled(args.commands) if args.commands != Size().commands else Size()
    for database in ("postgresql", "sqlite") if args.database == "both" else (args.database,):
        wanted = size if database == "postgresql" else size.tenth()
        print(
            f"seeding {database}: {wanted.commands:,} commands, "
            f"{wanted.organizations:,} organizations, {wanted.changes:,} changes …",
            flush=True,
        )
        record = seed(args.dir, database, wanted)
        print(json.dumps(record, indent=2), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

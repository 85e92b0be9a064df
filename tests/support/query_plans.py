"""The statements a piece of our code sends to the database, and how the database plans them
(issue 46: a hot query that stops using its index fails a test).

:func:`recorded` catches every statement any engine of this process sends while a block runs,
at the DBAPI level (the SQL and parameters as sent); :func:`plan` asks the database how it
runs one (``EXPLAIN`` on PostgreSQL, with sequential scans made a last resort so that one
shows only where no index serves the query; ``EXPLAIN QUERY PLAN`` on SQLite); and
:func:`full_scans` names the tables a plan reads whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.engine import Connection

GROWING_TABLES = (
    "commands",
    "provider_calls",
    "events",
    "webhook_deliveries",
    "scheduled_changes",
    "subscriptions",
    "billing_accounts",
    "organizations",
    "users",
    "renewal_checks",
    "change_previews",
    "audit_entries",
)
"""The tables that grow with the business or with time (plans, endpoints and clients stay
small: a scan of them is cheap at any age)."""


@dataclass(frozen=True)
class Statement:
    sql: str
    parameters: Any
    dialect: str

    @property
    def reads_a_table(self) -> bool:
        return bool(re.match(r"\s*(SELECT|UPDATE|DELETE|WITH)\b", self.sql, re.IGNORECASE))


@dataclass
class Recording:
    statements: list[Statement] = field(default_factory=list)

    def distinct(self) -> list[Statement]:
        """Each statement's text once (the first parameters it was sent with)."""
        seen: dict[str, Statement] = {}
        for statement in self.statements:
            if statement.reads_a_table:
                seen.setdefault(statement.sql, statement)
        return list(seen.values())


@contextmanager
def recorded() -> Iterator[Recording]:
    recording = Recording()

    def catch(
        conn: Connection, cursor: Any, sql: str, parameters: Any, context: Any, many: bool
    ) -> None:
        if not many:
            recording.statements.append(Statement(sql, parameters, conn.dialect.name))

    event.listen(Engine, "before_cursor_execute", catch)
    try:
        yield recording
    finally:
        event.remove(Engine, "before_cursor_execute", catch)


def plan(engine: Engine, statement: Statement) -> str:
    """How the database runs ``statement``: its plan as text (nothing is changed: a
    PostgreSQL plan is asked in a transaction rolled back; SQLite's is not run)."""
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        if statement.dialect == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + statement.sql, statement.parameters)
            lines = [str(row[0]) for row in cursor.fetchall()]
        else:
            cursor.execute("EXPLAIN QUERY PLAN " + statement.sql, statement.parameters)
            lines = [str(row[-1]) for row in cursor.fetchall()]
        raw.rollback()
        return "\n".join(lines)
    finally:
        raw.close()


def full_scans(plan_text: str, tables: Sequence[str] = GROWING_TABLES) -> list[str]:
    """The growing tables ``plan_text`` reads whole: a sequential scan (PostgreSQL), or a scan
    without a search (SQLite; a scan of a whole index reads it whole too)."""
    scanned = set(re.findall(r"Seq Scan on (\w+)", plan_text))
    scanned |= set(re.findall(r"^\s*SCAN (\w+)", plan_text, re.MULTILINE))
    return sorted(table for table in scanned if table in tables)

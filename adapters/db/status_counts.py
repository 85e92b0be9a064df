"""Commands counted by status as they change, not on read (issue 46).

Beat's gauges and the console's home page show how many commands failed and were rejected.
Counted on read, that is a scan of every such command at each scrape: a hundred thousand a
year at a failure rate of 1 %. Instead the database keeps the counts in
``command_status_counts``, one row per counted status, by triggers on ``commands`` (every
insert, change of status and delete, whoever makes it: the API, a worker, the retention, an
operator's replay). Only the rare statuses are counted, so that the common path (a command
that succeeds) never touches a counter row and two workers never wait on one another's.

The counted statuses, ``failed`` and ``rejected``, are written into the SQL as literals.
The SQL is each database's own (PL/pgSQL on PostgreSQL, trigger bodies on SQLite); the
migration that installs it, ``0021``, and the seed for ``bench scale`` call
:func:`install` and :func:`recount`; changing the SQL takes a new migration that installs it
again.
"""

from __future__ import annotations

from typing import Any

_POSTGRESQL = (
    """
    CREATE OR REPLACE FUNCTION count_command_statuses() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status IN ('failed', 'rejected') THEN
            UPDATE command_status_counts SET count = count - 1 WHERE status = OLD.status;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status IN ('failed', 'rejected') THEN
            INSERT INTO command_status_counts (status, count) VALUES (NEW.status, 1)
            ON CONFLICT (status) DO UPDATE SET count = command_status_counts.count + 1;
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER commands_counted_on_insert AFTER INSERT ON commands FOR EACH ROW
    WHEN (NEW.status IN ('failed', 'rejected')) EXECUTE FUNCTION count_command_statuses()
    """,
    """
    CREATE TRIGGER commands_counted_on_update AFTER UPDATE OF status ON commands FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status
          AND (OLD.status IN ('failed', 'rejected') OR NEW.status IN ('failed', 'rejected')))
    EXECUTE FUNCTION count_command_statuses()
    """,
    """
    CREATE TRIGGER commands_counted_on_delete AFTER DELETE ON commands FOR EACH ROW
    WHEN (OLD.status IN ('failed', 'rejected')) EXECUTE FUNCTION count_command_statuses()
    """,
)

_SQLITE = (
    """
    CREATE TRIGGER commands_counted_on_insert AFTER INSERT ON commands
    WHEN NEW.status IN ('failed', 'rejected')
    BEGIN
        INSERT INTO command_status_counts (status, count) VALUES (NEW.status, 1)
        ON CONFLICT (status) DO UPDATE SET count = count + 1;
    END
    """,
    """
    CREATE TRIGGER commands_counted_on_update AFTER UPDATE OF status ON commands
    WHEN OLD.status IS NOT NEW.status
         AND (OLD.status IN ('failed', 'rejected') OR NEW.status IN ('failed', 'rejected'))
    BEGIN
        UPDATE command_status_counts SET count = count - 1
        WHERE status = OLD.status AND OLD.status IN ('failed', 'rejected');
        INSERT INTO command_status_counts (status, count)
        SELECT NEW.status, 1 WHERE NEW.status IN ('failed', 'rejected')
        ON CONFLICT (status) DO UPDATE SET count = count + 1;
    END
    """,
    """
    CREATE TRIGGER commands_counted_on_delete AFTER DELETE ON commands
    WHEN OLD.status IN ('failed', 'rejected')
    BEGIN
        UPDATE command_status_counts SET count = count - 1 WHERE status = OLD.status;
    END
    """,
)

_TRIGGERS = (
    "commands_counted_on_insert",
    "commands_counted_on_update",
    "commands_counted_on_delete",
)


def install(execute: Any, dialect: str) -> None:
    """Create the triggers with ``execute`` (a function running one SQL statement)."""
    for statement in _POSTGRESQL if dialect == "postgresql" else _SQLITE:
        execute(statement)


def uninstall(execute: Any, dialect: str) -> None:
    for trigger in _TRIGGERS:
        execute(
            f"DROP TRIGGER IF EXISTS {trigger} ON commands"
            if dialect == "postgresql"
            else f"DROP TRIGGER IF EXISTS {trigger}"
        )
    if dialect == "postgresql":
        execute("DROP FUNCTION IF EXISTS count_command_statuses()")


RECOUNT = (
    "DELETE FROM command_status_counts",
    "INSERT INTO command_status_counts (status, count) SELECT status, count(*) FROM commands "
    "WHERE status IN ('failed', 'rejected') GROUP BY status",
)
"""Count them once from the log (the migration, and a seed loaded with triggers off)."""


def recount(execute: Any) -> None:
    for statement in RECOUNT:
        execute(statement)

"""The database and the data directory (``adapters/db``, the local stack's files)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field

from worker.settings.section import Section

DATA_DIR_NAME = ".billing-worker"
STACK_FILE = "stack.json"
"""What ``up`` records of the processes it started, in the data directory; read only by
:mod:`worker.local.stack_state` (here its presence marks a local stack's directory)."""


def default_data_dir(start: Path | None = None) -> Path:
    """``./.billing-worker``, unless a parent directory holds the nearest local stack's (one
    with ``stack.json`` or ``billing.db``): as git finds ``.git``, admin commands find the
    stack ``up`` started from anywhere below where it runs."""
    try:
        here = (start or Path.cwd()).resolve()
    except OSError:  # the working directory is gone
        return Path(DATA_DIR_NAME)
    for directory in (here, *here.parents):
        candidate = directory / DATA_DIR_NAME
        if (candidate / STACK_FILE).is_file() or (candidate / "billing.db").is_file():
            return Path(DATA_DIR_NAME) if directory == here else candidate
    return Path(DATA_DIR_NAME)


class StorageSettings(Section):
    """The database and the data directory (``adapters/db``, the local stack's files)."""

    title: ClassVar[str] = "Storage"

    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Where the embedded stack keeps SQLite, Redis data, logs and stack.json "
        "(default: ./.billing-worker, or the nearest such directory of a local stack in a "
        "parent directory).",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL; unset: sqlite:///<data_dir>/billing.db. PostgreSQL: "
        "postgresql+psycopg://user:pass@host/db. A primary with standbys (a switchover or "
        "failover promotes one): every host, in libpq's multi-host form, "
        "postgresql+psycopg://user:pass@/db?host=h1:5432&host=h2:5432"
        "&target_session_attrs=read-write (each process then reconnects to whichever "
        "accepts writes).",
    )
    database_lock_timeout_seconds: float = Field(
        default=10.0,
        gt=0,
        description="How long a statement waits for a lock before failing; such failures "
        "are retried like any transient error.",
    )
    database_network_timeout_seconds: float = Field(
        default=10.0,
        ge=2,
        description="PostgreSQL: how long a connection attempt, or data sent on a connection "
        "and never acknowledged (a network partition), may wait before the connection is "
        "given up as a transient error (the API answers 503, a worker retries); without it "
        "a partition holds a request until the kernel gives up, minutes later. A COMMIT still "
        "unanswered after it (held by a synchronous standby that is gone) is cancelled and "
        "treated as one whose answer was lost.",
    )

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'billing.db').resolve()}"

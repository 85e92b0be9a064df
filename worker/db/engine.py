"""Engines and sessions, built lazily once per process (never at import, never across fork)."""

from __future__ import annotations

import os
import threading
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker

from worker.settings import get_settings

_lock = threading.Lock()
_engines: dict[tuple[int, str], Engine] = {}


def build_engine(url: str, lock_timeout: float | None = None) -> Engine:
    """An engine whose lock waits end after ``lock_timeout`` seconds (default: the settings').

    A statement that times out on a lock raises an error that ``is_transient_db_error``
    recognises, so the command is retried with backoff instead of waiting forever.
    """
    if lock_timeout is None:
        lock_timeout = get_settings().database_lock_timeout_seconds
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": lock_timeout},
            hide_parameters=True,  # a statement's values (emails…) stay out of its errors
        )

        def pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            # WAL lets the API read while a worker writes.
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA busy_timeout={int(lock_timeout * 1000)}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        event.listen(engine, "connect", pragmas)
        return engine
    return create_engine(
        url,
        pool_pre_ping=True,
        pool_size=5,
        max_overflow=10,
        connect_args={"options": f"-c lock_timeout={int(lock_timeout * 1000)}"},
        hide_parameters=True,
    )


def get_engine(url: str | None = None) -> Engine:
    """The engine for ``url`` (default: the settings') in this process."""
    url = url or get_settings().resolved_database_url()
    key = (os.getpid(), url)
    engine = _engines.get(key)
    if engine is None:
        with _lock:
            engine = _engines.get(key)
            if engine is None:
                engine = build_engine(url)
                _engines[key] = engine
    return engine


def session_factory(url: str | None = None) -> sessionmaker[Session]:
    return sessionmaker(bind=get_engine(url), expire_on_commit=False)


def ping(sessions: sessionmaker[Session]) -> None:
    """Run a trivial query on the sessions' database; raises if it does not answer."""
    with sessions() as session:
        session.execute(text("SELECT 1"))


def dispose_engines() -> None:
    """Drop this process's engines, e.g. in a freshly forked Celery child."""
    with _lock:
        for key in [k for k in _engines if k[0] == os.getpid()]:
            _engines.pop(key).dispose()
        # Inherited engines belong to the parent: forget them without closing its sockets.
        for key in [k for k in _engines if k[0] != os.getpid()]:
            _engines.pop(key).dispose(close=False)

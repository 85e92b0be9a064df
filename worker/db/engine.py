"""Engines and sessions, built lazily once per process (never at import, never across fork)."""

from __future__ import annotations

import os
import threading
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from worker.settings import get_settings

_lock = threading.Lock()
_engines: dict[tuple[int, str], Engine] = {}


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets the API read while a worker writes; busy_timeout turns lock contention into
    # waiting, and what still times out is classified as a transient (retried) error.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def build_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 10})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)


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


def dispose_engines() -> None:
    """Drop this process's engines, e.g. in a freshly forked Celery child."""
    with _lock:
        for key in [k for k in _engines if k[0] == os.getpid()]:
            _engines.pop(key).dispose()
        # Inherited engines belong to the parent: forget them without closing its sockets.
        for key in [k for k in _engines if k[0] != os.getpid()]:
            _engines.pop(key).dispose(close=False)

"""Holding database locks from a test, to keep a command waiting inside a worker."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

from sqlalchemy import text

from adapters.db.engine import get_engine
from tests.support.stack import Stack


@contextlib.contextmanager
def user_row_locked(stack: Stack, user_id: str) -> Iterator[None]:
    """Hold a write lock that the enable handler must wait for."""
    if stack.database_url.startswith("sqlite"):
        lite = sqlite3.connect(stack.database_url.removeprefix("sqlite:///"), isolation_level=None)
        lite.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            lite.execute("ROLLBACK")
            lite.close()
    else:
        with get_engine(stack.database_url).connect() as connection:
            connection.execute(
                text("SELECT id FROM users WHERE id = :id FOR UPDATE"), {"id": user_id}
            )
            try:
                yield
            finally:
                connection.rollback()

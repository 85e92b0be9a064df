"""Engines and sessions, built lazily once per process (never at import, never across fork)."""

from __future__ import annotations

import os
import select
import threading
import time
from typing import Any

from sqlalchemy import Engine, create_engine, event, exc, text
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.orm import Session, sessionmaker

from adapters.db.commit_bound import bound_commits

_lock = threading.Lock()
_engines: dict[tuple[int, str], Engine] = {}


DEFAULT_LOCK_TIMEOUT_SECONDS = 10.0
"""How long a statement waits for a lock unless the root hands another
(``BILLING_DATABASE_LOCK_TIMEOUT_SECONDS``)."""
DEFAULT_NETWORK_TIMEOUT_SECONDS = 10.0
"""How long PostgreSQL's network may leave a connection without an answer unless the root
hands another (``BILLING_DATABASE_NETWORK_TIMEOUT_SECONDS``)."""


def build_engine(
    url: str,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT_SECONDS,
    network_timeout: float = DEFAULT_NETWORK_TIMEOUT_SECONDS,
) -> Engine:
    """An engine whose lock waits end after ``lock_timeout`` seconds and whose PostgreSQL
    connections give up on a silent network after about ``network_timeout`` seconds, as its
    commits do when unanswered that long (``adapters/db/commit_bound.py``).

    A statement that times out on a lock raises an error that ``is_transient_db_error``
    recognises, so the command is retried with backoff instead of waiting forever.
    """
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
        lock_rows_read_for_update_on_sqlite(engine)
        return engine
    engine = create_engine(
        url,
        pool_size=5,
        max_overflow=10,
        connect_args={
            "options": f"-c lock_timeout={int(lock_timeout * 1000)}",
            **network_timeouts(network_timeout),
        },
        hide_parameters=True,
    )
    ping_pooled_connections_in_doubt(engine)
    discard_connections_to_a_server_that_cannot_write(engine)
    # A commit held on a live server (a synchronous standby gone) ends like a silent network.
    bound_commits(engine, network_timeout)
    return engine


def lock_rows_read_for_update_on_sqlite(engine: Engine) -> None:
    """On SQLite, a read ``FOR UPDATE`` takes the database's write lock first.

    SQLite has no row locks: its dialect drops ``FOR UPDATE``, and Python's driver opens a
    transaction only at the first write, so a handler's load-decide-save read its row outside
    any transaction. Two commands enabling one user at once both read it disabled, both wrote
    it enabled and both emitted ``user.enabled`` (found by the fault schedules, seed 2007).
    ``BEGIN IMMEDIATE`` before such a read, when no transaction is open yet, makes the second
    wait (``busy_timeout``) until the first commits, then read what it wrote: what
    PostgreSQL's row lock does. A transaction already open has written, and holds the lock.
    """

    @event.listens_for(engine, "before_cursor_execute")
    def take_the_write_lock(
        connection: Any,
        cursor: Any,
        _statement: str,
        _parameters: Any,
        context: Any,
        _executemany: bool,
    ) -> None:
        compiled = getattr(context, "compiled", None)
        statement = getattr(compiled, "statement", None)
        if getattr(statement, "_for_update_arg", None) is None:
            return
        if not connection.connection.driver_connection.in_transaction:
            cursor.execute("BEGIN IMMEDIATE")


NOT_A_WRITABLE_PRIMARY_SQLSTATES = frozenset(
    {
        "25006",  # read_only_sql_transaction: a demoted primary, or one left up read-only
        "57P01",  # admin_shutdown
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now: starting up, shutting down, in recovery
    }
)
"""What a server answers on a connection that can no longer write there: after a switchover
(the standby promoted) only a new connection reaches the new primary."""


def discard_connections_to_a_server_that_cannot_write(engine: Engine) -> None:
    """A connection that met :data:`NOT_A_WRITABLE_PRIMARY_SQLSTATES` counts as a lost one.

    The old primary of a switchover that stays up read-only answers every write with 25006 on
    a connection that is otherwise alive: returned to the pool, it would be handed out again
    and fail again, for ever (issue 41). Marked a disconnect, SQLAlchemy invalidates it and
    every older connection of the pool, so the next checkout connects anew and libpq's
    multi-host URL (``target_session_attrs=read-write``) finds the server that writes now.
    """

    @event.listens_for(engine, "handle_error")
    def cannot_write_there(context: ExceptionContext) -> None:
        sqlstate = getattr(context.original_exception, "sqlstate", None)
        if sqlstate is not None and str(sqlstate) in NOT_A_WRITABLE_PRIMARY_SQLSTATES:
            context.is_disconnect = True


def network_timeouts(seconds: float) -> dict[str, int]:
    """libpq's parameters that bound what a network partition costs a connection.

    A partition answers nothing: no refusal, no reset. Without these, a connection attempt
    waits for the kernel's SYN retries (about two minutes) and a statement sent on an open
    connection waits for its retransmissions to give up (about fifteen minutes): an API
    request, a worker's command, held that long (tests/chaos/test_partition_postgres.py).
    ``tcp_user_timeout`` ends a connection whose sent data stays unacknowledged that long
    (a long query the server acknowledged is not affected); keepalives find a partition
    while the client only waits for an answer; ``connect_timeout`` bounds the attempt.
    """
    whole = max(2, round(seconds))  # libpq's connect_timeout: whole seconds, 2 at least
    return {
        "connect_timeout": whole,
        "tcp_user_timeout": int(seconds * 1000),
        "keepalives": 1,
        "keepalives_idle": whole,
        "keepalives_interval": max(1, whole // 3),
        "keepalives_count": 3,
    }


IDLE_BEFORE_PING_SECONDS = 10.0
"""A pooled connection idle longer than this is pinged before it is handed out."""


def ping_pooled_connections_in_doubt(engine: Engine) -> None:
    """Ping a pooled connection at checkout only when it may be dead: it sat idle past
    :data:`IDLE_BEFORE_PING_SECONDS`, or the server sent it something while it sat in the
    pool (a restart or ``pg_terminate_backend`` sends its termination and closes the socket).
    A dead one is replaced by a new connection, as ``pool_pre_ping`` does.

    ``pool_pre_ping`` pinged every checkout: a round trip before each transaction, about
    0.5 ms of every command on PostgreSQL (docs/benchmarks.md, issue 34). A server that goes
    away while a connection is checked out fails that transaction with a disconnect, which is
    a transient error (retried), and SQLAlchemy then drops every older connection of the pool.
    """

    @event.listens_for(engine, "connect")
    def connected(_dbapi_connection: Any, record: Any) -> None:
        record.info[_RETURNED_AT] = time.monotonic()

    @event.listens_for(engine, "checkin")
    def returned(_dbapi_connection: Any, record: Any) -> None:
        record.info[_RETURNED_AT] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def checked_out(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        returned_at = record.info.get(_RETURNED_AT)
        idle = returned_at is None or time.monotonic() - returned_at > IDLE_BEFORE_PING_SECONDS
        if not idle and not _sent_something(dbapi_connection):
            return
        try:
            alive = engine.dialect.do_ping(dbapi_connection)
        except Exception as error:
            raise exc.DisconnectionError("the pooled connection is gone") from error
        if not alive:
            raise exc.DisconnectionError("the pooled connection is gone")


_RETURNED_AT = "billing_returned_at"


def _sent_something(dbapi_connection: Any) -> bool:
    """Whether the server wrote to (or closed) an idle connection's socket: nothing is
    expected there between transactions. Unknown counts as yes."""
    try:
        socket = dbapi_connection.pgconn.socket
        poller = select.poll()
        poller.register(socket, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    except Exception:
        return True


def get_engine(
    url: str,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT_SECONDS,
    network_timeout: float = DEFAULT_NETWORK_TIMEOUT_SECONDS,
) -> Engine:
    """The engine for ``url`` in this process (built on first use, with ``lock_timeout`` and
    ``network_timeout``)."""
    key = (os.getpid(), url)
    engine = _engines.get(key)
    if engine is None:
        with _lock:
            engine = _engines.get(key)
            if engine is None:
                engine = build_engine(url, lock_timeout, network_timeout)
                _engines[key] = engine
    return engine


def session_factory(
    url: str,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT_SECONDS,
    network_timeout: float = DEFAULT_NETWORK_TIMEOUT_SECONDS,
) -> sessionmaker[Session]:
    return sessionmaker(bind=get_engine(url, lock_timeout, network_timeout), expire_on_commit=False)


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

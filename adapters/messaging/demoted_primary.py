"""Connections that leave a primary demoted under them: the answer ``READONLY`` (a write to a
server that became a replica) or ``UNBLOCKED`` (a blocking read the server cut short as it
changed roles) closes the connection and is raised as a ``ConnectionError``.

A managed Redis (ElastiCache, Memorystore, Azure) fails over by moving a DNS name: the clients'
open connections still reach the old primary, which is turned into a replica in place. Those
two answers are then the only sign that the primary moved, and redis-py raises them as
response errors (``ReadOnlyError``, a bare ``ResponseError``), which nobody retries: kombu
counts them among its channel errors, so Celery stopped the worker ("Unrecoverable error",
issue 41), and our own clients kept writing to the replica until its connections closed. As a
connection error, closed, each is what a lost connection already is to every client: the
command is retried as after any lost connection (by redis-py where the client has a retry, by
our callers otherwise: :func:`adapters.messaging.redis_clients.is_redis_unreachable`), on a new
connection made through the moved name, so to the new primary; and kombu and Celery reconnect
the worker's consumer and publisher. redis-py does the same for
``READONLY`` on its Sentinel connections (``SentinelManagedConnection``); this is that
behaviour for a connection to one address, with ``UNBLOCKED`` added, which Sentinel clients
meet too.

Nothing else is turned into a connection error: a ``WRONGTYPE`` or a script's error is the
caller's, and reconnecting would only repeat it.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio

DEMOTED_MESSAGE = "the Redis primary was demoted to a replica under this connection"

UNBLOCKED_PREFIX = "UNBLOCKED"
"""How the server begins its answer to a blocking command cut short as it changes roles
(``UNBLOCKED force unblock from blocking operation, instance state changed (master ->
replica?)``); redis-py has no class of its own for it."""


def is_demotion(error: BaseException) -> bool:
    """Whether a server's answer says it stopped being the primary under the connection."""
    if isinstance(error, redis.ReadOnlyError):
        return True
    return isinstance(error, redis.ResponseError) and str(error).startswith(UNBLOCKED_PREFIX)


class _LeavesDemotedPrimary:
    """Mixed in before a redis-py connection class (the module's docstring)."""

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        connection: Any = self
        try:
            return super().read_response(*args, **kwargs)  # type: ignore[misc]
        except redis.ResponseError as error:
            if not is_demotion(error):
                raise
            connection.disconnect()
            raise redis.ConnectionError(f"{DEMOTED_MESSAGE}: {error}") from error


class _LeavesDemotedPrimaryAsync:
    """:class:`_LeavesDemotedPrimary` for redis-py's asyncio connections (the API's)."""

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        connection: Any = self
        try:
            return await super().read_response(*args, **kwargs)  # type: ignore[misc]
        except redis.ResponseError as error:
            if not is_demotion(error):
                raise
            await connection.disconnect()
            raise redis.ConnectionError(f"{DEMOTED_MESSAGE}: {error}") from error


def leaving_demoted_primary(connection_class: type[Any]) -> type[Any]:
    """``connection_class`` (redis-py's, kombu's or Celery's, sync or asyncio, TCP, TLS or a
    unix socket) made to leave a demoted primary (a class made anew: kombu builds a connection
    class of its own for each channel)."""
    if issubclass(connection_class, (_LeavesDemotedPrimary, _LeavesDemotedPrimaryAsync)):
        return connection_class
    asynchronous = issubclass(connection_class, redis.asyncio.connection.AbstractConnection)
    mixin = _LeavesDemotedPrimaryAsync if asynchronous else _LeavesDemotedPrimary
    return type(
        f"{connection_class.__name__}LeavingDemotedPrimary",
        (mixin, connection_class),
        {"__module__": __name__},
    )


def follow_demotions(pool: Any) -> Any:
    """``pool`` (a redis-py connection pool, sync or asyncio, before it made a connection)
    with connections that leave a demoted primary; the pool."""
    pool.connection_class = leaving_demoted_primary(pool.connection_class)
    return pool

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

A connection that only publishes never meets either answer: a replica takes ``PUBLISH`` (and
answers ``PING``) as a primary does, and delivers the message to nobody. Celery's control
messages (the API's ping of the workers, Flower's inspect and revoke) and the workers' task
events go through such pooled connections, and stayed on a demoted primary until the
connection broke. So before a command, at most every :data:`ROLE_CHECK_SECONDS`, a connection
asks the server its ``ROLE`` (one round trip), and leaves it as above when it is a replica. A
user the server's ACL denies ``ROLE`` keeps the two answers alone.
"""

from __future__ import annotations

import time
from typing import Any

import redis
import redis.asyncio
from redis.utils import str_if_bytes

DEMOTED_MESSAGE = "the Redis primary was demoted to a replica under this connection"

UNBLOCKED_PREFIX = "UNBLOCKED"
"""How the server begins its answer to a blocking command cut short as it changes roles
(``UNBLOCKED force unblock from blocking operation, instance state changed (master ->
replica?)``); redis-py has no class of its own for it."""


ROLE_CHECK_SECONDS = 2.0
"""How often a connection in use asks the server whether it is still the primary."""

REPLICA_ROLES = frozenset({"slave", "replica"})


def is_demotion(error: BaseException) -> bool:
    """Whether a server's answer says it stopped being the primary under the connection."""
    if isinstance(error, redis.ReadOnlyError):
        return True
    return isinstance(error, redis.ResponseError) and str(error).startswith(UNBLOCKED_PREFIX)


def _is_replica(role: Any) -> bool:
    """Whether a ``ROLE`` answer names a replica."""
    return bool(role) and str_if_bytes(role[0]) in REPLICA_ROLES


class _RoleChecks:
    """When a connection asks ``ROLE``: shared by the sync and asyncio mixins."""

    _role_checked_at: float | None = None
    """``None`` on a connection not yet used since it connected (through the address: it
    counts as checked)."""
    _role_denied = False

    def _role_check_due(self) -> bool:
        now = time.monotonic()
        if self._role_checked_at is None:
            self._role_checked_at = now
        if self._role_denied or now - self._role_checked_at < ROLE_CHECK_SECONDS:
            return False
        self._role_checked_at = now
        return True


class _LeavesDemotedPrimary(_RoleChecks):
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

    def check_health(self) -> None:
        connection: Any = self
        super().check_health()  # type: ignore[misc]
        if not self._role_check_due():
            return
        connection.send_command("ROLE", check_health=False)
        try:
            role = connection.read_response()
        except redis.ResponseError:  # NOPERM: the two answers alone tell
            self._role_denied = True
            return
        if _is_replica(role):
            connection.disconnect()
            raise redis.ConnectionError(f"{DEMOTED_MESSAGE}: ROLE {str_if_bytes(role[0])}")

    def disconnect(self, *args: Any, **kwargs: Any) -> None:
        self._role_checked_at = None
        super().disconnect(*args, **kwargs)  # type: ignore[misc]


class _LeavesDemotedPrimaryAsync(_RoleChecks):
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

    async def check_health(self) -> None:
        connection: Any = self
        await super().check_health()  # type: ignore[misc]
        if not self._role_check_due():
            return
        await connection.send_command("ROLE", check_health=False)
        try:
            role = await connection.read_response()
        except redis.ResponseError:
            self._role_denied = True
            return
        if _is_replica(role):
            await connection.disconnect()
            raise redis.ConnectionError(f"{DEMOTED_MESSAGE}: ROLE {str_if_bytes(role[0])}")

    async def disconnect(self, *args: Any, **kwargs: Any) -> None:
        self._role_checked_at = None
        await super().disconnect(*args, **kwargs)  # type: ignore[misc]


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

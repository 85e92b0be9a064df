"""Every Redis client of every process, made in one place: on one address
(``BILLING_REDIS_URL``), or on the current primary that Redis Sentinel names
(``BILLING_REDIS_SENTINELS``, ``BILLING_REDIS_MASTER_NAME``).

With sentinels, a client is ``Sentinel(...).master_for(name)`` (redis-py's, sync or asyncio):
its connections ask the sentinels for the primary each time they connect, and a connection to
a primary that was demoted (``READONLY``) is dropped and made again, so a client made once
follows the primary through failovers. The broker and the result backend are Celery's and
kombu's own Sentinel support, configured here too (:func:`celery_redis_config`): a
``sentinel://`` URL per sentinel, the master name and the sentinels' credentials in the
transport options, and the socket timeout kombu requires for a failover (without one, a
publish can wait forever on a dead primary's connection).

Next to ``up --ha`` (no Redis setting, the sentinels recorded in ``stack.json``) the CLI is
handed the recorded sentinels (:func:`worker.local.stack_state.with_local_stack`).

Without sentinels every function here gives what the code gave before Sentinel existed:
``redis.Redis.from_url(BILLING_REDIS_URL, ...)`` and the URL as broker and backend. Either
way a client's connections leave a primary demoted under them (``READONLY``, ``UNBLOCKED``:
:mod:`adapters.messaging.demoted_primary`), so that a client of one address that a managed
Redis moves to a new primary (a DNS name) follows it as Sentinel clients do.

A leaf, like :mod:`adapters.messaging.config`: it is handed its values (:class:`RedisOptions`,
the settings' ``messaging`` section) and imports nothing of the worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast
from urllib.parse import quote

from pydantic import SecretStr

from adapters.urls import masked_url

if TYPE_CHECKING:
    import redis
    import redis.asyncio


class RedisOptions(Protocol):
    """Where Redis is and how to log in: what every client here is handed (the settings'
    ``messaging`` section, :class:`worker.settings.MessagingSettings`, is one)."""

    @property
    def redis_url(self) -> str | None: ...
    @property
    def redis_master_name(self) -> str: ...
    @property
    def redis_username(self) -> str | None: ...
    @property
    def redis_password(self) -> SecretStr | None: ...
    @property
    def redis_sentinel_username(self) -> str | None: ...
    @property
    def redis_sentinel_password(self) -> SecretStr | None: ...
    @property
    def redis_db(self) -> int: ...
    @property
    def redis_socket_timeout_seconds(self) -> float: ...
    def resolved_redis_url(self) -> str: ...
    def sentinel_addresses(self) -> list[tuple[str, int]]: ...


GUARDED_TRANSPORT = "adapters.messaging.broker:GuardedRedisTransport"
GUARDED_SENTINEL_TRANSPORT = "adapters.messaging.broker:GuardedSentinelTransport"


def uses_sentinel(settings: RedisOptions) -> bool:
    return bool(settings.sentinel_addresses())


def master_options(settings: RedisOptions, options: dict[str, Any]) -> dict[str, Any]:
    """The options of a connection to the primary: the caller's, over the primary's
    credentials, database and the failover timeouts."""
    return {
        "db": settings.redis_db,
        **_timed_login(settings, settings.redis_username, settings.redis_password),
        **options,
    }


def sentinel_options(settings: RedisOptions, *, asynchronous: bool = False) -> dict[str, Any]:
    """The options of a connection to a sentinel (redis-py's and kombu's ``sentinel_kwargs``):
    its own credentials, timeouts, and no retry, so that a dead sentinel is passed over for
    the next at once (redis-py retries a command ten times by default, backing off up to a
    second each: with the first sentinel dead, every look for the primary waited seconds)."""
    from redis.asyncio.retry import Retry as AsyncRetry
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return {
        **_timed_login(
            settings, settings.redis_sentinel_username, settings.redis_sentinel_password
        ),
        "retry": (AsyncRetry if asynchronous else Retry)(NoBackoff(), 0),
    }


def _timed_login(
    settings: RedisOptions, username: str | None, password: SecretStr | None
) -> dict[str, Any]:
    """A connection's credentials (those given) and the failover timeouts."""
    options: dict[str, Any] = {
        "socket_timeout": settings.redis_socket_timeout_seconds,
        "socket_connect_timeout": settings.redis_socket_timeout_seconds,
    }
    if username:
        options["username"] = username
    if password is not None:
        options["password"] = password.get_secret_value()
    return options


def redis_client(settings: RedisOptions, **options: Any) -> redis.Redis:
    """A client of the settings' Redis: ``redis.Redis.from_url(BILLING_REDIS_URL, **options)``,
    or, with sentinels, one that follows the current primary (``options`` over the
    primary's credentials and :attr:`Settings.redis_socket_timeout_seconds`)."""
    import redis
    import redis.sentinel

    from adapters.messaging.demoted_primary import follow_demotions

    if not uses_sentinel(settings):
        client = redis.Redis.from_url(settings.resolved_redis_url(), **options)
        follow_demotions(client.connection_pool)
        return client
    # redis-py's Sentinel is untyped (8.1).
    sentinel: Any = redis.sentinel.Sentinel
    primary = sentinel(
        settings.sentinel_addresses(), sentinel_kwargs=sentinel_options(settings)
    ).master_for(
        settings.redis_master_name, redis_class=redis.Redis, **master_options(settings, options)
    )
    follow_demotions(primary.connection_pool)
    return cast("redis.Redis", primary)


def async_redis_client(settings: RedisOptions, **options: Any) -> redis.asyncio.Redis:
    """:func:`redis_client` for asyncio (the API's result listener and client share)."""
    import redis.asyncio
    import redis.asyncio.sentinel

    from adapters.messaging.demoted_primary import follow_demotions

    if not uses_sentinel(settings):
        client = redis.asyncio.Redis.from_url(settings.resolved_redis_url(), **options)
        follow_demotions(client.connection_pool)
        return client
    sentinel: Any = redis.asyncio.sentinel.Sentinel
    primary = sentinel(
        settings.sentinel_addresses(), sentinel_kwargs=sentinel_options(settings, asynchronous=True)
    ).master_for(
        settings.redis_master_name,
        redis_class=redis.asyncio.Redis,
        **master_options(settings, options),
    )
    follow_demotions(primary.connection_pool)
    return cast("redis.asyncio.Redis", primary)


def sentinel_url(settings: RedisOptions) -> str:
    """The sentinels as Celery and kombu read them: ``sentinel://[user:password@]host:port/db``
    joined by ``;`` (no trailing ``;``: kombu would add a sentinel on localhost). The
    credentials are the primary's (kombu and Celery connect to the primary with them)."""
    userinfo = ""
    if settings.redis_username or settings.redis_password is not None:
        user = quote(settings.redis_username or "", safe="")
        password = (
            f":{quote(settings.redis_password.get_secret_value(), safe='')}"
            if settings.redis_password is not None
            else ""
        )
        userinfo = f"{user}{password}@"
    return ";".join(
        f"sentinel://{userinfo}{_host(host)}:{port}/{settings.redis_db}"
        for host, port in settings.sentinel_addresses()
    )


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


RESULT_BACKEND = "adapters.messaging.result_store:CommandResults"
"""The result backend's class on a Redis server (Celery's ``class+url``)."""
SENTINEL_RESULT_BACKEND = "adapters.messaging.result_store:SentinelCommandResults"
"""The result backend's class on the primary that Redis Sentinel names."""


def celery_redis_config(settings: RedisOptions) -> dict[str, Any]:
    """What the Celery configuration says of Redis: the broker and result backend URLs, our
    guarded transport (its Sentinel variant with sentinels), and the transport options
    Sentinel needs (merged into the broker's by :func:`adapters.messaging.config.celery_config`)."""
    if not uses_sentinel(settings):
        url = settings.resolved_redis_url()
        return {
            "broker_url": url,
            "broker_transport": GUARDED_TRANSPORT,
            "result_backend": f"{RESULT_BACKEND}+{url}",
            "broker_transport_options": {},
        }
    url = sentinel_url(settings)
    timeout = settings.redis_socket_timeout_seconds
    sentinel = {
        "master_name": settings.redis_master_name,
        "sentinel_kwargs": sentinel_options(settings),
    }
    return {
        "broker_url": url,
        "broker_transport": GUARDED_SENTINEL_TRANSPORT,
        "result_backend": f"{SENTINEL_RESULT_BACKEND}+{url}",
        "broker_transport_options": {
            **sentinel,
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
            # How often kombu checks that the worker's BRPOP was answered (its own default,
            # 25 s): the socket timeout does not apply to the event loop's wait, so a primary
            # that went silent without closing its connections (paused, partitioned) held a
            # worker on it, deaf to the new primary, until it came back.
            "health_check_interval": max(1, round(timeout)),
        },
        "result_backend_transport_options": sentinel,
        "redis_socket_timeout": timeout,
        "redis_socket_connect_timeout": timeout,
    }


def is_redis_unreachable(error: BaseException) -> bool:
    """Whether ``error`` says Redis cannot be reached for now (refused, timed out, no primary
    named by the sentinels, or a primary demoted under the client: ``READONLY``), as during
    a failover: a command that met it is retried, not failed (the rate budget, the event
    stream and the clock all live in Redis)."""
    import redis

    return isinstance(error, (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError))


def describe_redis(settings: RedisOptions) -> str:
    """Where the settings' Redis is, for a message (passwords masked)."""
    if not uses_sentinel(settings):
        return masked_url(settings.resolved_redis_url())
    sentinels = ",".join(f"{_host(host)}:{port}" for host, port in settings.sentinel_addresses())
    return f"the primary {settings.redis_master_name!r} of the sentinels {sentinels}"

"""The one factory of Redis clients (``adapters/messaging/redis_clients.py``): without sentinels
it makes exactly the clients and the Celery configuration of one Redis URL; with sentinels,
clients of the primary the sentinels name and kombu's and Celery's Sentinel configuration.
(Failovers on real servers: tests/integration/test_redis_sentinel.py.)"""

from __future__ import annotations

from typing import cast

import pytest
import redis
import redis.asyncio
import redis.asyncio.sentinel
import redis.sentinel
from celery.app.backends import by_url
from pydantic import ValidationError

from adapters.messaging.config import celery_config
from adapters.messaging.redis_clients import (
    GUARDED_SENTINEL_TRANSPORT,
    GUARDED_TRANSPORT,
    async_redis_client,
    redis_client,
)
from adapters.messaging.result_store import CommandResults, SentinelCommandResults
from worker.settings import Settings

URL = "redis://:s3cret@10.0.0.5:6390/3"


def addressing(client: redis.Redis | redis.asyncio.Redis) -> dict[str, object]:
    """What a client's connections are made with (its plain values: host, port, password,
    database, timeouts…; not the per-pool handler objects redis-py makes afresh)."""
    return {
        key: value
        for key, value in client.connection_pool.connection_kwargs.items()
        if value is None or isinstance(value, str | int | float | bool)
    }


def plain() -> Settings:
    return Settings(redis_url=URL, redis_sentinels="")


def with_sentinels() -> Settings:
    return Settings(
        redis_url=URL,
        redis_sentinels="10.0.0.1:26379, sentinel-b:26380,sentinel-c",
        redis_master_name="billing",
        redis_password="p@ss;word",
        redis_sentinel_password="sentinel-secret",
        redis_db=2,
    )


def test_without_sentinels_a_client_is_the_one_from_url_of_the_redis_url() -> None:
    made = redis_client(plain(), socket_timeout=2)
    today = redis.Redis.from_url(URL, socket_timeout=2)

    assert type(made) is redis.Redis
    assert type(made.connection_pool) is type(today.connection_pool)
    assert addressing(made) == addressing(today)
    assert addressing(made)["host"] == "10.0.0.5"


def test_without_sentinels_an_asyncio_client_is_the_one_from_url_of_the_redis_url() -> None:
    made = async_redis_client(plain())
    today = redis.asyncio.Redis.from_url(URL)

    assert type(made) is redis.asyncio.Redis
    assert type(made.connection_pool) is type(today.connection_pool)
    assert addressing(made) == addressing(today)
    assert addressing(made)["host"] == "10.0.0.5"


def test_without_sentinels_the_broker_and_the_backend_are_the_redis_url_as_before() -> None:
    config = celery_config(plain())

    backend, backend_url = cast(tuple[type, str], by_url(config["result_backend"]))
    assert (config["broker_url"], backend_url) == (URL, URL)
    assert backend is CommandResults
    assert config["broker_transport"] == GUARDED_TRANSPORT
    assert set(config["broker_transport_options"]) == {
        "visibility_timeout",
        "unacked_restore_interval",
        "unacked_restore_throttle",
        "priority_steps",
    }
    assert not {"result_backend_transport_options", "redis_socket_timeout"} & set(config)


def test_with_sentinels_a_client_asks_them_for_the_named_primary() -> None:
    client = redis_client(with_sentinels(), socket_timeout=2)

    pool = client.connection_pool
    assert isinstance(pool, redis.sentinel.SentinelConnectionPool)
    assert pool.service_name == "billing"
    assert [
        connection.connection_pool.connection_kwargs["port"]
        for connection in pool.sentinel_manager.sentinels
    ] == [26379, 26380, 26379]
    assert pool.sentinel_manager.sentinel_kwargs["password"] == "sentinel-secret"
    kwargs = pool.connection_kwargs
    assert (kwargs["password"], kwargs["db"], kwargs["socket_timeout"]) == ("p@ss;word", 2, 2)


def test_with_sentinels_an_asyncio_client_asks_them_for_the_named_primary() -> None:
    client = async_redis_client(with_sentinels())

    pool = client.connection_pool
    assert isinstance(pool, redis.asyncio.sentinel.SentinelConnectionPool)
    assert pool.service_name == "billing"
    assert pool.connection_kwargs["socket_timeout"] == 5.0


def test_with_sentinels_the_broker_and_the_backend_use_kombu_s_and_celery_s_sentinel() -> None:
    config = celery_config(with_sentinels())

    expected = (
        "sentinel://:p%40ss%3Bword@10.0.0.1:26379/2;"
        "sentinel://:p%40ss%3Bword@sentinel-b:26380/2;"
        "sentinel://:p%40ss%3Bword@sentinel-c:26379/2"
    )
    backend, backend_url = cast(tuple[type, str], by_url(config["result_backend"]))
    assert (config["broker_url"], backend_url) == (expected, expected)
    assert backend is SentinelCommandResults
    assert config["broker_transport"] == GUARDED_SENTINEL_TRANSPORT
    options = config["broker_transport_options"]
    assert options["master_name"] == "billing"
    assert options["sentinel_kwargs"]["password"] == "sentinel-secret"
    assert options["socket_timeout"] == 5.0
    assert "visibility_timeout" in options  # our own options stay
    assert config["result_backend_transport_options"]["master_name"] == "billing"
    assert config["redis_socket_timeout"] == 5.0


@pytest.mark.parametrize("sentinels", ["host:port", "a:26379,b:0", "a:99999"])
def test_a_sentinel_that_is_not_host_and_port_is_refused(sentinels: str) -> None:
    with pytest.raises(ValidationError, match="BILLING_REDIS_SENTINELS"):
        Settings(redis_sentinels=sentinels)

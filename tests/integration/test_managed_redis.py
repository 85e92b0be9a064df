"""Our Redis clients on one stable address that a managed Redis moves (a TCP forwarder stands
in for the DNS name, tests/support/forwarder.py): a client holding connections to a primary
demoted in place leaves it and writes (or only publishes) to the new primary, and the failover
sweep's watch knows a primary restarted with an empty dataset."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from adapters.messaging.demoted_primary import ROLE_CHECK_SECONDS
from adapters.messaging.primary_watch import RedisPrimaryWatch
from adapters.messaging.redis_clients import async_redis_client, redis_client
from tests.support.managed_redis import ManagedRedis
from worker.settings import Settings


@pytest.fixture
def managed(tmp_path: Path) -> Iterator[ManagedRedis]:
    started = ManagedRedis(tmp_path / "redis")
    started.start()
    yield started
    started.stop()


def test_a_client_holding_connections_to_a_primary_demoted_in_place_writes_to_the_new_one(
    managed: ManagedRedis,
) -> None:
    client = redis_client(Settings(redis_url=managed.url))
    client.set("before", "1")  # a connection to the old primary, kept in the pool
    old = managed.primary

    managed.flip()
    # READONLY on the kept connection: closed, and said as a lost connection (what every
    # caller retries); the next command goes through the moved address.
    with pytest.raises(redis.ConnectionError, match="demoted to a replica"):
        client.set("after", "2")
    client.set("after", "2")

    assert managed.primary != old
    assert managed.server(managed.primary).get("after") == b"2"


def test_an_asyncio_client_holding_connections_to_a_demoted_primary_writes_to_the_new_one(
    managed: ManagedRedis,
) -> None:
    import asyncio

    async def write_across_the_flip() -> None:
        client = async_redis_client(Settings(redis_url=managed.url))
        try:
            await client.set("before", "1")
            managed.flip()
            with pytest.raises(redis.ConnectionError, match="demoted to a replica"):
                await client.set("after", "2")
            await client.set("after", "2")
        finally:
            await client.aclose()

    asyncio.run(write_across_the_flip())

    assert managed.server(managed.primary).get("after") == b"2"


def test_the_primary_watch_reports_a_primary_restarted_empty_as_a_lost_dataset_until_settled(
    managed: ManagedRedis,
) -> None:
    watch = RedisPrimaryWatch(redis_client(Settings(redis_url=managed.url)))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    first = watch.sight(start)
    seen = watch.sight(start + timedelta(seconds=1))

    managed.restart_empty(down_seconds=0.2)
    lost = watch.sight(start + timedelta(seconds=5))
    reported_again = watch.sight(start + timedelta(seconds=6))
    watch.settle(lost, start + timedelta(seconds=7))
    after = watch.sight(start + timedelta(seconds=8))
    fresh = RedisPrimaryWatch(redis_client(Settings(redis_url=managed.url)))

    assert (first.changed, seen.changed) == (False, False)
    assert (lost.changed, lost.dataset_lost, lost.previous_seen_at) == (
        True,
        True,
        start + timedelta(seconds=1),
    )
    assert lost.primary != first.primary
    assert reported_again == lost
    assert (after.changed, after.dataset_lost, after.failed_over_at) == (
        False,
        False,
        start + timedelta(seconds=7),
    )
    # A watch of another process (another beat) that saw the primary only since sees nothing.
    assert fresh.sight(start + timedelta(seconds=9)).changed is False


def test_a_connection_that_only_publishes_leaves_a_primary_demoted_in_place_within_the_role_check(
    managed: ManagedRedis,
) -> None:
    # A replica takes PUBLISH as a primary does and answers it: only asking its role tells.
    client = redis_client(Settings(redis_url=managed.url))
    assert client.publish("billing-test", "before") == 0  # a pooled connection to this primary

    managed.flip()
    server: Any = managed.server(managed.primary)  # redis-py types pubsub loosely
    listener = server.pubsub(ignore_subscribe_messages=True)
    listener.subscribe("billing-test")
    assert listener.get_message(timeout=1) is None  # the subscription's own answer, skipped
    time.sleep(ROLE_CHECK_SECONDS + 0.2)
    # The kept connection asks ROLE first: closed, and said as a lost connection.
    with pytest.raises(redis.ConnectionError, match="under this connection: ROLE slave"):
        client.publish("billing-test", "after")
    reached = client.publish("billing-test", "after")

    heard = listener.get_message(timeout=2)
    assert reached == 1
    assert heard is not None
    assert heard["data"] == b"after"

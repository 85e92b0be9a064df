"""Redis Sentinel on real servers (a primary, a replica and a sentinel: worker/local/sentinel.py):
the clients of the one factory (``adapters/messaging/redis_clients.py``) follow the primary
through a failover, and our guarded transport keeps its guard on kombu's Sentinel transport."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from kombu import Connection, Exchange, Queue

from adapters.messaging.broker import GuardedSentinelChannel
from adapters.messaging.config import celery_config
from adapters.messaging.dead_letters import DeadLetters
from adapters.messaging.primary_confirmation import PrimaryNotConfirmed, named_primary
from adapters.messaging.primary_watch import RedisPrimaryWatch
from adapters.messaging.publisher import result_channel
from adapters.messaging.redis_clients import async_redis_client, is_redis_unreachable, redis_client
from adapters.outbound.stream import RedisEventStream
from domain.ports.events import RecordedEvent
from tests.support.redis_server import RedisServer
from worker.api.results import ResultListener
from worker.local.sentinel import SentinelTopology
from worker.settings import Settings

pytestmark = pytest.mark.chaos


@pytest.fixture
def topology(tmp_path: Path) -> Iterator[SentinelTopology]:
    started = SentinelTopology(tmp_path / "sentinel")
    try:
        started.start()
        yield started
    finally:
        started.stop()


def sentinel_settings(topology: SentinelTopology) -> Settings:
    env = topology.settings_env()
    return Settings(
        redis_sentinels=env["BILLING_REDIS_SENTINELS"],
        redis_master_name=env["BILLING_REDIS_MASTER_NAME"],
        redis_password=env["BILLING_REDIS_PASSWORD"],
        redis_sentinel_password=env["BILLING_REDIS_SENTINEL_PASSWORD"],
        redis_socket_timeout_seconds=2.0,
    )


def test_a_client_of_the_factory_follows_the_primary_through_a_failover(
    topology: SentinelTopology,
) -> None:
    client = redis_client(sentinel_settings(topology))
    client.set("written-before", "1")
    assert client.wait(1, 5000) == 1  # the replica has it before the primary dies
    old = topology.kill_primary()

    new = topology.wait_for_new_primary(old)
    client.set("written-after", "2")  # the same client, never made again

    promoted = topology.server(new)
    assert (promoted.get("written-before"), promoted.get("written-after")) == (b"1", b"2")


def test_a_client_holding_a_connection_to_a_demoted_primary_writes_to_the_new_one(
    topology: SentinelTopology,
) -> None:
    client = redis_client(sentinel_settings(topology))
    client.set("written-before", "1")  # its pool holds a connection to this primary
    assert client.wait(1, 5000) == 1
    paused = topology.pause_primary()
    new = topology.wait_for_new_primary(paused)
    topology.resume(paused)  # back, and a replica of the new primary once the sentinel says so
    topology.wait_for_replica(paused)

    client.set("written-after", "2")  # READONLY on the kept connection: it asks the sentinel

    assert topology.server(new).get("written-after") == b"2"


def test_an_asyncio_client_of_the_factory_follows_the_primary_through_a_failover(
    topology: SentinelTopology,
) -> None:
    async def scenario() -> int:
        client = async_redis_client(sentinel_settings(topology))
        try:
            await client.set("before", "1")
            old = topology.kill_primary()
            new = await asyncio.to_thread(topology.wait_for_new_primary, old)
            await client.incr("after")
            return new
        finally:
            await client.aclose()

    new = asyncio.run(scenario())

    assert topology.server(new).get("after") == b"1"


def test_the_api_s_result_listener_hears_results_on_the_new_primary_after_a_failover(
    topology: SentinelTopology,
) -> None:
    ended = json.dumps({"status": "SUCCESS", "result": None, "task_id": "c1"}).encode()

    async def scenario() -> None:
        client = async_redis_client(sentinel_settings(topology))
        listener = ResultListener(client)
        await listener.start()
        try:
            assert listener.listening
            old = topology.kill_primary()
            new = await asyncio.to_thread(topology.wait_for_new_primary, old)
            with listener.watching("c1") as watch:
                # A worker's result backend publishes on the new primary, again until the
                # listener, which lost its connection, has subscribed there and hears it.
                for _ in range(100):
                    await asyncio.to_thread(
                        topology.server(new).publish, result_channel("c1"), ended
                    )
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(watch._ended.wait(), 0.1)
                        return
                raise AssertionError("the listener never heard the result on the new primary")
        finally:
            await listener.stop()
            await client.aclose()

    asyncio.run(scenario())


def test_the_guarded_sentinel_transport_dead_letters_what_is_not_a_task_and_delivers_the_rest(
    topology: SentinelTopology,
) -> None:
    settings = sentinel_settings(topology)
    config = celery_config(settings)
    queue = Queue("sentinel-guard-test", Exchange("sentinel-guard-test"), "sentinel-guard-test")
    with Connection(
        config["broker_url"],
        transport=config["broker_transport"],
        transport_options=config["broker_transport_options"],
    ) as connection:
        channel = connection.default_channel
        assert isinstance(channel, GuardedSentinelChannel)
        bound = queue(channel)
        bound.declare()
        redis_client(settings).lpush("sentinel-guard-test", b"\xff not a message")
        connection.Producer(channel).publish(
            {"n": 1}, exchange=queue.exchange, routing_key=queue.routing_key, serializer="json"
        )

        received = bound.get(no_ack=True)

    assert received is not None
    assert received.payload == {"n": 1}
    letters = DeadLetters(redis_client(settings)).list()
    assert [(letter.queue, letter.raw) for letter in letters] == [
        ("sentinel-guard-test", b"\xff not a message")
    ]


def test_the_primary_watch_reports_a_failover_once_then_when_the_new_primary_took_over(
    topology: SentinelTopology,
) -> None:
    watch = RedisPrimaryWatch(redis_client(sentinel_settings(topology)))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    first = watch.sight(start)
    seen = watch.sight(start + timedelta(seconds=1))
    assert topology.server(topology.primary_port()).wait(1, 5000) == 1
    old = topology.kill_primary()
    topology.wait_for_new_primary(old)

    changed = watch.sight(start + timedelta(seconds=5))
    reported_again = watch.sight(start + timedelta(seconds=6))
    watch.settle(changed, start + timedelta(seconds=7))
    after = watch.sight(start + timedelta(seconds=8))

    assert (first.changed, first.previous_seen_at) == (False, None)
    assert (seen.changed, seen.previous_seen_at, seen.failed_over_at) == (False, start, None)
    assert (changed.changed, changed.previous_seen_at) == (True, start + timedelta(seconds=1))
    assert changed.primary != first.primary
    assert reported_again == changed
    assert (after.changed, after.previous_seen_at, after.failed_over_at) == (
        False,
        start + timedelta(seconds=7),
        start + timedelta(seconds=7),
    )


def recorded_event(sequence: int) -> RecordedEvent:
    return RecordedEvent(
        sequence=sequence,
        id=f"evt_{sequence}",
        type="billing_account.created",
        subject_key=f"billing_account:ba_{sequence}",
        document={"id": f"evt_{sequence}", "type": "billing_account.created"},
    )


def stream_ids(client: redis.Redis) -> list[str]:
    entries: Any = client.xrange("billing:events", "-", "+")
    return [fields[b"id"].decode() for _entry_id, fields in entries]


def test_an_event_appended_through_the_factory_s_client_counts_on_the_primary_before_and_after_a_failover(  # noqa: E501
    topology: SentinelTopology,
) -> None:
    settings = sentinel_settings(topology)
    stream = RedisEventStream(
        redis_client(settings), "billing:events", 1000, named_primary(settings)
    )

    stream.append([recorded_event(1), recorded_event(2)])
    assert topology.server(topology.primary_port()).wait(1, 5000) == 1
    old = topology.kill_primary()
    new = topology.wait_for_new_primary(old)
    stream.append([recorded_event(3)])  # the same stream: the new primary is asked for

    assert stream_ids(topology.server(new)) == ["evt_1", "evt_2", "evt_3"]


def test_an_event_appended_to_a_server_the_sentinels_do_not_name_raises_as_redis_out_of_reach(
    topology: SentinelTopology, tmp_path: Path
) -> None:
    # A server taking writes though the sentinels name another: a primary cut off with its
    # clients while the sentinels promoted a replica.
    other = RedisServer(tmp_path / "other")
    other.start()
    try:
        client = redis.Redis.from_url(other.url)
        stream = RedisEventStream(
            client, "billing:events", 1000, named_primary(sentinel_settings(topology))
        )

        with pytest.raises(PrimaryNotConfirmed, match="is not the primary") as raised:
            stream.append([recorded_event(1)])
    finally:
        other.stop()

    assert is_redis_unreachable(raised.value)  # the relay's and the runner's "try again later"
    plain = RedisEventStream(redis_client(sentinel_settings(topology)), "billing:events", 1000)
    plain.append([recorded_event(2)])  # no confirmation asked: as without sentinels
    assert stream_ids(topology.server(topology.primary_port())) == ["evt_2"]

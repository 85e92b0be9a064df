"""Our Redis channel (``adapters/messaging/broker.py``) on real Redis: what it sends outside the
poll (publishes, task events) goes through one client over its pool, not a client built per
command as kombu's own channel does."""

from __future__ import annotations

from pathlib import Path

import redis
from kombu import Connection, Exchange, Producer, Queue
from kombu.common import ignore_errors

from adapters.messaging.broker import GuardedChannel
from tests.support.redis_server import RedisServer

TRANSPORT = "adapters.messaging.broker:GuardedRedisTransport"


def our_channel(connection: Connection) -> GuardedChannel:
    channel = connection.default_channel
    assert isinstance(channel, GuardedChannel)
    return channel


def test_the_channel_sends_every_command_through_one_client_over_its_pool(
    redis_server: str,
) -> None:
    with Connection(redis_server, transport=TRANSPORT) as connection:
        channel = our_channel(connection)
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second
            assert first.connection_pool is channel.pool


def test_a_new_pool_gets_a_new_client(redis_server: str) -> None:
    with Connection(redis_server, transport=TRANSPORT) as connection:
        channel = our_channel(connection)
        with channel.conn_or_acquire() as before:
            pass
        channel._pool = None  # as kombu's channel drops its pool on a lost connection

        with channel.conn_or_acquire() as after:
            assert after is not before
            assert after.connection_pool is channel.pool


def test_a_client_given_by_the_caller_is_the_one_used(redis_server: str) -> None:
    with Connection(redis_server, transport=TRANSPORT) as connection:
        channel = our_channel(connection)
        given = channel._create_client()

        with channel.conn_or_acquire(given) as used:
            assert used is given


def test_messages_published_through_the_kept_client_are_delivered_in_order(
    redis_server: str,
) -> None:
    queue = Queue("broker-channel-test", Exchange("broker-channel-test"), "broker-channel-test")
    with Connection(redis_server, transport=TRANSPORT) as connection:
        channel = connection.default_channel
        bound = queue(channel)
        bound.declare()
        bound.purge()
        producer = Producer(channel, exchange=queue.exchange, routing_key=queue.routing_key)
        for number in range(3):
            producer.publish({"n": number}, serializer="json")

        received = [bound.get(no_ack=True) for _ in range(3)]

        assert [message.payload["n"] for message in received if message] == [0, 1, 2]


def test_a_channel_closed_after_its_connection_was_collected_keeps_the_worker_and_the_message(
    tmp_path: Path,
) -> None:
    # The state a Celery worker reached in a Sentinel failover (its consumer lost the broker
    # while a message it took was not acknowledged): the server gone, the connection
    # collected (the transport has forgotten its client) but its channel not closed, since
    # closing it failed on the dead server. Celery then closes it again: kombu 5.7 raised an
    # AttributeError building a pool to put the message back, which stopped the worker.
    server = RedisServer(tmp_path / "redis")
    server.start()
    queue = Queue("broker-channel-lost", Exchange("broker-channel-lost"), "broker-channel-lost")
    connection = Connection(server.url, transport=TRANSPORT)
    channel = our_channel(connection)
    bound = queue(channel)
    bound.declare()
    Producer(channel, exchange=queue.exchange, routing_key=queue.routing_key).publish(
        {"n": 1}, serializer="json"
    )
    taken = bound.get(no_ack=False)
    assert taken is not None
    assert taken.delivery_tag is not None
    unacked = channel.unacked_key
    try:
        server.stop()
        connection.transport.client = None  # what Connection.collect() leaves

        ignore_errors(connection, channel.close)  # raised AttributeError before
    finally:
        server.start()
    try:
        # Not lost: among the unacknowledged, handed back after the visibility timeout.
        assert redis.Redis.from_url(server.url).hexists(unacked, taken.delivery_tag)
    finally:
        server.stop()

"""The publisher's batch (``CeleryPublisher.batch``, kombu's ``Producer.batch``) on real Redis:
a sweep's commands and their ``task-sent`` events go in one pipeline when the block ends."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery.events.state import State
from kombu import Connection, Producer, Queue
from kombu.exceptions import KombuError

from adapters.messaging.publisher import CeleryPublisher, publishing_app
from application.handlers.operations.sweeps import BULK_MESSAGE_PRIORITY
from domain.ports.commands import CommandMessage
from worker.local.embedded import ProcessGroup, start_redis
from worker.settings import Settings

QUEUE = "billing.bulk"


@pytest.fixture
def redis_url(redis_server: str) -> Iterator[str]:
    url = f"{redis_server}/9"
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.close()


def publisher_on(url: str) -> CeleryPublisher:
    return CeleryPublisher(publishing_app(Settings(redis_url=url)))


def publish(publisher: CeleryPublisher, count: int) -> list[str]:
    ids = [f"cmd_{uuid.uuid4().hex}" for _ in range(count)]
    for command_id in ids:
        publisher.publish(
            CommandMessage(
                id=command_id,
                type="billing.users.enable",
                payload={"command_id": command_id, "user_id": "usr_1"},
                queue=QUEUE,
                priority=BULK_MESSAGE_PRIORITY,
            )
        )
    return ids


def queued_ids(url: str) -> list[str]:
    """The task ids waiting on the bulk queue's every priority list, oldest first."""
    client = redis.Redis.from_url(url)
    try:
        keys = client.keys(f"{QUEUE}*")
        return [
            json.loads(raw)["headers"]["id"]
            for key in keys
            for raw in reversed(client.lrange(key, 0, -1))
        ]
    finally:
        client.close()


def test_a_batch_sends_its_commands_and_their_sent_events_when_the_block_ends(
    redis_url: str,
) -> None:
    events = redis.Redis.from_url(redis_url).pubsub()  # type: ignore[no-untyped-call]
    events.psubscribe("*celeryev*")
    events.get_message(timeout=1)  # the subscription's confirmation

    with publisher_on(redis_url).batch() as batch:
        ids = publish(batch, 3)
        assert queued_ids(redis_url) == [], "nothing goes before the block ends"

    assert queued_ids(redis_url) == ids
    sent_events = []
    while (message := events.get_message(timeout=1)) is not None:
        if message["type"] == "pmessage" and message["channel"].endswith(b"task.sent"):
            sent_events.append(message)
    assert len(sent_events) == 3
    events.close()


def sent_events_of(redis_url: str, send: Callable[[CeleryPublisher], list[str]]) -> list[Any]:
    """The ``task-sent`` events ``send`` makes on Redis, as Flower receives them (decoded)."""
    events = redis.Redis.from_url(redis_url).pubsub()  # type: ignore[no-untyped-call]
    events.psubscribe("*celeryev*")
    events.get_message(timeout=1)  # the subscription's confirmation
    send(publisher_on(redis_url))
    received = []
    while (message := events.get_message(timeout=1)) is not None:
        if message["type"] == "pmessage" and message["channel"].endswith(b"task.sent"):
            envelope = json.loads(message["data"])
            assert envelope["properties"]["body_encoding"] == "base64"
            received.append(json.loads(base64.b64decode(envelope["body"])))
    events.close()
    return received


def test_a_batch_s_sent_events_are_celery_s_and_show_each_command_in_flower_s_state(
    redis_url: str,
) -> None:
    def one_at_a_time(publisher: CeleryPublisher) -> list[str]:
        return publish(publisher, 1)

    def batched(publisher: CeleryPublisher) -> list[str]:
        with publisher.batch() as batch:
            return publish(batch, 3)

    [celery_s] = sent_events_of(redis_url, one_at_a_time)
    ours = sent_events_of(redis_url, batched)

    assert [set(event) for event in ours] == [set(celery_s)] * 3
    unchanging = ("type", "hostname", "pid", "name", "queue", "exchange", "routing_key", "retries")
    for event in ours:
        assert {key: event[key] for key in unchanging} == {key: celery_s[key] for key in unchanging}
        assert "usr_1" in event["kwargs"]
    assert [event["clock"] for event in ours] == sorted({event["clock"] for event in ours})
    flower_s: Any = State()  # what Flower keeps of the events it receives (untyped in the stubs)
    for event in ours:
        flower_s.event({**event, "local_received": time.time()})  # as its receiver stamps it
    assert [flower_s.tasks[event["uuid"]].state for event in ours] == ["PENDING"] * 3
    assert {flower_s.tasks[event["uuid"]].name for event in ours} == {"billing.users.enable"}


def declarations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What kombu's producers are asked to declare from now on: queues and exchanges."""
    declared: list[str] = []
    declare = Producer.maybe_declare

    def counting(producer: Producer, entity: Any, *args: Any, **kwargs: Any) -> Any:
        kind = "queue" if isinstance(entity, Queue) else "exchange"
        declared.append(f"{kind} {entity.name}")
        return declare(producer, entity, *args, **kwargs)

    monkeypatch.setattr(Producer, "maybe_declare", counting)
    return declared


def test_a_batch_declares_its_queue_once_and_still_reaches_a_queue_never_declared(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    publisher = publisher_on(redis_url)
    declared = declarations(monkeypatch)

    with publisher.batch() as batch:
        ids = publish(batch, 5)

    # The batch's task-sent events declare Celery's event exchange once too.
    assert Counter(declared) == {
        f"queue {QUEUE}": 1,
        "exchange celeryev": 1,
    }
    assert queued_ids(redis_url) == ids  # its Redis was empty: the one declaration bound it
    declared.clear()
    publish(publisher, 1)  # the pooled producer the batch used declares again
    assert Counter(declared) == {
        f"queue {QUEUE}": 1,
        "exchange celeryev": 1,
    }


def retried_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The calls kombu wraps in its retrying ``Connection.ensure`` from now on."""
    wrapped: list[str] = []
    ensure = Connection.ensure

    def counting(connection: Connection, obj: Any, fun: Any, *args: Any, **kwargs: Any) -> Any:
        wrapped.append(getattr(fun, "__name__", repr(fun)))
        return ensure(connection, obj, fun, *args, **kwargs)

    monkeypatch.setattr(Connection, "ensure", counting)
    return wrapped


def test_only_the_publish_that_declares_a_batch_s_queue_is_retried_the_rest_only_buffer(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    publisher = publisher_on(redis_url)
    publish(publisher, 1)  # the pooled producer's connection is open
    retried = retried_calls(monkeypatch)

    with publisher.batch() as batch:
        ids = publish(batch, 5)

    assert retried == ["_publish", "_maybe_declare"]  # the first message, its queue declared
    assert queued_ids(redis_url)[-5:] == ids
    retried.clear()
    publish(publisher, 1)  # one at a time: the message and its task-sent event, each declaring
    assert retried == ["_publish", "_maybe_declare"] * 2


def test_commands_published_one_at_a_time_each_declare_their_queue(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    declared = declarations(monkeypatch)

    publish(publisher_on(redis_url), 2)

    assert Counter(declared) == {
        f"queue {QUEUE}": 2,
        "exchange celeryev": 2,
    }


def test_a_block_that_raises_sends_none_of_its_commands(redis_url: str) -> None:
    def sweep_failing_before_the_end() -> None:
        with publisher_on(redis_url).batch() as batch:
            publish(batch, 2)
            raise RuntimeError("the sweep failed before the end")

    with pytest.raises(RuntimeError):
        sweep_failing_before_the_end()

    assert queued_ids(redis_url) == []


def test_a_batch_whose_redis_went_away_raises_at_its_end(tmp_path: Path) -> None:
    group = ProcessGroup()
    url = start_redis(group, tmp_path / "redis", log_path=tmp_path / "redis.log")

    def redis_stopping_inside_the_block() -> None:
        with publisher_on(url).batch() as batch:
            publish(batch, 2)
            group.stop()

    try:
        with pytest.raises(KombuError, match="delivery is uncertain"):
            redis_stopping_inside_the_block()
    finally:
        group.stop()


def test_a_batch_larger_than_kombus_flush_size_still_goes_whole_at_its_end(
    redis_url: str,
) -> None:
    with publisher_on(redis_url).batch() as batch:
        ids = publish(batch, 600)  # 1,200 Redis commands with their task-sent events
        assert queued_ids(redis_url) == []

    assert queued_ids(redis_url) == ids


def test_commands_published_one_at_a_time_go_at_once(redis_url: str) -> None:
    ids = publish(publisher_on(redis_url), 2)

    assert queued_ids(redis_url) == ids

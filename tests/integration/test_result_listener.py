"""The API's one subscription to the tasks' result channels (``worker/api/results.py``), on
real Redis: a waiting request wakes when its command's task reports an end, not when it
starts, and polls the log while Redis is unreachable."""

from __future__ import annotations

import asyncio
import json
import time

import redis.asyncio as aioredis

from adapters.messaging.publisher import result_channel
from worker.api.results import ResultListener


def state(status: str) -> bytes:
    return json.dumps({"status": status, "result": None, "task_id": "c1"}).encode()


async def woken_within(watch_timeout: float, publish: list[bytes], redis_url: str) -> float:
    """Seconds a watch of command c1 took to wake while ``publish`` went on its channel."""
    redis = aioredis.Redis.from_url(redis_url)
    listener = ResultListener(redis)
    await listener.start()
    try:
        assert listener.listening
        with listener.watching("c1") as watch:
            started = time.monotonic()
            for data in publish:
                await redis.publish(result_channel("c1"), data)
            await watch.next_look(watch_timeout)
            return time.monotonic() - started
    finally:
        await listener.stop()
        await redis.aclose()


def test_a_waiting_request_wakes_when_its_command_s_task_succeeds(redis_server: str) -> None:
    assert asyncio.run(woken_within(5.0, [state("SUCCESS")], redis_server)) < 1.0


def test_a_waiting_request_wakes_when_its_command_s_task_fails(redis_server: str) -> None:
    assert asyncio.run(woken_within(5.0, [state("FAILURE")], redis_server)) < 1.0


def test_a_task_that_started_or_waits_for_a_retry_does_not_wake_the_request(
    redis_server: str,
) -> None:
    waited = asyncio.run(woken_within(0.6, [state("STARTED"), state("RETRY")], redis_server))

    assert waited >= 0.55


def test_a_message_that_cannot_be_read_wakes_the_request_to_read_the_log(
    redis_server: str,
) -> None:
    assert asyncio.run(woken_within(5.0, [b"\xff not json"], redis_server)) < 1.0


def test_while_redis_is_unreachable_a_request_reads_the_log_every_half_second() -> None:
    async def scenario() -> tuple[bool, float]:
        redis = aioredis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
        listener = ResultListener(redis)
        await listener.start()
        try:
            with listener.watching("c1") as watch:
                started = time.monotonic()
                await watch.next_look(5.0)
                return listener.listening, time.monotonic() - started
        finally:
            await listener.stop()
            await redis.aclose()

    listening, waited = asyncio.run(scenario())

    assert not listening
    assert 0.4 <= waited < 1.0

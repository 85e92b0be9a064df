"""The long-running loops' heartbeats (``adapters/messaging/heartbeats.py``) on real Redis:
judged on Redis's clock, whatever the application's clock says; silent past the configured
silence or two of the loop's intervals; forgotten when stopped on purpose or gone for a day.
Each process's own loops beating is proven on a running system
(``tests/chaos/test_silent_consumer.py``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio as aioredis

from adapters.clock import CLOCK_OFFSET_KEY, ShiftableClock
from adapters.messaging.heartbeats import (
    FORGET_AFTER_SECONDS,
    KEY,
    Heartbeats,
    Paced,
    beat_async,
)
from domain.operations.silent_loops import Silence
from worker.api.results import ResultListener

HEARTBEATS_DB = 13
"""A Redis database of these tests alone."""


@pytest.fixture
def client(redis_server: str) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(f"{redis_server}/{HEARTBEATS_DB}")
    connection.delete(KEY, CLOCK_OFFSET_KEY)
    yield connection
    connection.delete(KEY, CLOCK_OFFSET_KEY)
    connection.close()


def by_loop(silences: list[Silence]) -> dict[str, Silence]:
    return {silence.loop: silence for silence in silences}


def test_a_loop_that_just_beat_is_not_silent_after_the_application_clock_moved_a_month(
    client: redis.Redis,
) -> None:
    heartbeats = Heartbeats(client)
    heartbeats.beat("consumer:w1@a", 10)
    clock = ShiftableClock(client)
    before = clock.now()
    client.set(CLOCK_OFFSET_KEY, repr(31 * 86_400.0))  # billing-worker clock advance 31d
    clock.expire()
    assert (clock.now() - before).days == 31

    silence = by_loop(heartbeats.silences(60))["consumer:w1@a"]

    assert silence.seconds < 5
    assert not silence.silent


def test_a_loop_silent_past_the_configured_silence_is_silent_and_one_that_beats_seldom_is_not(
    client: redis.Redis,
) -> None:
    heartbeats = Heartbeats(client)
    heartbeats.beat("consumer:w1@a", 0.1)
    heartbeats.beat("sweep:maintenance.prune_command_log", 3600)
    time.sleep(0.7)

    silences = by_loop(heartbeats.silences(0.5))

    assert silences["consumer:w1@a"].silent
    assert silences["consumer:w1@a"].limit == 0.5
    assert not silences["sweep:maintenance.prune_command_log"].silent
    assert silences["sweep:maintenance.prune_command_log"].limit == 7200


def test_a_loop_beating_again_is_no_longer_silent(client: redis.Redis) -> None:
    heartbeats = Heartbeats(client)
    heartbeats.beat("beat:a", 0.1)
    time.sleep(0.7)
    assert by_loop(heartbeats.silences(0.5))["beat:a"].silent

    heartbeats.beat("beat:a", 0.1)

    assert not by_loop(heartbeats.silences(0.5))["beat:a"].silent


def test_a_loop_stopped_on_purpose_is_no_longer_expected(client: redis.Redis) -> None:
    heartbeats = Heartbeats(client)
    heartbeats.beat("consumer:w1@a", 10)
    heartbeats.beat("consumer:w2@a", 10)

    heartbeats.forget("consumer:w1@a")

    assert [silence.loop for silence in heartbeats.silences(60)] == ["consumer:w2@a"]


def test_a_loop_silent_for_more_than_a_day_is_forgotten(client: redis.Redis) -> None:
    seconds, _ = client.time()
    client.hset(KEY, "consumer:gone@a", f"{seconds - FORGET_AFTER_SECONDS - 60} 10.0")
    client.hset(KEY, "consumer:stuck@a", f"{seconds - 3600} 10.0")

    silences = by_loop(Heartbeats(client).silences(60))

    assert "consumer:gone@a" not in silences
    assert silences["consumer:stuck@a"].silent
    assert not client.hexists(KEY, "consumer:gone@a")


def test_an_asyncio_client_beats_into_the_same_heartbeats(
    client: redis.Redis, redis_server: str
) -> None:
    async def beat() -> None:
        connection = aioredis.Redis.from_url(f"{redis_server}/{HEARTBEATS_DB}")
        try:
            await beat_async(connection, "result-listener:a:1", 10)
        finally:
            await connection.aclose()

    asyncio.run(beat())

    assert not by_loop(Heartbeats(client).silences(60))["result-listener:a:1"].silent


def test_the_result_listener_beats_while_it_listens_and_is_forgotten_when_it_stops(
    client: redis.Redis, redis_server: str
) -> None:
    async def listen() -> tuple[set[str], set[str]]:
        connection = aioredis.Redis.from_url(f"{redis_server}/{HEARTBEATS_DB}")
        listener = ResultListener(connection, heartbeat_seconds=0.2)
        await listener.start()
        try:
            deadline = time.monotonic() + 10
            while not client.hexists(KEY, listener.loop_name) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            listening = {silence.loop for silence in Heartbeats(client).silences(60)}
        finally:
            await listener.stop()
            await connection.aclose()
        stopped = {silence.loop for silence in Heartbeats(client).silences(60)}
        return listening - stopped, stopped

    forgotten, left = asyncio.run(listen())

    assert len(forgotten) == 1
    assert next(iter(forgotten)).startswith("result-listener:")
    assert left == set()


def test_a_paced_heartbeat_records_once_per_interval_and_never_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorded: list[float] = []

    def record() -> None:
        recorded.append(time.monotonic())
        if len(recorded) > 1:
            raise redis.ConnectionError("Redis away")

    paced = Paced(record, 0.3, "beat:a")
    for _ in range(5):
        paced()
    assert len(recorded) == 1
    time.sleep(0.35)

    with caplog.at_level(logging.INFO):
        paced()

    assert len(recorded) == 2
    assert "could not record the heartbeat of beat:a" in caplog.text

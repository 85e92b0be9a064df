"""The shiftable clock (the local stack's and the tests') over a real Redis that goes away: a
Redis restart or a Sentinel failover must not turn each request that reads the time meanwhile
into an error."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from adapters.clock import ShiftableClock
from tests.support.redis_server import RedisServer
from worker.bootstrap import build_clock
from worker.settings import Settings

DAY = 86_400.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    """A started Redis server, stopped after the test whatever the test did to it."""
    started = RedisServer(tmp_path / "redis")
    started.start()
    yield started
    started.stop()


def test_the_last_offset_read_stands_while_redis_does_not_answer(server: RedisServer) -> None:
    clock = ShiftableClock(server.url, refresh=0)
    clock.advance(DAY)
    assert clock.offset() == DAY

    server.stop()

    assert clock.offset() == DAY


def test_with_no_offset_read_yet_an_unreachable_redis_is_an_error(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis")  # never started

    with pytest.raises(redis.ConnectionError):
        ShiftableClock(server.url, refresh=0).offset()


def test_a_process_s_clock_keeps_the_offset_when_redis_goes_before_its_first_stamp(
    server: RedisServer, tmp_path: Path
) -> None:
    ShiftableClock(server.url).advance(DAY)  # `billing-worker clock advance 1d`, elsewhere
    clock = build_clock(Settings(redis_url=server.url, shiftable_clock=True, data_dir=tmp_path))

    server.kill()  # before the process has stamped anything

    assert clock.now() - datetime.now(UTC) > timedelta(days=1) - timedelta(minutes=1)


def test_a_clock_expired_as_a_task_starts_reads_a_move_made_since_its_last_read(
    server: RedisServer,
) -> None:
    clock = ShiftableClock(server.url, refresh=3600)  # a read fresh for long
    assert clock.offset() == 0.0

    ShiftableClock(server.url).advance(DAY)  # `clock advance 1d`, from another process
    cached = clock.offset()
    clock.expire()  # a task starts (worker/celery_app.py)

    assert (cached, clock.offset()) == (0.0, DAY)


def test_an_expired_clock_keeps_the_last_offset_while_redis_does_not_answer(
    server: RedisServer,
) -> None:
    clock = ShiftableClock(server.url, refresh=0)
    clock.advance(DAY)
    assert clock.offset() == DAY

    server.stop()
    clock.expire()

    assert clock.offset() == DAY


def test_an_offset_lost_with_redis_s_dataset_is_written_back_by_a_clock_that_read_it(
    server: RedisServer,
) -> None:
    clock, other = ShiftableClock(server.url, refresh=0), ShiftableClock(server.url, refresh=0)
    clock.advance(DAY)
    assert other.offset() == DAY

    redis.Redis.from_url(server.url).flushall()  # Redis restarted with an empty dataset

    assert clock.offset() == DAY
    assert other.offset() == DAY
    assert ShiftableClock(server.url).offset() == DAY  # a process started after it too


def test_a_reset_clock_stays_at_real_time_though_processes_read_an_offset_before(
    server: RedisServer,
) -> None:
    clock, other = ShiftableClock(server.url, refresh=0), ShiftableClock(server.url, refresh=0)
    clock.advance(DAY)
    assert other.offset() == DAY

    clock.reset()

    assert other.offset() == 0
    assert ShiftableClock(server.url).offset() == 0


def test_aligning_the_offset_replaces_it_for_every_process_and_says_what_it_was(
    server: RedisServer,
) -> None:
    other = ShiftableClock(server.url, refresh=0)  # another process's
    other.advance(31 * DAY)  # what this Redis's data held

    was = ShiftableClock(server.url).align(62 * DAY)  # the emulator's, at `up`

    assert was == 31 * DAY
    assert other.offset() == 62 * DAY
    assert ShiftableClock(server.url).align(0) == 62 * DAY
    with pytest.raises(ValueError, match="never behind"):
        ShiftableClock(server.url).align(-1)

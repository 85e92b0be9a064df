"""The relay's lock on a real Redis: one relay at a time, and a relay that finds it taken
leaves a note its holder reads as it lets go."""

from __future__ import annotations

import uuid

import redis

from adapters.outbound.stream import RedisRelayLock


def lock_pair(redis_server: str) -> tuple[RedisRelayLock, RedisRelayLock]:
    client = redis.Redis.from_url(f"{redis_server}/4")
    key = f"relay-lock-{uuid.uuid4().hex[:8]}"
    return RedisRelayLock(client, key), RedisRelayLock(client, key)


def test_one_relay_holds_the_lock_at_a_time(redis_server: str) -> None:
    first, second = lock_pair(redis_server)

    assert first.acquire()
    assert not second.acquire()
    first.release()
    assert second.acquire()


def test_the_holder_learns_as_it_lets_go_that_another_relay_came_by(redis_server: str) -> None:
    first, second = lock_pair(redis_server)
    assert first.acquire()

    assert not second.acquire()

    assert first.release() is True
    assert first.acquire()
    assert first.release() is False


def test_a_relay_that_takes_the_lock_clears_an_older_note(redis_server: str) -> None:
    # It looks at the whole outbox itself: a note left before it took the lock is answered.
    first, second = lock_pair(redis_server)
    assert first.acquire()
    assert not second.acquire()
    first.release()

    assert second.acquire()
    assert second.release() is False


def test_a_release_by_a_relay_whose_lock_expired_frees_nothing_of_the_next(
    redis_server: str,
) -> None:
    first, second = lock_pair(redis_server)
    client = redis.Redis.from_url(f"{redis_server}/4")
    assert first.acquire()
    client.delete(first._keys[0])  # its time ran out under a very slow relay
    assert second.acquire()

    first.release()

    assert not RedisRelayLock(client, first._keys[0]).acquire()


def test_a_lock_whose_holder_died_frees_itself_within_ten_seconds(redis_server: str) -> None:
    # A worker killed while its relay ran never lets go: every event committed meanwhile waits
    # for the lock's life, and consumers (and the fault schedules' checker) wait about 20 s.
    first, _second = lock_pair(redis_server)
    client = redis.Redis.from_url(f"{redis_server}/4")
    assert first.acquire()

    left = int(client.pttl(first._keys[0]))

    assert 0 < left <= 10_000

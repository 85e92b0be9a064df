"""Failed authentications and attempts in flight, shared through a real Redis. Each
``SharedFailures`` (with a Redis client of its own) stands for an API process: they share
nothing but Redis, so a key's budget is the same with one process or several."""

from __future__ import annotations

import asyncio
import socket
import uuid

from redis.asyncio import Redis

from worker.api.shared_throttle import SharedFailures, Taken, end, take
from worker.local.embedded import free_port


def test_failures_counted_by_one_process_refuse_the_key_in_another(redis_server: str) -> None:
    async def scenario() -> tuple[float | None, float | None, float | None]:
        first, second = Redis.from_url(f"{redis_server}/6"), Redis.from_url(f"{redis_server}/6")
        try:
            one = SharedFailures(first, "client", limit=3, window=60.0)
            other = SharedFailures(second, "client", limit=3, window=60.0)
            key = f"cli_{uuid.uuid4().hex}"
            await one.failed(key)
            await other.failed(key)
            below = await one.retry_after(key)
            await one.failed(key)
            return below, await other.retry_after(key), await other.retry_after(f"{key}-else")
        finally:
            await first.aclose()
            await second.aclose()

    below, over, other_key = asyncio.run(scenario())

    assert below is None  # two failures of three
    assert over is not None
    assert 59 < over <= 60  # until the oldest failure leaves the window
    assert other_key is None


def test_an_api_with_other_limits_on_the_same_redis_keeps_a_count_of_its_own(
    redis_server: str,
) -> None:
    async def scenario() -> tuple[float | None, float | None, float | None]:
        first, second = Redis.from_url(f"{redis_server}/6"), Redis.from_url(f"{redis_server}/6")
        try:
            lenient = SharedFailures(first, "stripe-source", limit=20, window=60.0)
            strict = SharedFailures(second, "stripe-source", limit=3, window=60.0)
            same_as_lenient = SharedFailures(second, "stripe-source", limit=20, window=60.0)
            source = f"10.1.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}"
            for _ in range(5):
                await lenient.failed(source)  # over the strict limit, if it counted them
            await strict.failed(source)
            for _ in range(15):
                await same_as_lenient.failed(source)
            return (
                await strict.retry_after(source),
                await lenient.retry_after(source),
                await same_as_lenient.retry_after(source),
            )
        finally:
            await first.aclose()
            await second.aclose()

    strict, lenient, same_as_lenient = asyncio.run(scenario())

    assert strict is None  # its one failure, not the lenient API's five
    assert lenient is not None  # 5 + 15 failures under the same policy: shared
    assert same_as_lenient is not None


def test_attempts_in_flight_in_one_process_hold_places_in_every_other(redis_server: str) -> None:
    async def scenario() -> tuple[list[Taken], Taken, Taken, Taken]:
        first, second = Redis.from_url(f"{redis_server}/6"), Redis.from_url(f"{redis_server}/6")
        try:
            spaces = [
                (
                    SharedFailures(redis, "client", limit=3, window=60.0),
                    SharedFailures(redis, "source", limit=30, window=60.0),
                )
                for redis in (first, second)
            ]
            client, source = f"cli_{uuid.uuid4().hex}", f"10.0.0.{uuid.uuid4().int % 250}"
            tokens = [uuid.uuid4().hex for _ in range(4)]
            # Three attempts at once, taken by either process: the limit's worth of places.
            taken = [
                await take(((by_client, client), (by_source, source)), token)
                for (by_client, by_source), token in zip(
                    (spaces[0], spaces[1], spaces[0]), tokens, strict=False
                )
            ]
            by_client, by_source = spaces[1]
            limits = ((by_client, client), (by_source, source))
            no_room = await take(limits, tokens[3])
            await end(limits, tokens[0], failed=True)  # a failure keeps its place
            still_none = await take(limits, tokens[3])
            await end(limits, tokens[1], failed=False)  # a success gives it back
            room = await take(limits, tokens[3])
            return taken, no_room, still_none, room
        finally:
            await first.aclose()
            await second.aclose()

    taken, no_room, still_none, room = asyncio.run(scenario())

    assert [t.taken for t in taken] == [True, True, True]
    assert (no_room.taken, no_room.full, no_room.retry_after) == (False, 1, None)
    assert (still_none.full, still_none.failures) == (1, (1, 1))
    assert (room.taken, room.failures) == (True, (1, 1))


def test_without_redis_each_process_still_counts_its_own_failures() -> None:
    async def scenario() -> tuple[float | None, Taken]:
        unreachable = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
        try:
            failures = SharedFailures(unreachable, "client", limit=2, window=60.0)
            await failures.failed("cli_1")
            await failures.failed("cli_1")
            return await failures.retry_after("cli_1"), await take(
                ((failures, "cli_2"),), uuid.uuid4().hex
            )
        finally:
            await unreachable.aclose()

    refused, another = asyncio.run(scenario())

    assert refused is not None  # the throttle still holds, in this process
    assert another.taken


def test_a_redis_that_never_answers_holds_no_login_and_the_process_counts_alone() -> None:
    async def scenario() -> tuple[float | None, float | None]:
        with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
            port = silent.getsockname()[1]
            redis = Redis.from_url(f"redis://127.0.0.1:{port}/0")
            try:
                failures = SharedFailures(redis, "source", limit=1, window=60.0)
                before = await failures.retry_after("10.9.9.9")
                await failures.failed("10.9.9.9")
                return before, await failures.retry_after("10.9.9.9")
            finally:
                await redis.aclose()

    before, after = asyncio.run(scenario())

    assert before is None
    assert after is not None

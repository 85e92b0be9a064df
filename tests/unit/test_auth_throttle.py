"""Failed authentications counted per client id and per source, in a sliding window."""

from __future__ import annotations

import asyncio

import pytest

from worker.api.state import RefusalHold
from worker.api.throttle import FailureThrottle
from worker.api.verifications import FairTurns


def test_a_key_is_refused_once_it_failed_the_limit_within_the_window() -> None:
    throttle = FailureThrottle(limit=3, window=60.0)
    for at in (0.0, 1.0, 2.0):
        assert throttle.retry_after("cli_1", now=at) is None
        throttle.failed("cli_1", now=at)

    assert throttle.retry_after("cli_1", now=3.0) == pytest.approx(57.0)
    assert throttle.retry_after("cli_2", now=3.0) is None  # other keys are not affected


def test_a_key_may_try_again_once_its_oldest_failure_left_the_window() -> None:
    throttle = FailureThrottle(limit=2, window=10.0)
    throttle.failed("10.0.0.1", now=0.0)
    throttle.failed("10.0.0.1", now=5.0)

    assert throttle.retry_after("10.0.0.1", now=9.0) == pytest.approx(1.0)
    assert throttle.retry_after("10.0.0.1", now=10.5) is None


def test_a_flood_of_keys_is_forgotten_rather_than_kept_growing() -> None:
    throttle = FailureThrottle(limit=1, window=60.0, max_keys=100)
    for index in range(250):
        throttle.failed(f"cli_{index}", now=0.0)

    assert throttle.retry_after("cli_0", now=1.0) is None
    assert throttle.retry_after("cli_249", now=1.0) is not None


def test_refusals_are_held_up_to_the_capacity_and_sent_at_once_beyond_it() -> None:
    hold = RefusalHold(seconds=1.0, capacity=1)

    async def two_refusals() -> list[float]:
        loop = asyncio.get_running_loop()
        began = loop.time()

        async def refuse() -> float:
            await hold.hold()
            return loop.time() - began

        return list(await asyncio.gather(refuse(), refuse()))

    first, second = asyncio.run(two_refusals())

    assert first >= 1.0  # held
    assert second < first  # the one slot was taken: sent at once, not after its second
    assert hold.held == 0


def test_sources_waiting_for_a_hash_are_served_in_turn() -> None:
    turns = FairTurns(slots=1)
    served: list[str] = []

    async def flood_then_newcomer() -> None:
        release = asyncio.Event()

        async def hash_for(source: str, hold: asyncio.Event | None = None) -> None:
            async with turns.turn(source):
                served.append(source)
                if hold is not None:
                    await hold.wait()

        under_way = asyncio.create_task(hash_for("flood", release))
        await asyncio.sleep(0)  # it took the one slot: the others below wait
        waiting = [asyncio.create_task(hash_for("flood")) for _ in range(5)]
        await asyncio.sleep(0)
        waiting.append(asyncio.create_task(hash_for("newcomer")))
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(under_way, *waiting)

    asyncio.run(flood_then_newcomer())

    # The flood's hash under way, one turn of the flood's, then the newcomer's.
    assert served == ["flood", "flood", "newcomer", "flood", "flood", "flood", "flood"]


def test_a_waiter_given_up_leaves_its_place_and_the_slot_passes_on() -> None:
    turns = FairTurns(slots=1)
    served: list[str] = []

    async def hold_and_cancel() -> None:
        release = asyncio.Event()

        async def holder() -> None:
            async with turns.turn("a"):
                await release.wait()

        async def waiter(source: str) -> None:
            async with turns.turn(source):
                served.append(source)

        held = asyncio.create_task(holder())
        await asyncio.sleep(0)
        gone = asyncio.create_task(waiter("b"))
        stays = asyncio.create_task(waiter("c"))
        await asyncio.sleep(0)
        gone.cancel()
        release.set()
        await asyncio.gather(held, stays)
        with pytest.raises(asyncio.CancelledError):
            await gone

    asyncio.run(hold_and_cancel())

    assert served == ["c"]


def test_a_source_without_failures_is_served_before_those_with_some() -> None:
    turns = FairTurns(slots=1)
    served: list[str] = []

    async def flood_then_clean_newcomer() -> None:
        release = asyncio.Event()

        async def hash_for(source: str, preferred: bool, hold: asyncio.Event | None = None) -> None:
            async with turns.turn(source, preferred=preferred):
                served.append(source)
                if hold is not None:
                    await hold.wait()

        under_way = asyncio.create_task(hash_for("flood", False, release))
        await asyncio.sleep(0)
        waiting = [asyncio.create_task(hash_for("flood", False)) for _ in range(3)]
        await asyncio.sleep(0)
        waiting.append(asyncio.create_task(hash_for("newcomer", True)))
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(under_way, *waiting)

    asyncio.run(flood_then_clean_newcomer())

    assert served == ["flood", "newcomer", "flood", "flood", "flood"]

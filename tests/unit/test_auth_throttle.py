"""Failed authentications counted per client id and per source, in a sliding window."""

from __future__ import annotations

import asyncio

import pytest

from worker.api.state import RefusalHold
from worker.db.api_clients import FailureThrottle


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
    hold = RefusalHold(seconds=0.2, capacity=1)

    async def two_refusals() -> list[float]:
        loop = asyncio.get_running_loop()
        began = loop.time()

        async def refuse() -> float:
            await hold.hold()
            return loop.time() - began

        return list(await asyncio.gather(refuse(), refuse()))

    first, second = asyncio.run(two_refusals())

    assert first >= 0.2  # held
    assert second < 0.2  # the one slot was taken: sent at once
    assert hold.held == 0

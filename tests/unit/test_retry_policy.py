from __future__ import annotations

import random

import pytest

from application.retry import RetryPolicy

POLICY = RetryPolicy(max_attempts=5, base_delay=1.0, max_delay=30.0)


def test_the_ceiling_doubles_with_each_retry_up_to_the_cap() -> None:
    assert [POLICY.ceiling(n) for n in range(7)] == [1, 2, 4, 8, 16, 30, 30]


def test_delays_are_drawn_between_zero_and_the_ceiling() -> None:
    rng = random.Random(7)
    for retries in range(6):
        delays = [POLICY.delay(retries, rng=rng) for _ in range(200)]
        assert all(0 <= d <= POLICY.ceiling(retries) for d in delays)
        assert max(delays) > POLICY.ceiling(retries) * 0.8, "full jitter spans the range"
        assert min(delays) < POLICY.ceiling(retries) * 0.2


def test_retry_after_from_the_provider_is_a_floor() -> None:
    rng = random.Random(1)
    assert all(POLICY.delay(0, retry_after=5.0, rng=rng) >= 5.0 for _ in range(50))


def test_retry_after_never_exceeds_the_maximum_delay() -> None:
    assert POLICY.delay(0, retry_after=3600.0, rng=random.Random(1)) == 30.0


@pytest.mark.parametrize(("attempts", "exhausted"), [(1, False), (4, False), (5, True), (6, True)])
def test_the_budget_counts_attempts(attempts: int, exhausted: bool) -> None:
    assert POLICY.exhausted(attempts) is exhausted


def test_the_backoff_holds_at_its_maximum_however_many_retries_were_done() -> None:
    policy = RetryPolicy(max_attempts=2**31, base_delay=5.0, max_delay=3600.0)

    assert policy.ceiling(5_000) == 3600.0
    assert 0.0 <= policy.delay(5_000) <= 3600.0

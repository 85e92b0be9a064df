"""The shared Stripe rate budget on a real Redis: pacing, priorities, waiting limits, 429s.

Each budget object below stands for a process: they share nothing but Redis. Waits are not
slept (the budget's ``sleep`` records them), so the tests read the schedule the budget hands
out instead of timing it.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis
from prometheus_client import REGISTRY

from adapters.provider.rate_budget import BudgetConfig, RedisRateBudget, default_rate, mode_of
from domain.provider.rate_budget import CallKind, Priority, RateLimited

RATE = 20.0
INTERVAL = 1 / RATE
SLACK = 0.05  # the milliseconds between two calls of one test, as Redis's clock sees them


@pytest.fixture
def redis_client(redis_server: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(f"{redis_server}/5")
    yield client
    client.close()


BudgetFactory = Callable[..., tuple[RedisRateBudget, list[float]]]


@pytest.fixture
def make_budget(redis_client: redis.Redis) -> BudgetFactory:
    account = uuid.uuid4().hex[:16]

    def make(
        *, burst: int = 4, max_wait: float = 10.0, enabled: bool = True
    ) -> tuple[RedisRateBudget, list[float]]:
        waits: list[float] = []
        config = BudgetConfig(
            account=account,
            mode="test",
            rate_per_second=RATE,
            burst=burst,
            max_wait_seconds=max_wait,
            enabled=enabled,
        )
        return RedisRateBudget(redis_client, config, sleep=waits.append), waits

    return make


def test_bulk_calls_of_two_processes_are_spaced_one_interval_apart(
    make_budget: BudgetFactory,
) -> None:
    first, _ = make_budget()
    second, _ = make_budget()

    # When each call goes: when it asked, plus the wait it was handed (a wait counts from
    # the asking, so a slow machine's time between two asks does not skew the schedule).
    schedule = []
    for _ in range(10):
        for budget in (first, second):
            asked = time.monotonic()
            schedule.append(asked + budget.acquire(CallKind.WRITE, Priority.BULK))
    schedule.sort()

    # Twenty calls booked back to back go out at the rate: the last one 19 intervals on.
    assert schedule[-1] - schedule[0] == pytest.approx(19 * INTERVAL, abs=SLACK)
    gaps = [later - earlier for earlier, later in itertools.pairwise(schedule)]
    assert min(gaps) > INTERVAL - SLACK


def test_an_interactive_call_goes_at_once_while_bulk_calls_wait_their_turn(
    make_budget: BudgetFactory,
) -> None:
    bulk, bulk_waits = make_budget(burst=4)
    interactive, interactive_waits = make_budget(burst=4)
    for _ in range(3):
        bulk.acquire(CallKind.WRITE, Priority.BULK)
    assert bulk_waits[-1] == pytest.approx(2 * INTERVAL, abs=SLACK)

    waited = interactive.acquire(CallKind.WRITE, Priority.INTERACTIVE)

    assert waited == 0.0
    assert interactive_waits == []
    # …and the bulk call after it waits one interval more for it.
    bulk.acquire(CallKind.WRITE, Priority.BULK)
    assert bulk_waits[-1] == pytest.approx(4 * INTERVAL, abs=SLACK)


def test_interactive_calls_burst_no_further_than_the_burst_allows(
    make_budget: BudgetFactory,
) -> None:
    budget, waits = make_budget(burst=4)

    for _ in range(5):  # the pace's own token and the four of the burst
        budget.acquire(CallKind.WRITE, Priority.INTERACTIVE)
    assert waits == []

    budget.acquire(CallKind.WRITE, Priority.INTERACTIVE)
    assert waits == [pytest.approx(INTERVAL, abs=SLACK)]


def test_reads_and_writes_have_budgets_of_their_own(make_budget: BudgetFactory) -> None:
    budget, _waits = make_budget()
    for _ in range(5):
        budget.acquire(CallKind.WRITE, Priority.BULK)

    assert budget.acquire(CallKind.READ, Priority.BULK) == 0.0


def test_a_token_further_away_than_the_longest_wait_is_not_taken(
    make_budget: BudgetFactory,
) -> None:
    budget, _ = make_budget(max_wait=3 * INTERVAL)
    for _ in range(4):
        budget.acquire(CallKind.WRITE, Priority.BULK)

    with pytest.raises(RateLimited) as refused:
        budget.acquire(CallKind.WRITE, Priority.BULK)

    assert refused.value.wait_seconds == pytest.approx(4 * INTERVAL, abs=SLACK)
    patient, patient_waits = make_budget(max_wait=10.0)
    patient.acquire(CallKind.WRITE, Priority.BULK)  # the refused call booked nothing
    assert patient_waits == [pytest.approx(4 * INTERVAL, abs=SLACK)]
    assert budget.usage().kinds[CallKind.WRITE].deferred_last_minute == 1


def test_a_429_halves_the_shared_rate_and_retry_after_holds_every_process(
    make_budget: BudgetFactory,
) -> None:
    hit, _ = make_budget()
    other, other_waits = make_budget()

    hit.rate_limited(CallKind.WRITE, retry_after=0.5)

    assert other.effective_rate(CallKind.WRITE) == pytest.approx(RATE / 2, rel=0.05)
    other.acquire(CallKind.WRITE, Priority.INTERACTIVE)
    assert other_waits == [pytest.approx(0.5, abs=SLACK)]
    assert other.effective_rate(CallKind.READ) == RATE  # reads were not refused


def test_a_burst_of_429s_slows_the_rate_once(make_budget: BudgetFactory) -> None:
    budget, _ = make_budget()

    for _ in range(5):
        budget.rate_limited(CallKind.WRITE, retry_after=None)

    assert budget.effective_rate(CallKind.WRITE) == pytest.approx(RATE / 2, rel=0.05)
    assert budget.usage().kinds[CallKind.WRITE].rate_limited_total == 5


def test_operators_see_calls_waits_and_429s(make_budget: BudgetFactory) -> None:
    budget, waits = make_budget()
    for _ in range(3):
        budget.acquire(CallKind.WRITE, Priority.BULK)
    budget.acquire(CallKind.READ, Priority.INTERACTIVE)
    budget.rate_limited(CallKind.READ, retry_after=None)

    scheduled = budget.usage()
    # A call counts in the second it is due: once the last one is, all three have gone out.
    time.sleep(max(waits))
    usage = budget.usage()

    writes, reads = usage.kinds[CallKind.WRITE], usage.kinds[CallKind.READ]
    assert (writes.calls_last_minute, reads.calls_last_minute) == (3, 1)
    assert writes.wait_seconds_total == pytest.approx(3 * INTERVAL, abs=SLACK)
    assert scheduled.kinds[CallKind.WRITE].backlog_seconds > 0
    assert (writes.rate_limited_last_minute, reads.rate_limited_last_minute) == (0, 1)
    assert writes.configured_rate == RATE


def test_a_disabled_budget_lets_every_call_through_and_still_counts_it(
    make_budget: BudgetFactory,
) -> None:
    budget, waits = make_budget(enabled=False)

    for _ in range(50):
        assert budget.acquire(CallKind.WRITE, Priority.BULK) == 0.0

    assert waits == []
    assert budget.usage().kinds[CallKind.WRITE].calls_last_minute == 50


@pytest.mark.parametrize(
    ("api_key", "mode", "rate"),
    [
        ("sk_test_abc", "test", 25.0),
        ("rk_test_abc", "test", 25.0),
        ("sk_live_abc", "live", 100.0),
        ("rk_live_abc", "live", 100.0),
    ],
)
def test_the_default_rate_is_stripes_published_limit_for_the_keys_mode(
    api_key: str, mode: str, rate: float
) -> None:
    assert (mode_of(api_key), default_rate(api_key)) == (mode, rate)


def test_a_fresh_budget_shows_its_settings_and_nothing_used(make_budget: BudgetFactory) -> None:
    budget, _ = make_budget(burst=3, max_wait=7.5)

    usage = budget.usage()

    assert (usage.mode, usage.burst, usage.max_wait_seconds) == ("test", 3, 7.5)
    assert usage.account == budget.config.account
    for kind in CallKind:
        figures = usage.kinds[kind]
        assert (figures.configured_rate, figures.effective_rate) == (RATE, RATE)
        assert figures.calls_last_minute == figures.deferred_last_minute == 0
        assert figures.rate_limited_last_minute == figures.rate_limited_total == 0
        assert figures.waiting == 0
        assert figures.wait_seconds_total == figures.backlog_seconds == 0.0


def test_a_call_waiting_for_its_token_counts_as_waiting_until_it_goes(
    redis_client: redis.Redis, make_budget: BudgetFactory
) -> None:
    budget, _ = make_budget()
    seen_while_waiting: list[int] = []
    waiting = RedisRateBudget(
        redis_client,
        budget.config,
        sleep=lambda _: seen_while_waiting.append(budget.usage().kinds[CallKind.WRITE].waiting),
    )
    waiting.acquire(CallKind.WRITE, Priority.BULK)  # the first token: no wait

    waiting.acquire(CallKind.WRITE, Priority.BULK)

    assert seen_while_waiting == [1]
    assert budget.usage().kinds[CallKind.WRITE].waiting == 0


def test_a_429_with_no_time_to_wait_holds_no_call(make_budget: BudgetFactory) -> None:
    hit, _ = make_budget()
    other, other_waits = make_budget()

    hit.rate_limited(CallKind.WRITE, retry_after=0)
    other.acquire(CallKind.WRITE, Priority.INTERACTIVE)

    assert other_waits == []


def test_a_disabled_budget_shows_its_configured_rate_even_after_a_429(
    make_budget: BudgetFactory,
) -> None:
    budget, _ = make_budget(enabled=False)

    budget.rate_limited(CallKind.WRITE, retry_after=None)

    assert budget.effective_rate(CallKind.WRITE) == RATE
    assert budget.usage().kinds[CallKind.WRITE].effective_rate == RATE


def test_this_process_counts_its_calls_waits_and_429s_by_kind_in_its_metrics(
    make_budget: BudgetFactory,
) -> None:
    budget, waits = make_budget()

    def sample(name: str) -> float:
        return REGISTRY.get_sample_value(f"{name}_total", {"kind": "write"}) or 0.0

    names = (
        "billing_stripe_budget_calls",
        "billing_stripe_budget_wait_seconds",
        "billing_stripe_rate_limited",
    )
    before = [sample(name) for name in names]
    budget.acquire(CallKind.WRITE, Priority.BULK)
    budget.acquire(CallKind.WRITE, Priority.BULK)
    budget.rate_limited(CallKind.WRITE, retry_after=None)
    after = [sample(name) for name in names]

    assert after[0] - before[0] == 2
    assert after[1] - before[1] == pytest.approx(sum(waits))
    assert sum(waits) > 0
    assert after[2] - before[2] == 1


def test_after_a_429_another_processs_bulk_calls_go_out_at_half_the_rate(
    make_budget: BudgetFactory,
) -> None:
    hit, _ = make_budget()
    other, _ = make_budget()

    hit.rate_limited(CallKind.WRITE, retry_after=None)
    asked = time.monotonic()
    due = [asked + other.acquire(CallKind.WRITE, Priority.BULK) for _ in range(3)]

    # Half the rate: two intervals between calls, a little less as it climbs back.
    assert due[2] - due[0] == pytest.approx(4 * INTERVAL, abs=0.02 + SLACK)

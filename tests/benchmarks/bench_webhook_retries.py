"""How a failing webhook delivery spends its budget: attempts, and when the n-th comes.

Run: ``.venv/bin/python tests/benchmarks/bench_webhook_retries.py [--runs 2000]``

Simulates deliveries to a receiver that never answers 2xx, with the real backoff
(``application.retry.RetryPolicy``: full jitter between 0 and ``min(max, base·2ⁿ)``) and the real
rule that ends a delivery (``WebhookDelivery.attempt_failed``: a retry that would fall past
the budget, counted from the first attempt, is not made), at the default settings (base 5 s,
max 1 h, budget 24 h). The baseline, in the same run, is the same schedule without jitter
(every wait at its ceiling): the fewest attempts the budget can hold.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from application.retry import RetryPolicy  # noqa: E402
from domain.webhooks import DeliveryState, WebhookDelivery  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def attempts_until_given_up(
    policy: RetryPolicy, budget: timedelta, rng: random.Random | None
) -> list[float]:
    """The hours after the first attempt at which each attempt was made."""
    delivery = WebhookDelivery.of("evt_1", "user.enabled", 1, "user:usr_1", "we_1", T0)
    now, times = T0, []
    while True:
        times.append((now - T0).total_seconds() / 3600)
        wait = (
            policy.ceiling(delivery.attempts)
            if rng is None
            else policy.delay(delivery.attempts, rng=rng)
        )
        retry_at = now + timedelta(seconds=wait)
        if delivery.attempt_failed(500, "HTTP 500", now, retry_at, budget):
            assert delivery.state is DeliveryState.FAILED
            return times
        now = retry_at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    policy = RetryPolicy(max_attempts=2**31, base_delay=5.0, max_delay=3600.0)
    budget = timedelta(hours=24)
    rng = random.Random(args.seed)
    runs = [attempts_until_given_up(policy, budget, rng) for _ in range(args.runs)]
    counts = sorted(len(times) for times in runs)
    tenth = sorted(times[9] * 60 for times in runs)
    ceiling = attempts_until_given_up(policy, budget, None)
    print(f"{args.runs} deliveries that never succeed; base 5 s, max 1 h, budget 24 h")
    print(
        f"attempts (full jitter): median {statistics.median(counts):.0f}, "
        f"min {counts[0]}, max {counts[-1]}"
    )
    print(
        f"the 10th attempt after: median {statistics.median(tenth):.0f} min, "
        f"p95 {tenth[int(len(tenth) * 0.95)]:.0f} min"
    )
    print(
        f"baseline, every wait at its ceiling: {len(ceiling)} attempts, "
        f"the 10th after {ceiling[9] * 60:.0f} min"
    )


if __name__ == "__main__":
    main()

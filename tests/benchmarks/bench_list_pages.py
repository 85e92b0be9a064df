"""The CPU a page of Stripe's subscription list costs us (issue 46): read through the SDK's
objects (as the adapter did) and from the raw JSON (as it does), against the emulator.

    PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_list_pages.py [--subscriptions 1000]

Counts this process's CPU (``time.process_time``) only: the emulator is another process, so
what is measured is what a page costs our worker, not Stripe's answer time."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from adapters.provider.stripe_adapter import StripeBillingProvider
from tests.emulator.support import sdk_client
from tests.support.emulator import EMULATOR_KEY, start_emulator


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subscriptions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        emulator = start_emulator(Path(workdir) / "emulator.log", "--rate-limit", "0")
        try:
            measure(emulator.url, options.subscriptions, options.rounds)
        finally:
            emulator.stop()


def measure(url: str, count: int, rounds: int) -> None:
    sdk = sdk_client(url)
    customer = sdk.v1.customers.create(params={"name": "Bench"})
    price = sdk.v1.prices.create(
        params={
            "currency": "usd",
            "unit_amount": 900,
            "recurring": {"interval": "month"},
            "product_data": {"name": "Bench"},
        }
    )
    for number in range(count):
        sdk.v1.subscriptions.create(
            params={
                "customer": customer.id,
                "items": [{"price": price.id}],
                "metadata": {"subscription_id": f"sub_{number}"},
            }
        )
    provider = StripeBillingProvider(EMULATOR_KEY, api_base=url, timeout=30)

    def through_sdk_objects() -> int:
        pages, after = 0, None
        while True:
            params: dict[str, Any] = {"status": "all", "limit": 100}
            if after:
                params["starting_after"] = after
            page = sdk.v1.subscriptions.list(params=params)  # type: ignore[arg-type]
            [_read_through_sdk(subscription) for subscription in page.data]
            pages += 1
            if not page.has_more:
                return pages
            after = page.data[-1].id

    def from_json() -> int:
        return sum(1 for _ in provider.subscription_pages())

    for name, walk in (("SDK objects", through_sdk_objects), ("raw JSON", from_json)):
        best = None
        for _ in range(rounds):
            started = time.process_time()
            pages = walk()
            per_page = (time.process_time() - started) / pages
            best = per_page if best is None else min(best, per_page)
        assert best is not None
        print(f"{name:>12}: {best * 1000:6.1f} ms of CPU per page of 100 ({pages} pages)")


if __name__ == "__main__":
    main()


def _read_through_sdk(subscription: Any) -> tuple[Any, ...]:
    """The fields the adapter read from the SDK's objects before it read the JSON."""
    item = subscription["items"].data[0]
    recurring = item.price.recurring
    return (
        subscription.id,
        subscription.status,
        item.id,
        item.price.id,
        item.current_period_start,
        item.current_period_end,
        subscription.billing_cycle_anchor,
        recurring.interval if recurring else None,
        subscription.cancel_at,
        item.price.unit_amount,
        item.price.currency,
    )

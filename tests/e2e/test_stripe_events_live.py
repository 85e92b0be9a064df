"""Stripe's events in, against real Stripe test mode (skipped without ``STRIPE_TEST_API_KEY``).

Real Stripe cannot reach a test machine's API, so the test plays the last hop: it reads the
event Stripe recorded (``GET /v1/events``), signs its body as Stripe signs deliveries, and
posts it to ``POST /webhooks/stripe``. Everything else is real: Stripe's event as Stripe
writes it, our parsing of it, the command, and the worker re-reading the subscription from
Stripe. To point a real account's webhooks at a deployment, see the README
(`billing-worker stripe webhooks register`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import redis
import stripe  # noqa: TID251 - the test acts as Stripe's dashboard through the SDK

from domain.subscriptions.subscription import SubscriptionState
from tests.emulator.support import real_stripe_key
from tests.support.stack import Stack, eventually, stack_env
from tests.support.stripe_events import signature
from tests.support.subscriptions import (
    Subscribed,
    new_account,
    new_plan,
    operator,
    stored_subscription,
    subscribe,
)

pytestmark = [pytest.mark.e2e, pytest.mark.stripe_live]

LIVE_REDIS_DB = 3
"""Never shared in the suite (the benchmarks use it, alone)."""


@pytest.fixture(scope="module")
def live_key() -> str:
    key = real_stripe_key()
    if key is None:
        pytest.skip("set STRIPE_TEST_API_KEY to run Stripe's events in against real Stripe")
    return key


@pytest.fixture(scope="module")
def stack(
    live_key: str,
    backend: str,
    workdir: Path,
    redis_server: str,
    make_database: Callable[[str], str],
) -> Iterator[Stack]:
    name = f"live_{backend}"
    base = workdir / name
    base.mkdir(parents=True, exist_ok=True)
    database_url = make_database(name)
    redis_url = f"{redis_server}/{LIVE_REDIS_DB}"
    redis.Redis.from_url(redis_url).flushdb()
    env = stack_env(
        database_url=database_url,
        redis_url=redis_url,
        data_dir=base,
        BILLING_STRIPE_API_KEY=live_key,
    )
    system = Stack(name=name, database_url=database_url, redis_url=redis_url, workdir=base, env=env)
    try:
        system.start_worker()
        system.start_api()
        yield system
    finally:
        system.stop()


def test_a_real_stripe_event_makes_our_row_follow_real_stripe(stack: Stack, live_key: str) -> None:
    ctx = operator(stack)
    sub: Subscribed = subscribe(ctx, new_account(ctx), new_plan(ctx, "live-events", 700))
    client = stripe.StripeClient(live_key, max_network_retries=2)
    with CustomerCleanedUp(stack, sub) as customer_id:
        client.v1.subscriptions.cancel(sub.provider_id)

        def the_event() -> dict[str, object] | None:
            listed = client.v1.events.list(
                params={"type": "customer.subscription.deleted", "limit": 20}
            )
            for event in listed.data:
                if event.data.object["id"] == sub.provider_id:
                    return json.loads(str(event))  # type: ignore[no-any-return]
            return None

        document = eventually(the_event, timeout=60, what="Stripe to record the event")
        body = json.dumps(document).encode()
        answer = httpx.post(
            f"{stack.api_url}/webhooks/stripe",
            content=body,
            headers={"Stripe-Signature": signature(body), "Content-Type": "application/json"},
            timeout=30,
        )

        assert answer.status_code == 200, answer.text
        assert answer.json()["handled"] is True
        eventually(
            lambda: stored_subscription(stack, sub.id).state is SubscriptionState.CANCELED or None,
            timeout=30,
            what="our subscription to read canceled, as Stripe has it",
        )
        assert customer_id.startswith("cus_")


class CustomerCleanedUp(contextlib.AbstractContextManager[str]):
    """The subscription's Stripe customer, deleted at Stripe after the test."""

    def __init__(self, stack: Stack, sub: Subscribed) -> None:
        from adapters.db.uow import SqlUnitOfWork

        with SqlUnitOfWork(stack.sessions) as uow:
            account = uow.billing_accounts.get(sub.account_id)
        assert account is not None
        assert account.provider_id is not None
        self.customer_id = account.provider_id
        self.key = str(stack.env["BILLING_STRIPE_API_KEY"])

    def __enter__(self) -> str:
        return self.customer_id

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(stripe.StripeError):
            stripe.StripeClient(self.key).v1.customers.delete(self.customer_id)

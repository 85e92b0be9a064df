"""Events at scale: a clock advance renewing 10,000 subscriptions records their 50,000 events
and leaves the deliveries to the background (how long it takes is no test's business: the
emulator's speed shows in the benchmarks that drive it)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorConfig, create_app
from stripe_emulator.resources import catalog, customers, subscriptions, webhook_endpoints
from stripe_emulator.resources.common import Ctx
from tests.emulator.webhook_support import Hook

pytestmark = pytest.mark.emulator_only

DAY = 86_400
SUBSCRIPTIONS = 10_000


def test_a_clock_advance_renewing_10000_subscriptions_records_their_events_and_queues_them() -> (
    None
):
    app = create_app(EmulatorConfig(rate_limit_per_second=0, event_log_size=200_000))
    emulator = app.emulator
    store = emulator.store
    now = emulator.clock.now()

    def write(handler: Any, params: dict[str, Any]) -> dict[str, Any]:
        store.events.begin(now, "req_setup")  # what the API does around a handler
        try:
            result: dict[str, Any] = handler(Ctx(store, now), params)
            return result
        finally:
            store.events.end()

    # Every event is wanted by an endpoint (nobody listens there: deliveries stay paused).
    write(webhook_endpoints.create, {"url": "http://127.0.0.1:9/", "enabled_events": ["*"]})
    emulator.webhooks.pause()
    price = write(
        catalog.create_price,
        {"currency": "usd", "unit_amount": 1000, "product_data": {"name": "Plan"},
         "recurring": {"interval": "month"}},
    )  # fmt: skip
    for _ in range(SUBSCRIPTIONS):
        customer = write(customers.create, {"name": "Renewed"})
        write(subscriptions.create, {"customer": customer["id"], "items": [{"price": price["id"]}]})
    recorded_before = len(store.events)
    store.events.take_fresh()  # (recorded without a running loop: not queued; left out here)

    async def advance() -> tuple[httpx.Response, dict[str, Any]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://emulator") as admin:
            response = await admin.post("/_emulator/clock/advance", json={"seconds": 32 * DAY})
            await asyncio.sleep(0)  # the dispatcher queues the deliveries
            status = emulator.webhooks.status()
            await emulator.webhooks.close()
            return response, status

    response, status = asyncio.run(advance())

    # Each renewal and, an hour later (webhook endpoints exist), its invoice's finalization.
    assert response.json()["rolled"] == 2 * SUBSCRIPTIONS
    assert len(store.events) - recorded_before == 5 * SUBSCRIPTIONS
    assert status["queued"] == 5 * SUBSCRIPTIONS  # every renewal event waits for delivery


def test_a_clock_advance_answers_before_its_events_are_delivered(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    price = emulator_client.v1.prices.create(
        params={"currency": "usd", "unit_amount": 1000, "product_data": {"name": "Plan"},
                "recurring": {"interval": "month"}}
    )  # fmt: skip
    customer = emulator_client.v1.customers.create(params={"name": "Many"})
    for _ in range(100):
        emulator_client.v1.subscriptions.create(
            params={"customer": customer.id, "items": [{"price": price.id}]}
        )
    hook.settle(60)
    hook.receiver.received.clear()

    hook.admin.advance_clock("32d")
    busy = hook.admin.webhook_status()
    hook.settle(60)

    assert busy.idle is False
    assert len(hook.receiver.received) == 500
    assert sum(1 for delivery in hook.receiver.received if delivery.type == "invoice.paid") == 100

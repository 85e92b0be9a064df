"""Objects served by the emulator have exactly the key sets of Stripe's fixtures.

Stripe's canonical fixtures (``fixtures3.json`` from stripe/openapi, MIT licensed; the types
served are kept beside this file in ``stripe_fixtures.json``) define each object's keys.
Every object is created through the SDK, and its sorted keys are compared with the
fixture's. ``list``, ``search_result`` and the error envelope have no fixture and are
compared with Stripe's documented key sets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin
from tests.emulator.support import EMULATOR_KEY, EmulatorProcess, real_stripe_key, sdk_client

pytestmark = pytest.mark.emulator_only

FIXTURES = Path(__file__).with_name("stripe_fixtures.json")


@pytest.fixture(scope="module")
def fixtures() -> dict[str, Any]:
    resources: dict[str, Any] = json.loads(FIXTURES.read_text())["resources"]
    return resources


def _keys(value: Any) -> list[str]:
    data = value.to_dict() if hasattr(value, "to_dict") else value
    return sorted(data)


def _objects(client: stripe.StripeClient) -> dict[str, Any]:
    customer = client.v1.customers.create(
        params={"name": "Shapes", "tax_id_data": [{"type": "eu_vat", "value": "DE123456789"}]}
    )
    tax_id = client.v1.customers.tax_ids.list(customer.id).data[0]
    product = client.v1.products.create(params={"name": "Shapes product"})
    price = client.v1.prices.create(
        params={
            "product": product.id,
            "currency": "usd",
            "unit_amount": 100,
            "recurring": {"interval": "month"},
        }
    )
    subscription = client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}]}
    )
    item = client.v1.subscription_items.retrieve(subscription["items"].data[0].id)
    # Sent invoices: active on Stripe without a payment method, so it can be changed.
    invoiced = client.v1.subscriptions.create(
        params={
            "customer": customer.id,
            "items": [{"price": price.id}],
            "collection_method": "send_invoice",
            "days_until_due": 30,
        }
    )
    client.v1.subscriptions.update(
        invoiced.id,
        params={
            "items": [{"id": invoiced["items"].data[0].id, "quantity": 2}],
            "proration_behavior": "create_prorations",
        },
    )
    assert isinstance(invoiced.latest_invoice, str)
    invoice = client.v1.invoices.retrieve(invoiced.latest_invoice)
    pending = client.v1.invoice_items.list(params={"customer": customer.id, "pending": True})
    preview = client.v1.invoices.create_preview(
        params={"customer": customer.id, "subscription": invoiced.id}
    )
    other = client.v1.customers.create(params={"name": "To delete"})
    spare_product = client.v1.products.create(params={"name": "To delete"})
    return {
        "customer": client.v1.customers.retrieve(customer.id),
        "tax_id": tax_id,
        "product": product,
        "price": price,
        "subscription": subscription,
        "subscription_item": item,
        "plan": item.plan,
        "invoice": invoice,
        "line_item": invoice.lines.data[0],
        "listed_line_item": client.v1.invoices.line_items.list(invoice.id or "").data[0],
        "invoiceitem": client.v1.invoice_items.retrieve(pending.data[0].id or ""),
        "preview_invoice": preview,
        "preview_line_item": preview.lines.data[0],
        "deleted_tax_id": client.v1.customers.tax_ids.delete(customer.id, tax_id.id),
        "deleted_customer": client.v1.customers.delete(other.id),
        "deleted_product": client.v1.products.delete(spare_product.id),
    }


@pytest.fixture
def served(emulator_client: stripe.StripeClient) -> dict[str, Any]:
    return _objects(emulator_client)


@pytest.mark.parametrize(
    "object_type",
    [
        "customer",
        "tax_id",
        "product",
        "price",
        "subscription",
        "subscription_item",
        "plan",
        "invoice",
        "line_item",
        "invoiceitem",
        "deleted_customer",
        "deleted_tax_id",
        "deleted_product",
    ],
)
def test_each_served_object_has_exactly_the_fixture_key_set(
    fixtures: dict[str, Any], served: dict[str, Any], object_type: str
) -> None:
    assert _keys(served[object_type]) == sorted(fixtures[object_type])


@pytest.mark.parametrize(
    ("object_type", "fixture"),
    [
        ("listed_line_item", "line_item"),
        ("preview_invoice", "invoice"),
        ("preview_line_item", "line_item"),
    ],
)
def test_listed_lines_and_previews_have_the_fixture_key_sets(
    fixtures: dict[str, Any], served: dict[str, Any], object_type: str, fixture: str
) -> None:
    assert _keys(served[object_type]) == sorted(fixtures[fixture])


def test_events_and_webhook_endpoints_have_exactly_the_fixture_key_sets(
    fixtures: dict[str, Any], emulator_client: stripe.StripeClient
) -> None:
    created = emulator_client.v1.webhook_endpoints.create(
        params={"url": "https://example.com/hooks", "enabled_events": ["customer.created"]}
    )
    emulator_client.v1.customers.create(params={"name": "Shapes"})
    event = emulator_client.v1.events.list().data[0]
    retrieved = emulator_client.v1.webhook_endpoints.retrieve(created.id)
    deleted = emulator_client.v1.webhook_endpoints.delete(created.id)

    assert _keys(event) == sorted(fixtures["event"])
    assert _keys(event.request) == sorted(fixtures["event"]["request"])
    assert _keys(retrieved) == sorted(fixtures["webhook_endpoint"])
    assert _keys(created) == sorted([*fixtures["webhook_endpoint"], "secret"])
    assert _keys(deleted) == sorted(fixtures["deleted_webhook_endpoint"])


def test_the_lines_list_embedded_in_an_invoice_has_the_list_keys(served: dict[str, Any]) -> None:
    assert _keys(served["invoice"].lines) == ["data", "has_more", "object", "url"]


def test_a_pending_update_has_the_fixture_key_set(
    fixtures: dict[str, Any], emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    customer = emulator_client.v1.customers.create()
    price = emulator_client.v1.prices.create(
        params={"currency": "usd", "unit_amount": 100, "product_data": {"name": "P"},
                "recurring": {"interval": "month"}}
    )  # fmt: skip
    subscription = emulator_client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}]}
    )
    admin.fail_payments(customer.id)

    held = emulator_client.v1.subscriptions.update(
        subscription.id,
        params={
            "items": [{"id": subscription["items"].data[0].id, "quantity": 3}],
            "proration_behavior": "always_invoice",
            "payment_behavior": "pending_if_incomplete",
        },
    )

    assert held.pending_update is not None
    assert _keys(held.pending_update) == sorted(fixtures["subscription"]["pending_update"])
    assert held.pending_update.subscription_items is not None
    assert _keys(held.pending_update.subscription_items[0]) == sorted(fixtures["subscription_item"])


def test_the_items_list_embedded_in_a_subscription_has_the_fixture_key_set(
    fixtures: dict[str, Any], served: dict[str, Any]
) -> None:
    assert _keys(served["subscription"]["items"]) == sorted(fixtures["subscription"]["items"])
    assert _keys(served["subscription"]["items"].data[0]) == sorted(
        fixtures["subscription"]["items"]["data"][0]
    )


def test_list_objects_have_stripes_list_keys(emulator_client: stripe.StripeClient) -> None:
    listed = emulator_client.v1.customers.list()

    assert _keys(listed) == ["data", "has_more", "object", "url"]


def test_search_results_have_stripes_search_keys(emulator_client: stripe.StripeClient) -> None:
    result = emulator_client.v1.customers.search(params={"query": "name:'nobody'"})

    assert _keys(result) == ["data", "has_more", "next_page", "object", "url"]


def test_errors_carry_stripes_error_fields(emulator: EmulatorProcess) -> None:
    response = httpx.get(
        f"{emulator.url}/v1/customers/cus_missing",
        headers={"Authorization": f"Bearer {EMULATOR_KEY}"},
    )

    assert response.status_code == 404
    assert list(response.json()) == ["error"]
    assert sorted(response.json()["error"]) == [
        "code",
        "doc_url",
        "message",
        "param",
        "request_log_url",
        "type",
    ]


@pytest.mark.stripe_live
def test_the_emulator_and_real_stripe_agree_on_key_sets(emulator: EmulatorProcess) -> None:
    key = real_stripe_key()
    if key is None:
        pytest.skip("set STRIPE_TEST_API_KEY to compare key sets with real Stripe")
    real_client = stripe.StripeClient(key, max_network_retries=2)
    real = _objects(real_client)
    emulated = _objects(sdk_client(emulator.url))
    try:
        mismatches = {
            name: sorted(set(_keys(real[name])) ^ set(_keys(emulated[name])))
            for name in real
            if _keys(real[name]) != _keys(emulated[name])
        }
        assert mismatches == {}
    finally:
        real_client.v1.customers.delete(real["customer"].id)


def _monthly_subscription(
    client: stripe.StripeClient, unit_amount: int = 100, quantity: int = 1, **params: Any
) -> stripe.Subscription:
    """A new customer's subscription to ``quantity`` of a new monthly price (``params``
    added to its creation)."""
    customer = client.v1.customers.create()
    price = client.v1.prices.create(
        params={"currency": "usd", "unit_amount": unit_amount, "product_data": {"name": "P"},
                "recurring": {"interval": "month"}}
    )  # fmt: skip
    creation: Any = {
        "customer": customer.id,
        "items": [{"price": price.id, "quantity": quantity}],
        **params,
    }
    return client.v1.subscriptions.create(params=creation)


def test_coupons_and_discounts_have_exactly_the_fixture_key_sets(
    fixtures: dict[str, Any], emulator_client: stripe.StripeClient
) -> None:
    coupon = emulator_client.v1.coupons.create(params={"percent_off": 10, "duration": "forever"})
    subscription = _monthly_subscription(
        emulator_client, discounts=[{"coupon": coupon.id}], expand=["discounts"]
    )
    removed = emulator_client.v1.subscriptions.delete_discount(subscription.id)

    assert _keys(coupon) == sorted(fixtures["coupon"])
    assert _keys(subscription.discounts[0]) == sorted(fixtures["discount"])
    assert _keys(removed) == sorted(fixtures["deleted_discount"])
    assert _keys(emulator_client.v1.coupons.delete(coupon.id)) == sorted(fixtures["deleted_coupon"])


def test_credit_notes_and_their_lines_have_exactly_the_fixture_key_sets(
    fixtures: dict[str, Any], emulator_client: stripe.StripeClient
) -> None:
    customer = emulator_client.v1.customers.create()
    price = emulator_client.v1.prices.create(
        params={"currency": "usd", "unit_amount": 1000, "product_data": {"name": "P"},
                "recurring": {"interval": "month"}}
    )  # fmt: skip
    subscription = emulator_client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id, "quantity": 2}]}
    )
    assert isinstance(subscription.latest_invoice, str)
    invoice = emulator_client.v1.invoices.retrieve(subscription.latest_invoice)
    params: Any = {
        "invoice": invoice.id,
        "lines": [
            {"type": "invoice_line_item", "invoice_line_item": invoice.lines.data[0].id,
             "quantity": 1},
            {"type": "custom_line_item", "unit_amount": 100, "description": "Goodwill"},
        ],
        "amount": 1100,
        "refund_amount": 1100,
    }  # fmt: skip
    preview = emulator_client.v1.credit_notes.preview(params=params)
    note = emulator_client.v1.credit_notes.create(params=params)
    listed = emulator_client.v1.credit_notes.line_items.list(note.id)

    assert _keys(note) == sorted(fixtures["credit_note"])
    assert _keys(preview) == sorted(fixtures["credit_note"])
    assert _keys(note.lines) == ["data", "has_more", "object", "url"]
    assert _keys(note.refunds[0]) == sorted(fixtures["credit_note"]["refunds"][0])
    assert _keys(listed.data[0]) == sorted(fixtures["credit_note_line_item"])
    # A custom line has no invoice line item: Stripe leaves the key out (the fixture's own).
    assert _keys(note.lines.data[1]) == sorted(fixtures["credit_note"]["lines"]["data"][1])


def test_a_subscription_schedule_has_the_fixture_key_sets(
    fixtures: dict[str, Any], emulator_client: stripe.StripeClient
) -> None:
    subscription = _monthly_subscription(emulator_client)

    schedule = emulator_client.v1.subscription_schedules.create(
        params={"from_subscription": subscription.id}
    )

    expected = fixtures["subscription_schedule"]
    assert _keys(schedule) == sorted(expected)
    assert _keys(schedule.phases[0]) == sorted(expected["phases"][0])
    assert _keys(schedule.phases[0]["items"][0]) == sorted(expected["phases"][0]["items"][0])
    assert _keys(schedule.default_settings) == sorted(expected["default_settings"])
    assert _keys(schedule.current_phase) == sorted(expected["current_phase"])

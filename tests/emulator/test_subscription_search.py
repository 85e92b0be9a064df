"""Searching subscriptions (``GET /v1/subscriptions/search``)."""

from __future__ import annotations

from typing import Any

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.billing_support import monthly, subscribe
from tests.emulator.support import StripeTarget, unique


def test_subscriptions_can_be_searched_by_metadata_and_status(
    stripe_target: StripeTarget,
) -> None:
    tag = unique("tag")
    price = monthly(stripe_target, 1000)
    _, tagged = subscribe(stripe_target, price, metadata={"account": tag})
    subscribe(stripe_target, price, metadata={"account": unique("other")})

    found = stripe_target.eventually(
        lambda: stripe_target.client.v1.subscriptions.search(
            params={"query": f"metadata['account']:'{tag}' AND status:'active'"}
        ),
        lambda result: len(result.data) >= 1,
    )

    assert [subscription.id for subscription in found.data] == [tagged.id]
    assert found.data[0]["items"].data[0].price.id == price.id


def _subscription(client: stripe.StripeClient, **params: Any) -> stripe.Subscription:
    customer = client.v1.customers.create(params={"name": "Searched"})
    price = client.v1.prices.create(
        params={"currency": "usd", "unit_amount": 1000, "product_data": {"name": "Plan"},
                "recurring": {"interval": "month"}}
    )  # fmt: skip
    return client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}], **params}  # type: ignore[arg-type]
    )


@pytest.mark.emulator_only
def test_subscriptions_are_searched_by_customer_status_and_metadata(
    emulator_client: stripe.StripeClient,
) -> None:
    first = _subscription(emulator_client, metadata={"account": "a1"})
    second = _subscription(emulator_client, metadata={"account": "a2"})
    emulator_client.v1.subscriptions.cancel(second.id)

    def ids(query: str) -> list[str]:
        result = emulator_client.v1.subscriptions.search(params={"query": query})
        return [subscription.id for subscription in result.data]

    assert ids(f"customer:'{first.customer}'") == [first.id]
    assert ids("status:'canceled'") == [second.id]
    assert ids("metadata['account']:'a1' OR metadata['account']:'a2'") == [second.id, first.id]
    assert ids("-status:'canceled'") == [first.id]


@pytest.mark.emulator_only
def test_search_pages_and_refuses_fields_it_does_not_know(
    emulator_client: stripe.StripeClient,
) -> None:
    created = [_subscription(emulator_client) for _ in range(3)]

    first = emulator_client.v1.subscriptions.search(params={"query": "status:'active'", "limit": 2})
    second = emulator_client.v1.subscriptions.search(
        params={"query": "status:'active'", "limit": 2, "page": first.next_page or ""}
    )

    assert [s.id for s in first.data + second.data] == [s.id for s in reversed(created)]
    assert (first.has_more, second.has_more) == (True, False)
    with pytest.raises(stripe.InvalidRequestError) as raised:
        emulator_client.v1.subscriptions.search(params={"query": "email:'x@example.com'"})
    assert raised.value.param == "query"

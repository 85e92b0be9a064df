"""Lists with no filter read their page from the store's list order (O(limit)); these tests
hold it to the answer of the full scan it replaces (``paginate(newest_first(...))``): the same
objects in the same order, ``has_more``, cursors both ways, deleted objects and objects
created in the same second (listed last-created first)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator.errors import StripeError
from stripe_emulator.objects import render_subscription
from stripe_emulator.resources import catalog, customers, subscriptions
from stripe_emulator.resources.common import Ctx, newest_first, paginate, paginate_in_order
from stripe_emulator.state import Record, Store

pytestmark = pytest.mark.emulator_only

START = 1_700_000_000
Write = Callable[[Callable[[Ctx, dict[str, Any]], Record], dict[str, Any], int], Record]


def _writer(store: Store) -> Write:
    def write(
        handler: Callable[[Ctx, dict[str, Any]], Record], params: dict[str, Any], now: int
    ) -> Record:
        store.events.begin(now, "req_setup")  # what the API does around a handler
        try:
            return handler(Ctx(store, now), params)
        finally:
            store.events.end()

    return write


def _with_customers(count: int) -> tuple[Store, Write]:
    """``count`` customers, three to a second (ties in ``created``)."""
    store = Store()
    write = _writer(store)
    for index in range(count):
        write(customers.create, {"name": f"Customer {index}"}, START + index // 3)
    return store, write


def _delete_customer(store: Store, write: Write, customer_id: str) -> None:
    store.events.begin(START + 100, "req_delete")
    try:
        customers.delete(Ctx(store, START + 100, {"customer": customer_id}), {})
    finally:
        store.events.end()


def _page_params(ids: list[str]) -> Iterator[dict[str, Any]]:
    """Every way to ask for a page: no cursor, and each id as either cursor, at a few limits."""
    for limit in (1, 2, 3, 10, 100):
        yield {"limit": limit}
        for object_id in ids:
            yield {"limit": limit, "starting_after": object_id}
            yield {"limit": limit, "ending_before": object_id}
    yield {}  # the default limit


def _answer(call: Callable[[dict[str, Any]], Record], params: dict[str, Any]) -> Record | str:
    """The list object, or the error as the client would see it."""
    try:
        return call(params)
    except StripeError as error:
        return f"{error.status} {error.param} {error.message}"


def test_every_customer_page_is_the_page_the_full_scan_gives() -> None:
    store, write = _with_customers(25)
    ids = list(store.customers)
    for deleted in (ids[0], ids[12], ids[-1]):  # the oldest, one in between and the newest
        _delete_customer(store, write, deleted)

    for params in _page_params(ids):
        fast = _answer(
            lambda page: paginate_in_order(
                store.customers, store.customer_order, page, "/v1/customers", "customer"
            ),
            params,
        )
        scanned = _answer(
            lambda page: paginate(newest_first(store.customers), page, "/v1/customers", "customer"),
            params,
        )
        assert fast == scanned, params


def test_every_subscription_page_of_status_all_is_the_page_the_full_scan_gives() -> None:
    store, write = _with_customers(12)
    price = write(
        catalog.create_price,
        {"currency": "usd", "unit_amount": 900, "product_data": {"name": "Plan"},
         "recurring": {"interval": "month"}},
        START,
    )  # fmt: skip
    for index, customer_id in enumerate(store.customers):
        write(
            subscriptions.create,
            {"customer": customer_id, "items": [{"price": price["id"]}]},
            START + index // 4,
        )
    canceled = list(store.subscriptions)[5]
    store.events.begin(START + 10, "req_cancel")
    try:
        subscriptions.cancel(Ctx(store, START + 10, {"id": canceled}), {})
    finally:
        store.events.end()

    for params in _page_params([*store.subscriptions, "sub_unknown"]):
        listed = _answer(
            lambda page: subscriptions.list_(Ctx(store, START + 20), {"status": "all", **page}),
            params,
        )
        scanned = _answer(
            lambda page: paginate(
                newest_first(store.subscriptions),
                page,
                "/v1/subscriptions",
                "subscription",
                lambda record: render_subscription(store, record),
            ),
            params,
        )
        assert listed == scanned, params


def test_a_deleted_customer_as_cursor_is_a_404_naming_the_parameter() -> None:
    store, write = _with_customers(5)
    deleted = list(store.customers)[2]
    _delete_customer(store, write, deleted)

    with pytest.raises(StripeError) as raised:
        customers.list_(Ctx(store, START), {"starting_after": deleted})

    assert raised.value.status == 404
    assert raised.value.param == "starting_after"


def test_pages_stay_right_after_most_customers_are_deleted() -> None:
    store, write = _with_customers(30)
    ids = list(store.customers)
    for deleted in ids[:10] + ids[15:28]:  # more than half: the order squeezes its holes out
        _delete_customer(store, write, deleted)

    walked: list[str] = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        page = customers.list_(Ctx(store, START), params)
        walked += [record["id"] for record in page["data"]]
        if not page["has_more"]:
            break
        params = {"limit": 2, "starting_after": walked[-1]}

    assert walked == [record["id"] for record in newest_first(store.customers)]


def test_a_customer_stored_without_its_list_order_is_still_listed() -> None:
    store, _ = _with_customers(4)
    stray = {**next(iter(store.customers.values())), "id": "cus_stray"}
    store.customers["cus_stray"] = stray  # not through Store.add_customer

    page = customers.list_(Ctx(store, START), {"limit": 2})

    assert [record["id"] for record in page["data"]] == ["cus_stray", list(store.customers)[3]]
    assert page["has_more"] is True


def test_paging_every_subscription_through_the_sdk_lists_each_once_newest_first(
    emulator_client: stripe.StripeClient,
) -> None:
    price = emulator_client.v1.prices.create(
        params={"currency": "usd", "unit_amount": 900, "product_data": {"name": "Plan"},
                "recurring": {"interval": "month"}}
    )  # fmt: skip
    made = []
    for index in range(7):
        customer = emulator_client.v1.customers.create(params={"name": f"Paged {index}"})
        made.append(
            emulator_client.v1.subscriptions.create(
                params={"customer": customer.id, "items": [{"price": price.id}]}
            ).id
        )
    emulator_client.v1.subscriptions.cancel(made[3])

    listed = [
        subscription.id
        for subscription in emulator_client.v1.subscriptions.list(
            params={"status": "all", "limit": 3}
        ).auto_paging_iter()
    ]

    assert listed == made[::-1]

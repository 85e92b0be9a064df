"""Invoices, invoice items, payment settings, dunning and subscription schedules in the state
file."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest

from stripe_emulator import EmulatorAdmin
from stripe_emulator.state import STATE_VERSION, Store
from tests.emulator.support import running_emulator, sdk_client

pytestmark = pytest.mark.emulator_only

DAY = 86_400


def test_invoices_pending_items_payments_and_dunning_survive_a_restart(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    directory = tmp_path_factory.mktemp("billing-state")
    args = ("--rate-limit", "0", "--state-file", str(directory / "stripe.json"))

    with running_emulator(directory / "first.log", *args) as first:
        client = sdk_client(first.url)
        customer = client.v1.customers.create()
        price = client.v1.prices.create(
            params={"currency": "usd", "unit_amount": 1000, "product_data": {"name": "P"},
                    "recurring": {"interval": "month"}}
        )  # fmt: skip
        subscription = client.v1.subscriptions.create(
            params={"customer": customer.id, "items": [{"price": price.id}]}
        )
        item = subscription["items"].data[0]
        client.v1.subscriptions.update(
            subscription.id,
            params={
                "items": [{"id": item.id, "quantity": 2}],
                "proration_behavior": "create_prorations",
            },
        )
        with EmulatorAdmin(first.url) as admin:
            admin.set_dunning(retries=1, retry_interval_seconds="1d", final_status="unpaid")
            admin.fail_payments(customer.id)
            admin.set_time(item.current_period_end + 60)
        invoices_before = client.v1.invoices.list(params={"customer": customer.id}).to_dict()
        first.stop(signal.SIGTERM)

    with running_emulator(directory / "second.log", *args) as second:
        client = sdk_client(second.url)
        invoices_after = client.v1.invoices.list(params={"customer": customer.id}).to_dict()
        with EmulatorAdmin(second.url) as admin:
            dunning = admin.dunning()
            failing = admin.failing_customers()
            admin.advance_clock("1d1m")  # the retry scheduled before the restart runs
        status = client.v1.subscriptions.retrieve(subscription.id).status

    assert invoices_after == invoices_before
    assert [i["billing_reason"] for i in invoices_after["data"]] == [
        "subscription_cycle",
        "subscription_create",
    ]
    renewal = invoices_after["data"][0]
    assert renewal["status"] == "open"
    assert len(renewal["lines"]["data"]) == 3  # the two prorations and the period
    assert (dunning.retries, dunning.final_status) == (1, "unpaid")
    assert failing == [customer.id]
    assert status == "unpaid"


def test_a_subscription_schedule_survives_a_restart_and_still_moves_to_its_next_phase(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    directory = tmp_path_factory.mktemp("schedule-state")
    args = ("--rate-limit", "0", "--state-file", str(directory / "stripe.json"))

    with running_emulator(directory / "first.log", *args) as first:
        client = sdk_client(first.url)
        customer = client.v1.customers.create()
        recurring: dict[str, Any] = {
            "currency": "usd",
            "product_data": {"name": "P"},
            "recurring": {"interval": "month"},
        }
        prices = [
            client.v1.prices.create(params={"unit_amount": amount, **recurring})  # type: ignore[typeddict-item]
            for amount in (1000, 2000)
        ]
        subscription = client.v1.subscriptions.create(
            params={"customer": customer.id, "items": [{"price": prices[0].id}]}
        )
        schedule = client.v1.subscription_schedules.create(
            params={"from_subscription": subscription.id}
        )
        current = schedule.phases[0]
        client.v1.subscription_schedules.update(
            schedule.id,
            params={
                "phases": [
                    {"items": [{"price": prices[0].id}], "end_date": current.end_date},
                    {"items": [{"price": prices[1].id}], "duration": {"interval": "month"}},
                ]
            },
        )
        before = client.v1.subscription_schedules.retrieve(schedule.id).to_dict()
        first.stop(signal.SIGTERM)

    with running_emulator(directory / "second.log", *args) as second:
        client = sdk_client(second.url)
        after = client.v1.subscription_schedules.retrieve(schedule.id).to_dict()
        with EmulatorAdmin(second.url) as admin:
            admin.set_time(current.end_date + 60)
        renewed = client.v1.subscriptions.retrieve(subscription.id)

    assert after == before
    assert renewed.schedule == schedule.id
    assert renewed["items"].data[0].price.id == prices[1].id


def test_a_state_file_from_before_invoices_still_loads(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    directory = tmp_path_factory.mktemp("old-state")
    state_file = directory / "stripe.json"
    new_keys = {"invoices", "invoice_items", "item_credits", "failing_customers", "dunning"}
    old_store = {k: v for k, v in Store().to_json().items() if k not in new_keys}
    state_file.write_text(
        json.dumps(
            {"version": STATE_VERSION, "clock_offset": 0, "store": old_store, "idempotency": []}
        )
    )

    with running_emulator(directory / "emulator.log", "--state-file", str(state_file)) as emulator:
        client = sdk_client(emulator.url)
        listed = client.v1.invoices.list()
        with EmulatorAdmin(emulator.url) as admin:
            dunning = admin.dunning()

    assert listed.data == []
    assert dunning.retries == 3


def test_credit_notes_survive_a_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = tmp_path_factory.mktemp("credit-note-state")
    args = ("--rate-limit", "0", "--state-file", str(directory / "stripe.json"))

    with running_emulator(directory / "first.log", *args) as first:
        client = sdk_client(first.url)
        customer = client.v1.customers.create()
        price = client.v1.prices.create(
            params={"currency": "usd", "unit_amount": 1000, "product_data": {"name": "P"},
                    "recurring": {"interval": "month"}}
        )  # fmt: skip
        subscription = client.v1.subscriptions.create(
            params={"customer": customer.id, "items": [{"price": price.id}]}
        )
        invoice_id = str(subscription.latest_invoice)
        first_note = client.v1.credit_notes.create(
            params={"invoice": invoice_id, "amount": 300, "credit_amount": 300}
        )
        listed_before = client.v1.credit_notes.list(params={"invoice": invoice_id}).to_dict()
        first.stop(signal.SIGTERM)

    with running_emulator(directory / "second.log", *args) as second:
        client = sdk_client(second.url)
        listed_after = client.v1.credit_notes.list(params={"invoice": invoice_id}).to_dict()
        second_note = client.v1.credit_notes.create(
            params={"invoice": invoice_id, "amount": 700, "credit_amount": 700}
        )
        balance = client.v1.customers.retrieve(customer.id).balance

    assert listed_after == listed_before
    assert [note["id"] for note in listed_after["data"]] == [first_note.id]
    assert second_note.number.endswith("-CN-02")
    assert balance == -1000

"""Events and webhook endpoints in the state file, on reset, and the bound on events kept."""

from __future__ import annotations

import json
import signal

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin
from stripe_emulator.state import STATE_VERSION, Store
from tests.emulator.support import running_emulator, sdk_client

pytestmark = pytest.mark.emulator_only


def test_events_and_webhook_endpoints_survive_a_restart(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    directory = tmp_path_factory.mktemp("events-state")
    args = ("--rate-limit", "0", "--state-file", str(directory / "stripe.json"))

    with running_emulator(directory / "first.log", *args) as first:
        client = sdk_client(first.url)
        endpoint = client.v1.webhook_endpoints.create(
            params={"url": "http://127.0.0.1:9/hooks", "enabled_events": ["invoice.paid"]}
        )
        customer = client.v1.customers.create(params={"name": "Kept"})
        client.v1.customers.update(customer.id, params={"name": "Kept too"})
        before = client.v1.events.list().to_dict()
        first.stop(signal.SIGTERM)

    with running_emulator(directory / "second.log", *args) as second:
        client = sdk_client(second.url)
        after = client.v1.events.list().to_dict()
        endpoints = client.v1.webhook_endpoints.list()
        client.v1.customers.update(customer.id, params={"name": "Changed after"})
        newest = client.v1.events.list(params={"limit": 1}).data[0]

    assert after == before
    assert [event["type"] for event in after["data"]] == ["customer.updated", "customer.created"]
    assert [e.id for e in endpoints.data] == [endpoint.id]
    assert "secret" not in endpoints.data[0].to_dict()
    assert newest.data.to_dict()["previous_attributes"]["name"] == "Kept too"


def test_a_state_file_from_before_events_still_loads(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    directory = tmp_path_factory.mktemp("pre-events-state")
    state_file = directory / "stripe.json"
    new_keys = {"events", "webhook_endpoints", "webhook_secrets"}
    old_store = {k: v for k, v in Store().to_json().items() if k not in new_keys}
    state_file.write_text(
        json.dumps(
            {"version": STATE_VERSION, "clock_offset": 0, "store": old_store, "idempotency": []}
        )
    )

    with running_emulator(directory / "emulator.log", "--state-file", str(state_file)) as emulator:
        client = sdk_client(emulator.url)
        empty = client.v1.events.list()
        client.v1.customers.create(params={"name": "First event"})
        recorded = client.v1.events.list()

    assert empty.data == []
    assert [event.type for event in recorded.data] == ["customer.created"]


def test_reset_forgets_events_webhook_endpoints_and_deliveries(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    emulator_client.v1.webhook_endpoints.create(
        params={"url": "http://127.0.0.1:9/hooks", "enabled_events": ["*"]}
    )
    emulator_client.v1.customers.create(params={"name": "Forgotten"})
    admin.set_retry_schedule([5.0])
    admin.drop_deliveries(match="invoice.*")

    admin.reset()

    assert emulator_client.v1.events.list().data == []
    assert emulator_client.v1.webhook_endpoints.list().data == []
    assert admin.deliveries() == []
    assert admin.webhook_faults() == []
    assert admin.retry_schedule().delays == (0.5, 1.0, 2.0, 4.0, 8.0)
    assert admin.webhook_status().idle is True


def test_only_the_newest_events_are_kept(tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = tmp_path_factory.mktemp("event-cap")
    with running_emulator(
        directory / "emulator.log", "--rate-limit", "0", "--event-log-size", "3"
    ) as emulator:
        client = sdk_client(emulator.url)
        customers = [client.v1.customers.create(params={"name": f"C{i}"}) for i in range(5)]
        listed = client.v1.events.list()
        with pytest.raises(stripe.InvalidRequestError) as raised:
            client.v1.events.list(params={"starting_after": "evt_gone"})

    assert [event.data.object.id for event in listed.data] == [c.id for c in customers[:1:-1]]
    assert raised.value.http_status == 404
    assert raised.value.param == "starting_after"

"""Delivery faults, the pause and the retry schedule of the webhook admin API."""

from __future__ import annotations

import time

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin, EmulatorAdminError
from tests.emulator.webhook_support import Hook, Receiver

pytestmark = pytest.mark.emulator_only


def _customers(client: stripe.StripeClient, count: int, prefix: str = "C") -> list[str]:
    return [
        client.v1.customers.create(params={"name": f"{prefix}{index}"}).id for index in range(count)
    ]


def _objects(receiver: Receiver) -> list[str]:
    return [delivery.payload["data"]["object"]["id"] for delivery in list(receiver.received)]


def test_duplicate_delivers_each_event_twice_and_counts_it_delivered_once(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    fault = hook.admin.duplicate_deliveries(match="customer.*")

    (customer,) = _customers(emulator_client, 1)
    received = hook.settle()
    attempts = hook.admin.deliveries()

    assert [delivery.event_id for delivery in received] == [received[0].event_id] * 2
    assert received[0].body == received[1].body
    assert [(a.attempt, a.duplicate, a.fault) for a in attempts] == [
        (1, False, "duplicate"),
        (1, True, "duplicate"),
    ]
    assert emulator_client.v1.events.retrieve(received[0].event_id).pending_webhooks == 0
    assert hook.admin.webhook_faults()[0].fired == 1
    assert fault.kind == "duplicate"
    assert {event.data.object.id for event in hook.events()} == {customer}


def test_reorder_sends_a_window_of_deliveries_in_reverse(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    hook.admin.reorder_deliveries(window=3, hold_seconds=3.0, count=1)

    created = _customers(emulator_client, 4)
    hook.settle()

    assert _objects(hook.receiver) == [created[2], created[1], created[0], created[3]]
    assert [a.fault for a in hook.admin.deliveries()] == ["reorder"] * 3 + [None]


def test_reorder_releases_a_partial_window_after_hold_seconds(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    hook.admin.reorder_deliveries(window=5, hold_seconds=0.5, order="shuffle")

    created = _customers(emulator_client, 2)
    hook.settle()  # a window held until it filled would never be delivered

    assert sorted(_objects(hook.receiver)) == sorted(created)


def test_delay_sends_an_attempt_later_and_lets_the_next_ones_overtake_it(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    hook.admin.delay_deliveries(1.0, count=1)

    recorded = time.time()
    first, second = _customers(emulator_client, 2)
    received = hook.settle()

    assert _objects(hook.receiver) == [second, first]
    assert received[1].at - recorded >= 1.0
    assert [a.fault for a in hook.admin.deliveries()] == [None, "delay"]


def test_drop_never_sends_nor_retries_and_the_event_stays_pending(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    hook.admin.drop_deliveries(count=1)

    first, second = _customers(emulator_client, 2)
    hook.settle()
    attempts = hook.admin.deliveries()
    dropped = emulator_client.v1.events.retrieve(attempts[0].event)

    assert _objects(hook.receiver) == [second]
    assert [(a.outcome, a.status, a.fault) for a in attempts] == [
        ("dropped", None, "drop"),
        ("succeeded", 200, None),
    ]
    assert dropped.data.object.id == first
    assert dropped.pending_webhooks == 1


def test_probabilistic_faults_repeat_the_same_way_with_the_same_seed(
    hook: Hook, emulator_client: stripe.StripeClient, receiver: Receiver
) -> None:
    def run() -> list[str]:
        hook.admin.seed_faults(7)
        hook.admin.drop_deliveries(probability=0.5)
        receiver.received.clear()
        hook.admin.clear_deliveries()
        _customers(emulator_client, 12)
        hook.settle()
        hook.admin.clear_webhook_faults()
        return [a.outcome for a in hook.admin.deliveries()]

    first = run()
    second = run()

    assert first == second
    assert "dropped" in first
    assert "succeeded" in first


def test_pause_holds_every_delivery_and_resume_sends_them_in_order(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    hook.admin.pause_deliveries()

    created = _customers(emulator_client, 3)
    time.sleep(0.3)
    held = hook.admin.webhook_status()
    with pytest.raises(TimeoutError):
        hook.admin.wait_for_deliveries(0.2)
    nothing_yet = list(hook.receiver.received)
    hook.admin.resume_deliveries()
    hook.settle()

    assert nothing_yet == []
    assert (held.paused, held.queued, held.idle) == (True, 3, False)
    assert _objects(hook.receiver) == created
    assert hook.admin.webhook_status().paused is False


def test_faults_match_event_types_and_endpoints(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    hook.admin.drop_deliveries(match="customer.updated")
    hook.admin.drop_deliveries(endpoint="we_someone_else")

    (customer,) = _customers(emulator_client, 1)
    emulator_client.v1.customers.update(customer, params={"name": "Dropped"})
    hook.settle()

    assert hook.receiver.types() == ["customer.created"]
    assert [a.outcome for a in hook.admin.deliveries()] == ["succeeded", "dropped"]


def test_the_retry_schedule_can_be_read_and_changed(hook: Hook) -> None:
    admin = hook.admin

    changed = admin.set_retry_schedule([0.1, 0.3, 0.9], timeout_seconds=1.5)
    timeout_only = admin.set_retry_schedule(timeout_seconds=2)
    none = admin.set_retry_schedule([])

    assert (changed.delays, changed.max_attempts, changed.timeout_seconds) == (
        (0.1, 0.3, 0.9),
        4,
        1.5,
    )
    assert (timeout_only.delays, timeout_only.timeout_seconds) == ((0.1, 0.3, 0.9), 2.0)
    assert (none.delays, none.max_attempts) == ((), 1)
    assert admin.retry_schedule() == none


def test_a_schedule_without_retries_tries_once(
    hook: Hook, emulator_client: stripe.StripeClient
) -> None:
    hook.admin.set_retry_schedule([])
    hook.receiver.answer(500)

    _customers(emulator_client, 1)
    hook.settle()

    assert [(a.attempt, a.outcome) for a in hook.admin.deliveries()] == [(1, "failed")]


@pytest.mark.parametrize(
    ("method", "kwargs"),
    [
        ("add_webhook_fault", {"kind": "explode"}),
        ("add_webhook_fault", {"kind": "drop", "probability": 2}),
        ("add_webhook_fault", {"kind": "delay", "seconds": 0}),
        ("add_webhook_fault", {"kind": "reorder", "window": 1}),
        ("add_webhook_fault", {"kind": "reorder", "order": "sideways"}),
        ("add_webhook_fault", {"kind": "drop", "colour": "red"}),
        ("set_retry_schedule", {"delays": [-1]}),
        ("set_retry_schedule", {"timeout_seconds": 0}),
        ("remove_webhook_fault", {"fault_id": "wfl_missing"}),
    ],
)
def test_bad_webhook_admin_input_is_refused_with_a_message(
    admin: EmulatorAdmin, method: str, kwargs: dict[str, object]
) -> None:
    with pytest.raises(EmulatorAdminError) as raised:
        getattr(admin, method)(**kwargs)

    assert raised.value.status in (400, 404)
    assert str(raised.value)


def test_fault_rules_are_listed_and_removed_one_by_one_or_all(admin: EmulatorAdmin) -> None:
    drop = admin.drop_deliveries(count=2)
    delay = admin.delay_deliveries(0.5, "invoice.*")

    listed = admin.webhook_faults()
    admin.remove_webhook_fault(drop.id)
    after_one = admin.webhook_faults()
    admin.clear_webhook_faults()

    assert [(rule.id, rule.kind) for rule in listed] == [(drop.id, "drop"), (delay.id, "delay")]
    assert [rule.id for rule in after_one] == [delay.id]
    assert admin.webhook_faults() == []

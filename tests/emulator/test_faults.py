"""Injected faults, as the SDK observes them (kinds documented in faults.py)."""

from __future__ import annotations

import threading
import time

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin, EmulatorAdminError
from tests.emulator.support import EmulatorProcess, sdk_client

pytestmark = pytest.mark.emulator_only


def _customer_count(client: stripe.StripeClient) -> int:
    return len(client.v1.customers.list(params={"limit": 100}).data)


def test_an_injected_429_raises_rate_limit_error_and_creates_nothing(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.add_fault("rate_limit", "POST /v1/customers")

    with pytest.raises(stripe.RateLimitError) as raised:
        emulator_client.v1.customers.create(params={"name": "Limited"})

    assert raised.value.http_status == 429
    assert raised.value.error is not None
    assert raised.value.error.code == "rate_limit"
    admin.clear_faults()
    assert _customer_count(emulator_client) == 0


def test_a_429_can_carry_retry_headers(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.add_fault("rate_limit", should_retry=False, retry_after=3)

    with pytest.raises(stripe.RateLimitError) as raised:
        emulator_client.v1.customers.list()

    assert raised.value.headers is not None
    assert raised.value.headers["Stripe-Should-Retry"] == "false"
    assert raised.value.headers["Retry-After"] == "3"


def test_a_lock_timeout_is_a_retryable_429_the_sdk_retries(
    emulator: EmulatorProcess, admin: EmulatorAdmin
) -> None:
    admin.add_fault("lock_timeout", "POST /v1/customers", count=1)
    client = sdk_client(emulator.url, retries=1)

    customer = client.v1.customers.create(params={"name": "Locked once"})

    attempts = admin.requests("/v1/customers", method="POST")
    assert [(a.status, a.error_code) for a in attempts] == [(429, "lock_timeout"), (200, None)]
    assert customer.name == "Locked once"


def test_a_lock_timeout_without_retries_raises_rate_limit_error_with_its_code(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.add_fault("lock_timeout")

    with pytest.raises(stripe.RateLimitError) as raised:
        emulator_client.v1.customers.create()

    assert raised.value.error is not None
    assert raised.value.error.code == "lock_timeout"
    assert raised.value.headers is not None
    assert raised.value.headers["Stripe-Should-Retry"] == "true"


def test_a_lock_timeout_can_be_answered_as_a_409(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.add_fault("lock_timeout", status=409)

    with pytest.raises(stripe.APIError) as raised:
        emulator_client.v1.customers.create()

    assert raised.value.http_status == 409


@pytest.mark.parametrize(("kind", "status"), [("api_error", 500), ("service_unavailable", 503)])
def test_a_5xx_raises_api_error_and_writes_nothing(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin, kind: str, status: int
) -> None:
    fault = admin.add_fault(kind, "POST /v1/customers", count=1)

    with pytest.raises(stripe.APIError) as raised:
        emulator_client.v1.customers.create(params={"name": "Never"})

    assert raised.value.http_status == status
    assert raised.value.error is not None
    assert raised.value.error.type == "api_error"
    assert admin.faults()[0].fired == 1 == fault.count
    assert _customer_count(emulator_client) == 0


def test_a_500_after_execution_writes_and_every_retry_replays_the_500(
    emulator: EmulatorProcess, admin: EmulatorAdmin
) -> None:
    admin.add_fault("api_error", "POST /v1/customers", count=1, after_execution=True)
    client = sdk_client(emulator.url, retries=2)

    with pytest.raises(stripe.APIError) as raised:
        client.v1.customers.create(params={"name": "Written anyway"})

    attempts = admin.requests("/v1/customers", method="POST")
    assert raised.value.http_status == 500
    # Stripe stores 500s that happen after execution began and marks them not retryable.
    assert raised.value.headers is not None
    assert raised.value.headers["Stripe-Should-Retry"] == "false"
    assert [(a.status, a.replayed) for a in attempts] == [(500, False)]
    assert [c.name for c in client.v1.customers.list().data] == ["Written anyway"]
    key = attempts[0].idempotency_key
    assert key is not None
    with pytest.raises(stripe.APIError):
        client.v1.customers.create(
            params={"name": "Written anyway"}, options={"idempotency_key": key}
        )
    assert admin.requests("/v1/customers", method="POST")[-1].replayed is True


def test_a_card_error_can_be_injected(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.add_fault("card_declined", "POST /v1/subscriptions")
    customer = emulator_client.v1.customers.create()

    with pytest.raises(stripe.CardError) as raised:
        emulator_client.v1.subscriptions.create(
            params={"customer": customer.id, "items": [{"price": "price_x"}]}
        )

    assert raised.value.http_status == 402
    assert raised.value.code == "card_declined"
    assert raised.value.error is not None
    assert raised.value.error.decline_code == "generic_decline"


def test_latency_delays_the_answer(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.add_fault("latency", "GET /v1/customers", latency_ms=250)

    started = time.perf_counter()
    emulator_client.v1.customers.list()
    elapsed = time.perf_counter() - started

    assert elapsed >= 0.25
    assert admin.requests("/v1/customers")[-1].fault == "latency"


def test_a_dropped_connection_raises_api_connection_error_and_writes_nothing(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.add_fault("drop", "POST /v1/customers", count=1)

    with pytest.raises(stripe.APIConnectionError):
        emulator_client.v1.customers.create(params={"name": "Dropped"})

    assert admin.requests("/v1/customers", method="POST")[0].dropped is True
    assert _customer_count(emulator_client) == 0


def test_a_drop_after_execution_leaves_the_write_and_the_retry_replays_it(
    emulator: EmulatorProcess, admin: EmulatorAdmin
) -> None:
    admin.add_fault("drop", "POST /v1/customers", count=1, after_execution=True)
    client = sdk_client(emulator.url, retries=1)

    customer = client.v1.customers.create(params={"name": "Committed"})

    attempts = admin.requests("/v1/customers", method="POST")
    assert [(a.dropped, a.replayed) for a in attempts] == [(True, False), (False, True)]
    assert [c.id for c in client.v1.customers.list().data] == [customer.id]


def test_a_rule_on_replays_loses_their_answers_too_and_executes_nothing_again(
    emulator: EmulatorProcess, admin: EmulatorAdmin
) -> None:
    admin.add_fault("drop", "POST /v1/customers", after_execution=True, replays=True)
    client = sdk_client(emulator.url, retries=2)

    with pytest.raises(stripe.APIConnectionError):
        client.v1.customers.create(params={"name": "Lost thrice"})

    attempts = admin.requests("/v1/customers", method="POST")
    assert [(a.fault, a.dropped) for a in attempts] == [
        ("drop(after)", True),
        ("drop(replay)", True),
        ("drop(replay)", True),
    ]
    assert len(client.v1.customers.list().data) == 1


def test_only_the_network_s_faults_act_on_replays(admin: EmulatorAdmin) -> None:
    with pytest.raises(EmulatorAdminError):
        admin.add_fault("rate_limit", replays=True)


def test_a_hang_times_the_client_out_and_a_reset_releases_it(
    emulator: EmulatorProcess, admin: EmulatorAdmin
) -> None:
    admin.add_fault("hang", "POST /v1/customers", hang_seconds=30)
    client = sdk_client(emulator.url, timeout=0.5)

    started = time.perf_counter()
    with pytest.raises(stripe.APIConnectionError):
        client.v1.customers.create(params={"name": "Hung"})
    waited = time.perf_counter() - started
    admin.clear_faults()  # releases the hung request on the server

    deadline = time.monotonic() + 5
    while not admin.requests("/v1/customers") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert 0.5 <= waited < 5
    assert [(r.fault, r.dropped) for r in admin.requests("/v1/customers")] == [("hang", True)]


def test_count_limits_a_fault_to_the_first_n_matching_requests(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.add_fault("api_error", "GET /v1/customers", count=2)

    outcomes = []
    for _ in range(4):
        try:
            emulator_client.v1.customers.list()
            outcomes.append("ok")
        except stripe.APIError:
            outcomes.append("500")

    assert outcomes == ["500", "500", "ok", "ok"]


def test_faults_only_hit_matching_routes(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.add_fault("api_error", "* /v1/customers/*")
    customer = emulator_client.v1.customers.create()  # POST /v1/customers: no match

    with pytest.raises(stripe.APIError):
        emulator_client.v1.customers.retrieve(customer.id)
    emulator_client.v1.products.create(params={"name": "Unaffected"})


def test_probabilistic_faults_repeat_exactly_with_the_same_seed(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    def run() -> list[bool]:
        admin.clear_faults()
        admin.seed_faults(1234)
        admin.add_fault("api_error", "GET /v1/customers", probability=0.5)
        failed = []
        for _ in range(20):
            try:
                emulator_client.v1.customers.list()
                failed.append(False)
            except stripe.APIError:
                failed.append(True)
        return failed

    first, second = run(), run()

    assert first == second
    assert 3 <= sum(first) <= 17


def test_invalid_fault_rules_are_refused(admin: EmulatorAdmin) -> None:
    with pytest.raises(EmulatorAdminError):
        admin.add_fault("meteor_strike")
    with pytest.raises(EmulatorAdminError):
        admin.add_fault("rate_limit", after_execution=True)
    with pytest.raises(EmulatorAdminError):
        admin.add_fault("api_error", probability=1.5)


def test_a_fault_can_be_removed_by_id(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    fault = admin.add_fault("api_error")

    admin.remove_fault(fault.id)

    assert admin.faults() == []
    emulator_client.v1.customers.list()


def test_faults_do_not_block_other_requests_while_one_hangs(
    emulator: EmulatorProcess, admin: EmulatorAdmin
) -> None:
    admin.add_fault("hang", "POST /v1/products", hang_seconds=30)
    hung_client = sdk_client(emulator.url, timeout=8)
    outcome: list[BaseException] = []

    def create_product() -> None:
        try:
            hung_client.v1.products.create(params={"name": "Hangs"})
        except stripe.StripeError as error:
            outcome.append(error)

    hung = threading.Thread(target=create_product)
    hung.start()
    time.sleep(0.1)

    sdk_client(emulator.url).v1.customers.list()

    assert hung.is_alive()  # answered while the other request still hangs
    admin.reset()
    hung.join()
    assert [type(error) for error in outcome] == [stripe.APIConnectionError]

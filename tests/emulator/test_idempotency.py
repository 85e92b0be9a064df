"""Idempotency keys, per Stripe's rules (see stripe_emulator/idempotency.py)."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin
from tests.emulator.support import (
    EMULATOR_KEY,
    SECOND_KEY,
    EmulatorProcess,
    StripeTarget,
    sdk_client,
    unique,
)

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def test_the_same_key_and_parameters_replay_the_first_response(
    stripe_target: StripeTarget,
) -> None:
    key = unique("idem")
    params: stripe.params.CustomerCreateParams = {
        "name": "Replayed",
        "email": f"{unique('r')}@example.com",
    }

    first = stripe_target.client.v1.customers.create(
        params=params, options={"idempotency_key": key}
    )
    second = stripe_target.client.v1.customers.create(
        params=params, options={"idempotency_key": key}
    )
    stripe_target.customers.append(first.id)

    assert second.id == first.id
    assert second.last_response is not None
    assert second.last_response.headers["Idempotent-Replayed"] == "true"


def test_the_same_key_with_other_parameters_is_an_idempotency_error(
    stripe_target: StripeTarget,
) -> None:
    key = unique("idem")
    first = stripe_target.client.v1.customers.create(
        params={"name": "First"}, options={"idempotency_key": key}
    )
    stripe_target.customers.append(first.id)

    with pytest.raises(stripe.IdempotencyError) as raised:
        stripe_target.client.v1.customers.create(
            params={"name": "Second"}, options={"idempotency_key": key}
        )

    assert raised.value.http_status == 400
    assert raised.value.error is not None
    assert raised.value.error.type == "idempotency_error"


@pytest.mark.emulator_only
def test_the_same_key_on_another_endpoint_is_an_idempotency_error(
    emulator_client: stripe.StripeClient,
) -> None:
    emulator_client.v1.customers.create(params={"name": "A"}, options={"idempotency_key": "k1"})

    with pytest.raises(stripe.IdempotencyError) as raised:
        emulator_client.v1.products.create(params={"name": "A"}, options={"idempotency_key": "k1"})

    assert "same endpoint" in str(raised.value.user_message)


@pytest.mark.emulator_only
def test_a_replay_answers_the_stored_body_and_status_with_the_original_request_id(
    emulator: EmulatorProcess,
) -> None:
    headers = {**FORM, "Authorization": f"Bearer {EMULATOR_KEY}", "Idempotency-Key": "raw-key"}

    first = httpx.post(f"{emulator.url}/v1/customers", content="name=Raw", headers=headers)
    second = httpx.post(f"{emulator.url}/v1/customers", content="name=Raw", headers=headers)

    assert second.status_code == first.status_code == 200
    assert second.content == first.content
    assert "idempotent-replayed" not in first.headers
    assert second.headers["idempotent-replayed"] == "true"
    assert second.headers["original-request"] == first.headers["request-id"]
    assert second.headers["request-id"] != first.headers["request-id"]


@pytest.mark.emulator_only
def test_keys_expire_after_24_hours_of_emulator_time(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    options = {"idempotency_key": "daily"}
    first = emulator_client.v1.customers.create(params={"name": "Day"}, options=options)  # type: ignore[arg-type]

    admin.advance_clock(24 * 3600 - 60)
    within = emulator_client.v1.customers.create(params={"name": "Day"}, options=options)  # type: ignore[arg-type]
    admin.advance_clock(120)
    after = emulator_client.v1.customers.create(params={"name": "Day"}, options=options)  # type: ignore[arg-type]

    assert within.id == first.id
    assert after.id != first.id


@pytest.mark.emulator_only
def test_keys_are_scoped_per_api_key(emulator: EmulatorProcess) -> None:
    options = {"idempotency_key": "shared-key"}
    main = sdk_client(emulator.url, EMULATOR_KEY)
    second = sdk_client(emulator.url, SECOND_KEY)

    one = main.v1.customers.create(params={"name": "Scoped"}, options=options)  # type: ignore[arg-type]
    other = second.v1.customers.create(params={"name": "Other"}, options=options)  # type: ignore[arg-type]

    assert other.id != one.id
    assert second.v1.customers.retrieve(one.id).id == one.id  # same account, shared data


@pytest.mark.emulator_only
def test_a_request_while_the_key_is_in_flight_is_a_409_key_in_use(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.add_fault("latency", "POST /v1/customers", latency_ms=400, count=1)
    options = {"idempotency_key": "busy"}
    results: list[str] = []
    slow = threading.Thread(
        target=lambda: results.append(
            emulator_client.v1.customers.create(params={"name": "Slow"}, options=options).id  # type: ignore[arg-type]
        )
    )
    slow.start()
    time.sleep(0.15)

    with pytest.raises(stripe.APIError) as raised:
        emulator_client.v1.customers.create(params={"name": "Slow"}, options=options)  # type: ignore[arg-type]
    slow.join()
    replay = emulator_client.v1.customers.create(params={"name": "Slow"}, options=options)  # type: ignore[arg-type]

    assert raised.value.http_status == 409
    assert raised.value.error is not None  # the SDK keeps no code on APIError, only on .error
    assert raised.value.error.code == "idempotency_key_in_use"
    assert replay.id == results[0]


@pytest.mark.emulator_only
def test_a_validation_failure_is_not_stored_under_the_key(
    emulator_client: stripe.StripeClient,
) -> None:
    with pytest.raises(stripe.InvalidRequestError):
        emulator_client.v1.customers.create(
            params={"name": "V", "tax_exempt": "maybe"},
            options={"idempotency_key": "fix-and-retry"},
        )

    # Same key, corrected parameters: runs (a stored result would be an idempotency_error).
    customer = emulator_client.v1.customers.create(
        params={"name": "V"}, options={"idempotency_key": "fix-and-retry"}
    )

    assert customer.name == "V"


@pytest.mark.emulator_only
def test_an_error_raised_while_executing_is_stored_and_replayed(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    params = {"customer": "cus_notyet", "items": [{"price": "price_whatever"}]}
    for _ in range(2):
        with pytest.raises(stripe.InvalidRequestError) as raised:
            emulator_client.v1.subscriptions.create(
                params=params,  # type: ignore[arg-type]
                options={"idempotency_key": "executed-404"},
            )
        assert raised.value.http_status == 404

    logged = admin.requests("/v1/subscriptions")
    assert [entry.replayed for entry in logged] == [False, True]


@pytest.mark.emulator_only
def test_get_requests_ignore_idempotency_keys(emulator: EmulatorProcess) -> None:
    headers = {"Authorization": f"Bearer {EMULATOR_KEY}", "Idempotency-Key": "get-key"}

    httpx.get(f"{emulator.url}/v1/customers", headers=headers)
    second = httpx.get(f"{emulator.url}/v1/customers?limit=2", headers=headers)

    assert second.status_code == 200
    assert "idempotent-replayed" not in second.headers


@pytest.mark.emulator_only
def test_an_overlong_key_is_rejected(emulator_client: stripe.StripeClient) -> None:
    with pytest.raises(stripe.InvalidRequestError):
        emulator_client.v1.customers.create(options={"idempotency_key": "k" * 256})


@pytest.mark.emulator_only
def test_the_sdk_sends_a_key_on_every_post_and_reuses_it_on_retries(
    emulator: EmulatorProcess, admin: EmulatorAdmin
) -> None:
    admin.add_fault("api_error", "POST /v1/customers", count=1)
    client = sdk_client(emulator.url, retries=2)

    customer = client.v1.customers.create(params={"name": "Retried"})

    attempts = admin.requests("/v1/customers", method="POST")
    assert [attempt.status for attempt in attempts] == [500, 200]
    assert attempts[0].idempotency_key is not None
    assert attempts[0].idempotency_key == attempts[1].idempotency_key
    assert client.v1.customers.list().data[0].id == customer.id

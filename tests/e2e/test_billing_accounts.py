"""Creating billing accounts end to end: HTTP → Redis → a worker process → the database →
the Stripe emulator, on SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import stripe  # noqa: TID251 - the tests look at the emulator's customers through the SDK
from sqlalchemy import func, select

from adapters.clock import SystemClock
from adapters.db.models import BillingAccountRow
from stripe_emulator import EmulatorAdmin, LoggedRequest
from tests.support.errors import field_violations
from tests.support.records import create_organization
from tests.support.stack import Stack, eventually

pytestmark = pytest.mark.e2e

CUSTOMERS = "/v1/customers"


@pytest.fixture
def emulator(stack: Stack) -> Iterator[EmulatorAdmin]:
    admin = stack.stripe
    yield admin
    admin.clear_faults()
    admin.set_rate_limit(0)
    admin.close()


def new_org(stack: Stack, *, disabled: bool = False) -> str:
    name = f"org-{uuid.uuid4().hex[:10]}"
    org = create_organization(stack.sessions, SystemClock(), name=name, disabled=disabled)
    return org.id


def details(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "Acme Ltd",
        "email": "billing@acme.example",
        "phone": "+442079460958",
        "address": {
            "line1": "1 High Street",
            "line2": "Floor 2",
            "city": "London",
            "state": "",
            "postal_code": "EC1A 1BB",
            "country": "GB",
        },
        "currency": "gbp",
        "tax_data": [{"type": "uk_vat", "id": "GB123456789"}],
        "metadata": {"plan": "team", "seats": 12},
    }
    body.update(overrides)
    return body


def create(api: httpx.Client, org_id: str, body: dict[str, Any], **request: Any) -> httpx.Response:
    return api.post(f"/v1beta1/organizations/{org_id}/billing", json=body, **request)


def customer_creations(emulator: EmulatorAdmin, account_id: str) -> list[LoggedRequest]:
    """Executed (not replayed) customer creations for one billing account."""
    return [
        logged
        for logged in emulator.requests(path_prefix=CUSTOMERS, method="POST")
        if logged.path == CUSTOMERS
        and logged.form.get("metadata", {}).get("billing_account_id") == account_id
    ]


def customers_of(sdk: stripe.StripeClient, account_id: str) -> list[str]:
    found = sdk.v1.customers.search(
        params={"query": f"metadata['billing_account_id']:'{account_id}'"}
    )
    return [customer.id for customer in found.data]


def account_count(stack: Stack, org_id: str) -> int:
    with stack.sessions() as session:
        return int(
            session.scalar(
                select(func.count())
                .select_from(BillingAccountRow)
                .where(BillingAccountRow.org_id == org_id)
            )
            or 0
        )


def account_state(stack: Stack, account_id: str) -> str | None:
    with stack.sessions() as session:
        row = session.get(BillingAccountRow, account_id)
        return row.state if row else None


# --- online and offline ---------------------------------------------------------------------


def test_an_online_account_is_registered_with_stripe_and_returned_with_its_organization(
    stack: Stack, api: httpx.Client, emulator: EmulatorAdmin, sdk: stripe.StripeClient
) -> None:
    org_id = new_org(stack)
    response = create(api, org_id, {"body": details()})

    assert response.status_code == 200, response.text
    account = response.json()["billing_account"]
    organization = response.json()["organization"]
    assert set(account) == {
        "id", "org_id", "name", "email", "phone", "address", "provider_id", "provider",
        "currency", "state", "tax_data", "metadata", "created_at", "updated_at",
        "customer_deleted_at",
    }  # fmt: skip
    assert account["customer_deleted_at"] is None
    assert account["org_id"] == org_id
    assert account["state"] == "active"
    assert account["provider"] == "stripe"
    assert account["provider_id"].startswith("cus_")
    assert account["currency"] == "gbp"
    assert account["tax_data"] == [{"type": "gb_vat", "id": "GB123456789"}]
    assert account["metadata"] == {"plan": "team", "seats": 12}
    assert set(organization) == {
        "id", "name", "title", "metadata", "created_at", "updated_at", "state", "avatar",
    }  # fmt: skip
    assert organization["id"] == org_id
    assert organization["state"] == "enabled"

    customer = sdk.v1.customers.retrieve(account["provider_id"], params={"expand": ["tax_ids"]})
    assert customer.name == "Acme Ltd"
    assert customer.email == "billing@acme.example"
    assert customer.phone == "+442079460958"
    assert customer.address is not None
    assert customer.address.postal_code == "EC1A 1BB"
    assert customer.address.country == "GB"
    assert customer.metadata is not None
    assert customer.metadata.to_dict() == {
        "plan": "team",
        "seats": "12",
        "org_id": org_id,
        "billing_account_id": account["id"],
    }
    assert customer.tax_ids is not None
    assert [(tax.type, tax.value) for tax in customer.tax_ids.data] == [("gb_vat", "GB123456789")]
    creation = customer_creations(emulator, account["id"])
    assert len(creation) == 1
    assert creation[0].idempotency_key is not None


def test_an_offline_account_is_active_at_once_and_never_reaches_stripe(
    stack: Stack, api: httpx.Client, emulator: EmulatorAdmin
) -> None:
    org_id = new_org(stack)
    response = create(api, org_id, {"body": details(), "offline": True})

    assert response.status_code == 200, response.text
    account = response.json()["billing_account"]
    assert account["state"] == "active"
    assert account["provider"] == ""
    assert account["provider_id"] == ""
    assert customer_creations(emulator, account["id"]) == []


def test_an_offline_account_can_be_registered_later_once(
    stack: Stack, api: httpx.Client, emulator: EmulatorAdmin, sdk: stripe.StripeClient
) -> None:
    org_id = new_org(stack)
    offline = create(api, org_id, {"body": details(), "offline": True}).json()["billing_account"]

    register = f"/v1beta1/organizations/{org_id}/billing/{offline['id']}/register"
    first = api.post(register, json={})
    again = api.post(register, json={})

    assert first.status_code == 200, first.text
    registered = first.json()["billing_account"]
    assert registered["state"] == "active"
    assert registered["provider"] == "stripe"
    assert registered["provider_id"].startswith("cus_")
    assert again.status_code == 200
    assert again.json()["billing_account"]["provider_id"] == registered["provider_id"]
    assert customers_of(sdk, offline["id"]) == [registered["provider_id"]]


def test_registering_an_account_of_another_organization_is_not_found(
    stack: Stack, api: httpx.Client
) -> None:
    org_id = new_org(stack)
    account = create(api, org_id, {"body": details(), "offline": True}).json()["billing_account"]

    response = api.post(
        f"/v1beta1/organizations/{new_org(stack)}/billing/{account['id']}/register", json={}
    )

    assert response.status_code == 404
    assert response.json()["code"] == 5


def test_currency_is_case_insensitive_and_defaults_to_usd(stack: Stack, api: httpx.Client) -> None:
    euro = create(api, new_org(stack), {"body": details(currency="EUR"), "offline": True})
    default = create(
        api, new_org(stack), {"body": {"name": "N", "email": "n@x.example"}, "offline": True}
    )

    assert euro.json()["billing_account"]["currency"] == "eur"
    assert default.json()["billing_account"]["currency"] == "usd"


def test_a_generic_tax_kind_becomes_the_providers_type_for_the_country(
    stack: Stack, api: httpx.Client
) -> None:
    body = details(
        address={"country": "DE"},
        phone="",
        tax_data=[{"type": "vat", "id": "DE123456789"}],
    )
    response = create(api, new_org(stack), {"body": body})

    assert response.status_code == 200, response.text
    assert response.json()["billing_account"]["tax_data"] == [
        {"type": "eu_vat", "id": "DE123456789"}
    ]


# --- validation -----------------------------------------------------------------------------

INVALID_REQUESTS = [
    pytest.param({"body": details(), "extra": 1}, "extra", id="unknown-top-level-field"),
    pytest.param({"body": details(nickname="x")}, "body.nickname", id="unknown-body-field"),
    pytest.param({"offline": True}, "body", id="missing-body"),
    pytest.param({"body": details(name="")}, "body.name", id="empty-name"),
    pytest.param({"body": details(email="not-an-email")}, "body.email", id="email"),
    pytest.param({"body": details(phone="12")}, "body.phone", id="phone"),
    pytest.param({"body": details(currency="dollars")}, "body.currency", id="currency"),
    pytest.param({"body": details(address={"country": "XX"})}, "body.address.country", id="iso"),
    pytest.param({"body": details(metadata={"a": {"b": 1}})}, "body.metadata", id="nested"),
    pytest.param({"body": details(metadata={"org_id": "x"})}, "body.metadata", id="reserved"),
    pytest.param(
        {"body": details(tax_data=[{"type": "frobnicate", "id": "1"}])},
        "body.tax_data[0].type",
        id="unknown-tax-type",
    ),
    pytest.param(
        {"body": details(address={}, phone="", tax_data=[{"type": "vat", "id": "1"}])},
        "body.tax_data[0].type",
        id="generic-tax-type-without-country",
    ),
    pytest.param(
        {"body": details(address={"country": "US"}, tax_data=[{"type": "gst", "id": "1"}])},
        "body.tax_data[0].type",
        id="generic-tax-type-unmappable",
    ),
    pytest.param({"body": details(), "offline": "yes"}, "offline", id="offline-not-boolean"),
]


@pytest.mark.parametrize(("request_body", "field"), INVALID_REQUESTS)
def test_an_invalid_request_is_a_400_naming_the_field(
    stack: Stack, api: httpx.Client, request_body: dict[str, Any], field: str
) -> None:
    org_id = new_org(stack)
    response = create(api, org_id, request_body)

    assert response.status_code == 400, response.text
    assert response.json()["code"] == 3
    assert field in field_violations(response.json()), response.json()
    assert account_count(stack, org_id) == 0


def test_every_offending_field_is_listed(stack: Stack, api: httpx.Client) -> None:
    response = create(
        api, new_org(stack), {"body": details(email="nope", currency="xx", phone="1")}
    )

    assert response.status_code == 400
    assert {"body.email", "body.currency", "body.phone"} <= set(field_violations(response.json()))


def test_an_unknown_top_level_field_is_listed_with_every_other_violation(
    stack: Stack, api: httpx.Client
) -> None:
    response = create(
        api, new_org(stack), {"body": details(email="nope", currency="xx"), "extra": 1}
    )

    assert response.status_code == 400
    assert response.json()["code"] == 3
    assert {"extra", "body.email", "body.currency"} <= set(field_violations(response.json()))


def test_a_request_without_its_account_and_with_unknown_fields_names_them_all(
    stack: Stack, api: httpx.Client
) -> None:
    response = create(api, new_org(stack), {"extra": 1, "offline": "yes"})

    assert response.status_code == 400
    assert field_violations(response.json()) == {
        "extra": "unknown field",
        "body": "required: the billing account",
        "offline": "Input should be a valid boolean",
    }


# --- rules ----------------------------------------------------------------------------------


def test_an_unknown_organization_is_a_404(stack: Stack, api: httpx.Client) -> None:
    response = create(api, "org_does_not_exist", {"body": details()})

    assert response.status_code == 404
    assert response.json()["code"] == 5


def test_a_disabled_organization_is_a_failed_precondition(stack: Stack, api: httpx.Client) -> None:
    response = create(api, new_org(stack, disabled=True), {"body": details()})

    assert response.status_code == 400
    assert response.json()["code"] == 9


def test_a_second_account_for_an_organization_is_a_409(
    stack: Stack, api: httpx.Client, emulator: EmulatorAdmin
) -> None:
    org_id = new_org(stack)
    first = create(api, org_id, {"body": details()})
    second = create(api, org_id, {"body": details(), "offline": True})

    assert first.status_code == 200
    assert second.status_code == 409
    assert second.json()["code"] == 6
    assert account_count(stack, org_id) == 1


def test_the_same_idempotency_key_twice_makes_one_account_and_one_customer(
    stack: Stack, api: httpx.Client, emulator: EmulatorAdmin, sdk: stripe.StripeClient
) -> None:
    org_id = new_org(stack)
    key = {"Idempotency-Key": f"create-{uuid.uuid4()}"}
    first = create(api, org_id, {"body": details()}, headers=key)
    second = create(api, org_id, {"body": details()}, headers=key)

    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    account_id = first.json()["billing_account"]["id"]
    assert account_count(stack, org_id) == 1
    assert len(customer_creations(emulator, account_id)) == 1
    assert customers_of(sdk, account_id) == [first.json()["billing_account"]["provider_id"]]


# --- the provider failing -------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param({"kind": "api_error"}, id="500"),
        pytest.param({"kind": "service_unavailable"}, id="503"),
        pytest.param({"kind": "lock_timeout"}, id="lock-timeout"),
        pytest.param({"kind": "rate_limit", "retry_after": 1}, id="429-with-retry-after"),
        pytest.param({"kind": "drop", "after_execution": True}, id="response-lost"),
    ],
)
def test_transient_provider_failures_are_retried_until_the_account_is_active(
    stack: Stack,
    api: httpx.Client,
    emulator: EmulatorAdmin,
    sdk: stripe.StripeClient,
    fault: dict[str, Any],
) -> None:
    emulator.add_fault(match=f"POST {CUSTOMERS}", count=2, **fault)

    response = create(api, new_org(stack), {"body": details()})

    assert response.status_code == 200, response.text
    account = response.json()["billing_account"]
    assert account["state"] == "active"
    assert customers_of(sdk, account["id"]) == [account["provider_id"]]
    attempts = customer_creations(emulator, account["id"])
    assert len(attempts) >= 2  # a lost response is answered by Stripe's idempotent replay
    assert len({attempt.idempotency_key for attempt in attempts}) == 1


def test_retries_back_off_exponentially(
    stack: Stack, api: httpx.Client, emulator: EmulatorAdmin
) -> None:
    emulator.add_fault("api_error", f"POST {CUSTOMERS}", count=3)

    response = create(api, new_org(stack), {"body": details()})

    assert response.status_code == 200, response.text
    command = api.get(f"/v1beta1/commands/{response.headers['Command-Id']}").json()
    ceilings = [retry["backoff_ceiling_seconds"] for retry in command["retries"]]
    assert ceilings == [0.2, 0.4, 0.8]  # TEST_SETTINGS: base 0.2 s, doubling
    delays = [retry["delay_seconds"] for retry in command["retries"]]
    assert all(0 <= delay <= ceiling for delay, ceiling in zip(delays, ceilings, strict=True))
    sent = [
        attempt.wall_time
        for attempt in customer_creations(emulator, response.json()["billing_account"]["id"])
    ]
    gaps = [later - earlier for earlier, later in itertools.pairwise(sent)]
    # Each retry waited at least the delay drawn for it.
    assert all(gap >= delay - 0.01 for gap, delay in zip(gaps, delays, strict=True))


def test_a_429_is_waited_out_through_the_shared_budget_from_its_retry_after(
    stack: Stack, api: httpx.Client, emulator: EmulatorAdmin
) -> None:
    emulator.add_fault("rate_limit", f"POST {CUSTOMERS}", count=1, retry_after=1)

    response = create(api, new_org(stack), {"body": details()})

    assert response.status_code == 200, response.text
    command = api.get(f"/v1beta1/commands/{response.headers['Command-Id']}").json()
    assert "retries" not in command  # waiting for the rate limit is no failure
    first, second = customer_creations(emulator, response.json()["billing_account"]["id"])
    assert first.status == 429
    assert second.wall_time - first.wall_time >= 1.0 - 0.05


def test_a_tax_id_stripe_rejects_is_a_400_with_stripes_message_and_no_retry(
    stack: Stack, api: httpx.Client, emulator: EmulatorAdmin
) -> None:
    org_id = new_org(stack)
    body = details(tax_data=[{"type": "eu_vat", "id": "DE12"}], address={"country": "DE"})
    body["phone"] = ""

    response = create(api, org_id, {"body": body})

    assert response.status_code == 400, response.text
    error = response.json()
    assert error["code"] == 3
    violations = field_violations(error)
    assert "body.tax_data[0].id" in violations
    assert "Invalid value for eu_vat" in violations["body.tax_data[0].id"]
    command = api.get(f"/v1beta1/commands/{response.headers['Command-Id']}").json()
    assert command["status"] == "rejected"
    assert command["attempts"] == 1
    assert "retries" not in command
    # Nothing was created: the organization may try again with a corrected request.
    assert account_count(stack, org_id) == 0
    assert create(api, org_id, {"body": details()}).status_code == 200


def test_a_registration_that_exhausts_its_budget_stays_pending_until_an_operator_replays_it(
    stack: Stack, api: httpx.Client, emulator: EmulatorAdmin, sdk: stripe.StripeClient
) -> None:
    emulator.add_fault("service_unavailable", f"POST {CUSTOMERS}")
    org_id = new_org(stack)

    response = create(api, org_id, {"body": details()})

    assert response.status_code == 503, response.text
    assert response.json()["code"] == 14
    command_id = response.headers["Command-Id"]
    command = api.get(f"/v1beta1/commands/{command_id}").json()
    assert command["status"] == "failed"
    assert command["attempts"] == 4  # TEST_SETTINGS: 4 attempts
    with stack.sessions() as session:
        account_id, state = session.execute(
            select(BillingAccountRow.id, BillingAccountRow.state).where(
                BillingAccountRow.org_id == org_id
            )
        ).one()
    assert state == "pending"

    emulator.clear_faults()  # Stripe is back
    replay = subprocess.run(
        [
            sys.executable,
            "-m",
            "worker.cli",
            "commands",
            "replay",
            command_id,
            "--reason",
            "Stripe is back",
        ],
        env={**os.environ, **stack.env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert replay.returncode == 0, replay.stderr

    assert stack.finished(command_id).status.value == "succeeded"
    assert account_state(stack, account_id) == "active"
    assert len(customers_of(sdk, account_id)) == 1


def test_a_registration_that_exhausts_its_budget_is_sent_again_by_beat_once_pending_too_long(
    stack: Stack, api: httpx.Client, emulator: EmulatorAdmin, sdk: stripe.StripeClient
) -> None:
    emulator.add_fault("service_unavailable", f"POST {CUSTOMERS}")
    org_id = new_org(stack)
    assert create(api, org_id, {"body": details()}).status_code == 503
    with stack.sessions() as session:
        account_id = session.scalars(
            select(BillingAccountRow.id).where(BillingAccountRow.org_id == org_id)
        ).one()
    assert account_state(stack, account_id) == "pending"
    emulator.clear_faults()  # Stripe is back; nobody replays the command

    beat = stack.start_beat(
        f"beat-redrive-{uuid.uuid4().hex[:6]}",
        extra_env={"BILLING_PENDING_ACCOUNT_REDRIVE_INTERVAL_SECONDS": "0.5"},
    )
    try:
        stack.advance_time(16 * 60)  # past BILLING_PENDING_ACCOUNT_REDRIVE_AFTER_SECONDS
        eventually(lambda: account_state(stack, account_id) == "active", 30, "account active")
    finally:
        if beat.poll() is None:
            os.killpg(beat.pid, signal.SIGTERM)
            beat.wait(15)

    assert stack.finished(f"redrive:{account_id}:1").status.value == "succeeded"
    assert len(customers_of(sdk, account_id)) == 1


def test_a_registration_retried_after_stripes_idempotency_window_finds_the_first_customer(
    stack: Stack, api: httpx.Client, emulator: EmulatorAdmin, sdk: stripe.StripeClient
) -> None:
    # Stripe creates the customer but the answer is lost, and every retry is rate limited
    # (Stripe's limiter answers before its idempotency replay) until the budget runs out.
    emulator.set_rate_limit(0.01)  # one request, then 429s
    emulator.add_fault("drop", f"POST {CUSTOMERS}", after_execution=True, count=1)
    org_id = new_org(stack)
    failed = create(api, org_id, {"body": details()})
    assert failed.status_code == 503, failed.text
    emulator.set_rate_limit(0)
    with stack.sessions() as session:
        account_id = session.scalars(
            select(BillingAccountRow.id).where(BillingAccountRow.org_id == org_id)
        ).one()
    first_customers = customers_of(sdk, account_id)
    assert len(first_customers) == 1

    # A day later Stripe has forgotten the idempotency key; the retry must not make another.
    stack.advance_time(25 * 3600)
    retried = api.post(f"/v1beta1/organizations/{org_id}/billing/{account_id}/register", json={})

    assert retried.status_code == 200, retried.text
    assert retried.json()["billing_account"]["provider_id"] == first_customers[0]
    assert customers_of(sdk, account_id) == first_customers
    eventually(lambda: account_state(stack, account_id) == "active", what="account active")

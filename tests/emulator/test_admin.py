"""The admin API, its typed client, the request log, the CLI and state persistence."""

from __future__ import annotations

import signal

import httpx
import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin, EmulatorAdminError, parse_duration
from tests.emulator.support import EMULATOR_KEY, EmulatorProcess, running_emulator, sdk_client

pytestmark = pytest.mark.emulator_only


def test_the_request_log_records_parsed_parameters_and_outcomes(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    customer = emulator_client.v1.customers.create(
        params={"name": "Logged", "metadata": {"org": "9"}}
    )
    emulator_client.v1.customers.list(params={"email": "x@example.com", "limit": 3})
    with pytest.raises(stripe.InvalidRequestError):
        emulator_client.v1.customers.retrieve("cus_missing")

    create, listing, missing = admin.requests("/v1/customers")

    assert (create.method, create.path, create.status) == ("POST", "/v1/customers", 200)
    assert create.form == {"name": "Logged", "metadata": {"org": "9"}}
    assert create.idempotency_key is not None
    assert create.stripe_version == stripe.api_version
    assert create.emulator_time >= customer.created
    assert create.duration_ms > 0
    assert listing.query == {"email": "x@example.com", "limit": "3"}
    assert listing.params == listing.query
    assert (missing.status, missing.error_type, missing.error_code) == (
        404,
        "invalid_request_error",
        "resource_missing",
    )
    assert missing.fault is None
    assert missing.replayed is False


def test_the_request_log_shows_the_proration_behavior_a_caller_sent(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    customer = emulator_client.v1.customers.create()
    price = emulator_client.v1.prices.create(
        params={"currency": "usd", "unit_amount": 10, "product_data": {"name": "P"},
                "recurring": {"interval": "month"}}
    )  # fmt: skip
    other = emulator_client.v1.prices.create(
        params={"currency": "usd", "unit_amount": 20, "product": str(price.product),
                "recurring": {"interval": "month"}}
    )  # fmt: skip
    subscription = emulator_client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}]}
    )
    emulator_client.v1.subscriptions.update(
        subscription.id,
        params={
            "items": [{"id": subscription["items"].data[0].id, "price": other.id}],
            "proration_behavior": "always_invoice",
        },
    )

    updates = admin.requests(f"/v1/subscriptions/{subscription.id}", method="POST")

    assert [u.params["proration_behavior"] for u in updates] == ["always_invoice"]


def test_the_log_filters_by_method_and_can_be_cleared(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    emulator_client.v1.customers.create()
    emulator_client.v1.customers.list()
    emulator_client.v1.products.list()

    assert [r.method for r in admin.requests(method="get")] == ["GET", "GET"]
    assert len(admin.requests("/v1/products")) == 1
    admin.clear_requests()
    assert admin.requests() == []


def test_reset_forgets_data_faults_keys_log_and_clock(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    created = emulator_client.v1.customers.create(options={"idempotency_key": "before-reset"})
    admin.add_fault("latency", latency_ms=1)
    admin.advance_clock("30d")

    admin.reset()
    again = emulator_client.v1.customers.create(options={"idempotency_key": "before-reset"})

    assert again.id != created.id
    assert admin.faults() == []
    assert [r.path for r in admin.requests()] == ["/v1/customers"]
    assert abs(admin.now() - again.created) <= 2
    with pytest.raises(stripe.InvalidRequestError):
        emulator_client.v1.customers.retrieve(created.id)


def test_a_clock_reset_brings_wall_clock_time_back_and_keeps_the_data(
    emulator_client: stripe.StripeClient, admin: EmulatorAdmin
) -> None:
    admin.advance_clock("30d")
    ahead = emulator_client.v1.customers.create()

    now = admin.reset_clock()

    assert admin.clock()["offset"] == 0
    assert abs(now - (ahead.created - 30 * 86_400)) <= 2
    assert emulator_client.v1.customers.retrieve(ahead.id).id == ahead.id


def test_the_admin_api_is_not_reachable_under_v1_and_needs_no_key(
    emulator: EmulatorProcess,
) -> None:
    under_v1 = httpx.post(
        f"{emulator.url}/v1/_emulator/reset", headers={"Authorization": f"Bearer {EMULATOR_KEY}"}
    )
    health = httpx.get(f"{emulator.url}/_emulator/health")

    assert under_v1.status_code == 404
    assert health.json()["status"] == "ok"
    assert health.json()["api_version"] == stripe.api_version


def test_bad_admin_input_is_a_400_with_a_message(emulator: EmulatorProcess) -> None:
    response = httpx.post(f"{emulator.url}/_emulator/clock/advance", json={"seconds": "soon"})

    assert response.status_code == 400
    assert response.json() == {"error": "`seconds` must be a number"}


def test_removing_an_unknown_fault_is_an_error(admin: EmulatorAdmin) -> None:
    with pytest.raises(EmulatorAdminError) as raised:
        admin.remove_fault("flt_999")

    assert raised.value.status == 404


def test_saving_state_needs_a_state_file(admin: EmulatorAdmin) -> None:
    with pytest.raises(EmulatorAdminError):
        admin.save_state()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("31d", 31 * 86_400), ("1d12h", 129_600), ("90m", 5400), ("45s", 45), ("2w", 1_209_600),
     ("3600", 3600), (1.5, 1.5)],
)  # fmt: skip
def test_durations_are_parsed_for_the_clock_command(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "tomorrow", "5x", "1d 2h"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_the_cli_logs_one_line_when_listening_and_stops_cleanly_on_sigterm(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    log_path = tmp_path_factory.mktemp("cli") / "emulator.log"
    with running_emulator(log_path, "--rate-limit", "0") as emulator:
        sdk_client(emulator.url).v1.customers.create()
        code = emulator.stop(signal.SIGTERM)

    lines = emulator.log().splitlines()
    assert code == 0
    assert lines == [f"stripe-emulator listening on {emulator.url}"]


def test_the_cli_accepts_another_api_key(tmp_path_factory: pytest.TempPathFactory) -> None:
    log_path = tmp_path_factory.mktemp("key") / "emulator.log"
    with running_emulator(log_path, "--api-key", "sk_test_custom") as emulator:
        customer = sdk_client(emulator.url, "sk_test_custom").v1.customers.create()
        with pytest.raises(stripe.AuthenticationError):
            sdk_client(emulator.url, EMULATOR_KEY).v1.customers.list()

    assert customer.id.startswith("cus_")


def test_state_survives_a_restart_through_the_state_file(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    directory = tmp_path_factory.mktemp("state")
    state_file = directory / "stripe.json"
    args = ("--rate-limit", "0", "--state-file", str(state_file))

    with running_emulator(directory / "first.log", *args) as first:
        client = sdk_client(first.url)
        customer = client.v1.customers.create(
            params={
                "name": "Persistent",
                "tax_id_data": [{"type": "eu_vat", "value": "DE123456789"}],
            },
            options={"idempotency_key": "persisted-key"},
        )
        with EmulatorAdmin(first.url) as admin:
            advanced_to = admin.advance_clock("12h")  # keys live 24 h
        first.stop(signal.SIGINT)
    assert state_file.exists()

    with running_emulator(directory / "second.log", *args) as second:
        client = sdk_client(second.url)
        restored = client.v1.customers.retrieve(customer.id, params={"expand": ["tax_ids"]})
        replayed = client.v1.customers.create(
            params={
                "name": "Persistent",
                "tax_id_data": [{"type": "eu_vat", "value": "DE123456789"}],
            },
            options={"idempotency_key": "persisted-key"},
        )
        with EmulatorAdmin(second.url) as admin:
            now = admin.now()

    assert restored.name == "Persistent"
    assert restored.tax_ids is not None
    assert [t.value for t in restored.tax_ids.data] == ["DE123456789"]
    assert replayed.id == customer.id
    assert now >= advanced_to

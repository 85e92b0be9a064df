"""The billing account handlers, on in-memory ports: every decision of creating and
registering an account."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from application.handlers.billing.accounts import create_billing_account, register_billing_account
from domain.billing.account_commands import CreateBillingAccount, RegisterBillingAccount
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccountState
from domain.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    TransientError,
)
from tests.support.fakes.application import FakeApplication
from tests.support.fakes.data import an_organization, stored_account

DETAILS = BillingDetails(name="Acme", email="billing@acme.example")


@pytest.fixture
def app() -> FakeApplication:
    app = FakeApplication()
    app.db.seed(an_organization("org_1"))
    return app


def create(command_id: str = "c1", **fields: Any) -> CreateBillingAccount:
    values: dict[str, Any] = {
        "command_id": command_id,
        "org_id": "org_1",
        "billing_account_id": "ba_1",
        "account": DETAILS,
        **fields,
    }
    return CreateBillingAccount(**values)


def register(account_id: str = "ba_1", org_id: str = "org_1") -> RegisterBillingAccount:
    return RegisterBillingAccount(command_id="r1", org_id=org_id, billing_account_id=account_id)


def unavailable() -> TransientError:
    return TransientError("stripe create customer: 503 error: unavailable")


def refused() -> InvalidArgument:
    return InvalidArgument.for_fields("the billing provider rejected the request", [("tax", "no")])


# --- creating ---------------------------------------------------------------------------------


def test_an_online_account_is_registered_and_returned_active_with_its_organization(
    app: FakeApplication,
) -> None:
    ready = create_billing_account(create(), app)

    [call] = app.provider.calls_of("create_customer")
    assert ready.billing_account["state"] == "active"
    assert ready.billing_account["provider_id"] in app.provider.customers
    assert ready.billing_account["provider"] == "fake"
    assert ready.organization["id"] == "org_1"
    account = stored_account(app)
    assert (account.state, account.provider_id) == (
        BillingAccountState.ACTIVE,
        ready.billing_account["provider_id"],
    )
    assert account.registration_key is None  # done with
    assert call.idempotency_key is not None
    assert call.idempotency_key.startswith("ba_1:create-customer:")


def test_an_offline_account_is_active_at_once_and_never_reaches_the_provider(
    app: FakeApplication,
) -> None:
    ready = create_billing_account(create(offline=True), app)

    assert ready.billing_account["state"] == "active"
    assert ready.billing_account["provider_id"] == ""
    assert app.provider.calls == []
    assert stored_account(app).registration_key is None


def test_the_account_is_pending_with_its_key_stored_before_the_provider_is_called(
    app: FakeApplication,
) -> None:
    app.provider.fail_next("create_customer", unavailable())

    with pytest.raises(TransientError):
        create_billing_account(create(), app)

    [call] = app.provider.calls_of("create_customer")
    account = stored_account(app)
    assert account.state is BillingAccountState.PENDING
    assert account.registration_key == call.idempotency_key
    assert account.registration_started_at == app.clock.now()


def test_a_transient_failure_leaves_the_account_pending_and_the_retry_uses_the_same_key(
    app: FakeApplication,
) -> None:
    app.provider.fail_next("create_customer", unavailable(), times=2)
    for _ in range(2):
        with pytest.raises(TransientError):
            create_billing_account(create(), app)
        assert stored_account(app).state is BillingAccountState.PENDING

    ready = create_billing_account(create(), app)

    assert ready.billing_account["state"] == "active"
    keys = {call.idempotency_key for call in app.provider.calls_of("create_customer")}
    assert len(keys) == 1
    assert len(app.provider.customers) == 1


def test_a_lost_answer_is_replayed_by_the_key_so_the_retry_makes_no_second_customer(
    app: FakeApplication,
) -> None:
    app.provider.fail_next("create_customer", unavailable(), after_execution=True)
    with pytest.raises(TransientError):
        create_billing_account(create(), app)

    ready = create_billing_account(create(), app)

    [customer_id] = app.provider.customers
    assert ready.billing_account["provider_id"] == customer_id
    outcomes = [call.outcome for call in app.provider.calls_of("create_customer")]
    assert outcomes == ["executed", "replayed"]


def test_a_refusal_by_the_provider_removes_the_pending_account_so_a_corrected_request_can_go(
    app: FakeApplication,
) -> None:
    app.provider.fail_next("create_customer", refused())

    with pytest.raises(InvalidArgument):
        create_billing_account(create(), app)

    assert app.db.rows("billing_accounts") == []
    again = create_billing_account(create("c2", billing_account_id="ba_2"), app)
    assert again.billing_account["state"] == "active"


def test_without_a_provider_set_up_the_command_fails_and_the_account_waits_for_a_replay() -> None:
    app = FakeApplication(with_provider=False)
    app.db.seed(an_organization("org_1"))

    with pytest.raises(FailedPrecondition):
        create_billing_account(create(), app)

    account = stored_account(app)
    assert account.state is BillingAccountState.PENDING
    assert account.registration_key is not None


def test_the_same_command_delivered_again_returns_the_same_account_and_one_customer(
    app: FakeApplication,
) -> None:
    first = create_billing_account(create(), app)
    second = create_billing_account(create(), app)

    assert first == second
    assert len(app.provider.calls_of("create_customer")) == 1


def test_an_unknown_organization_is_not_found(app: FakeApplication) -> None:
    with pytest.raises(NotFound):
        create_billing_account(create(org_id="org_missing"), app)

    assert app.db.rows("billing_accounts") == []


def test_a_disabled_organization_is_a_failed_precondition(app: FakeApplication) -> None:
    app.db.seed(an_organization("org_off", enabled=False))

    with pytest.raises(FailedPrecondition) as raised:
        create_billing_account(create(org_id="org_off"), app)

    assert raised.value.details[0]["reason"] == "ORGANIZATION_DISABLED"


def test_a_second_account_for_an_organization_already_exists_naming_the_first(
    app: FakeApplication,
) -> None:
    create_billing_account(create(offline=True), app)

    with pytest.raises(AlreadyExists) as raised:
        create_billing_account(create("c2", billing_account_id="ba_2"), app)

    assert raised.value.details[1]["reason"] == "BILLING_ACCOUNT_EXISTS"
    assert raised.value.details[1]["metadata"]["billing_account_id"] == "ba_1"
    assert len(app.db.rows("billing_accounts")) == 1


def test_an_account_id_taken_by_another_organization_already_exists(
    app: FakeApplication,
) -> None:
    create_billing_account(create(offline=True), app)
    app.db.seed(an_organization("org_2"))

    with pytest.raises(AlreadyExists):
        create_billing_account(create("c2", org_id="org_2"), app)

    assert stored_account(app).org_id == "org_1"


def test_an_account_created_concurrently_for_the_organization_makes_the_command_retry(
    app: FakeApplication,
) -> None:
    def racing_command() -> None:
        create_billing_account(create("c-racing", billing_account_id="ba_racing"), app)

    app.db.before_next_commit(racing_command)

    with pytest.raises(TransientError, match="concurrently"):
        create_billing_account(create(offline=True), app)

    [winner] = app.db.rows("billing_accounts")
    assert winner.id == "ba_racing"
    with pytest.raises(AlreadyExists):  # the retry sees which one won
        create_billing_account(create(offline=True), app)


# --- registering ------------------------------------------------------------------------------


def test_an_offline_account_is_registered_later_once(app: FakeApplication) -> None:
    create_billing_account(create(offline=True), app)

    first = register_billing_account(register(), app)
    second = register_billing_account(register(), app)

    assert first.billing_account["provider_id"] in app.provider.customers
    assert second == first
    assert len(app.provider.calls) == 1
    assert stored_account(app).state is BillingAccountState.ACTIVE


def test_registering_an_account_of_another_organization_is_not_found(
    app: FakeApplication,
) -> None:
    create_billing_account(create(offline=True), app)
    app.db.seed(an_organization("org_2"))

    with pytest.raises(NotFound):
        register_billing_account(register(org_id="org_2"), app)

    assert app.provider.calls == []


def test_a_refused_registration_of_an_offline_account_keeps_it_and_drops_its_key(
    app: FakeApplication,
) -> None:
    create_billing_account(create(offline=True), app)
    app.provider.fail_next("create_customer", refused())

    with pytest.raises(InvalidArgument):
        register_billing_account(register(), app)

    account = stored_account(app)
    assert (account.state, account.provider_id) == (BillingAccountState.ACTIVE, None)
    assert account.registration_key is None  # a later registration gets a new key


def test_a_disabled_account_is_not_registered(app: FakeApplication) -> None:
    create_billing_account(create(offline=True), app)
    account = stored_account(app)
    account.state = BillingAccountState.DISABLED
    app.db.seed(account)

    with pytest.raises(FailedPrecondition) as raised:
        register_billing_account(register(), app)

    assert raised.value.details[0]["reason"] == "BILLING_ACCOUNT_DISABLED"
    assert app.provider.calls == []


def test_a_registration_retried_after_the_key_window_finds_the_first_customer(
    app: FakeApplication,
) -> None:
    app.provider.fail_next("create_customer", unavailable(), after_execution=True)
    with pytest.raises(TransientError):
        create_billing_account(create(), app)
    [first_customer] = app.provider.customers

    app.clock.advance(timedelta(hours=25))  # the provider forgot the key
    ready = register_billing_account(register(), app)

    assert ready.billing_account["provider_id"] == first_customer
    assert list(app.provider.customers) == [first_customer]
    assert len(app.provider.calls_of("find_customer")) == 1
    assert len(app.provider.calls_of("create_customer")) == 1


def test_a_registration_within_the_key_window_does_not_search(app: FakeApplication) -> None:
    app.provider.fail_next("create_customer", unavailable())
    with pytest.raises(TransientError):
        create_billing_account(create(), app)

    app.clock.advance(timedelta(hours=22))
    register_billing_account(register(), app)

    assert app.provider.calls_of("find_customer") == []
    assert len(app.provider.customers) == 1

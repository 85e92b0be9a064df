from __future__ import annotations

import typing
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pytest
from pydantic import ValidationError
from stripe.params import _customer_create_params as stripe_params  # noqa: TID251

from domain.billing.account_commands import CreateBillingAccount
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount, BillingAccountState
from domain.billing.organizations import Organization, OrganizationState
from domain.billing.tax_ids import STRIPE_TAX_ID_TYPES, UnmappableTaxType, resolve_tax_type
from tests.support.errors import validation_messages

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ORG = Organization(
    id="org_1", name="acme", title="Acme", state=OrganizationState.ENABLED,
    created_at=T0, updated_at=T0,
)  # fmt: skip


def details(**fields: Any) -> BillingDetails:
    return BillingDetails.model_validate({"name": "Acme", "email": "a@acme.example", **fields})


# --- tax types ------------------------------------------------------------------------------


def test_our_tax_id_types_are_exactly_the_ones_the_stripe_sdk_accepts() -> None:
    hint = typing.get_type_hints(stripe_params.CustomerCreateParamsTaxIdDatum)["type"]
    literal = next(arg for arg in typing.get_args(hint) if typing.get_origin(arg) is Literal)
    assert set(STRIPE_TAX_ID_TYPES) == set(typing.get_args(literal))


@pytest.mark.parametrize(
    ("kind", "country", "expected"),
    [
        ("eu_vat", None, "eu_vat"),
        ("uk_vat", None, "gb_vat"),
        ("vat", "DE", "eu_vat"),
        ("vat", "GB", "gb_vat"),
        ("vat", "CH", "ch_vat"),
        ("vat", "NO", "no_vat"),
        ("vat", "AE", "ae_trn"),
        ("gst", "IN", "in_gst"),
        ("gst", "AU", "au_abn"),
        ("gst", "CA", "ca_gst_hst"),
        ("gst", "NZ", "nz_gst"),
        ("sales_tax", "US", "us_ein"),
    ],
)
def test_a_tax_kind_resolves_to_stripes_type(kind: str, country: str | None, expected: str) -> None:
    assert resolve_tax_type(kind, country) == expected


def test_a_generic_tax_kind_without_a_country_cannot_be_resolved() -> None:
    with pytest.raises(UnmappableTaxType, match=r"address\.country"):
        resolve_tax_type("vat", None)


def test_a_generic_tax_kind_with_no_stripe_type_in_the_country_cannot_be_resolved() -> None:
    with pytest.raises(UnmappableTaxType, match="'gst' in country 'US'"):
        resolve_tax_type("gst", "US")


def test_an_unknown_tax_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown tax type"):
        resolve_tax_type("frobnicate", "US")


# --- details --------------------------------------------------------------------------------


def test_details_are_normalised() -> None:
    account = details(
        email="Billing@ACME.example",
        phone="020 7946 0958",
        address={"country": "gb", "city": "  London "},
        currency="GBP",
        tax_data=[{"type": "UK_VAT", "id": " GB123456789 "}],
    )
    assert account.email == "Billing@acme.example"
    assert account.phone == "+442079460958"  # national number read in the address country
    assert account.address.country == "GB"
    assert account.address.city == "London"
    assert account.currency == "gbp"
    assert [(entry.type, entry.id) for entry in account.resolved_tax_data()] == [
        ("gb_vat", "GB123456789")
    ]


@pytest.mark.parametrize(
    ("fields", "location"),
    [
        ({"name": ""}, ("name",)),
        ({"email": "nope"}, ("email",)),
        ({"phone": "+1 555"}, ("phone",)),
        ({"currency": "usdollar"}, ("currency",)),
        ({"currency": "xyz"}, ("currency",)),
        ({"address": {"country": "Germany"}}, ("address", "country")),
        ({"address": {"zip": "1"}}, ("address", "zip")),
        ({"metadata": {"nested": {"a": 1}}}, ("metadata",)),
        ({"metadata": {"list": [1]}}, ("metadata",)),
        ({"metadata": {"none": None}}, ("metadata",)),
        ({"metadata": {"k" * 41: "v"}}, ("metadata",)),
        ({"metadata": {"a[b]": "v"}}, ("metadata",)),
        ({"metadata": {"long": "v" * 501}}, ("metadata",)),
        ({"metadata": {f"k{i}": i for i in range(49)}}, ("metadata",)),
        ({"metadata": {"billing_account_id": "x"}}, ("metadata",)),
        ({"tax_data": [{"type": "vat", "id": ""}]}, ("tax_data", 0, "id")),
        ({"tax_data": [{"type": "vat", "id": "1"}]}, ("tax_data", 0, "type")),
        (
            {"tax_data": [{"type": "us_ein", "id": "1"}, {"type": "us_ein", "id": "1"}]},
            ("tax_data", 1, "id"),
        ),
        ({"tax_data": [{"type": "us_ein", "id": str(i)} for i in range(26)]}, ("tax_data",)),
    ],
)
def test_invalid_details_name_the_offending_field(
    fields: dict[str, Any], location: tuple[Any, ...]
) -> None:
    with pytest.raises(ValidationError) as error:
        details(**fields)
    assert location in validation_messages(error)


def test_metadata_takes_flat_strings_numbers_and_booleans() -> None:
    account = details(metadata={"plan": "team", "seats": 12, "ratio": 1.5, "vip": True})
    assert account.metadata == {"plan": "team", "seats": 12, "ratio": 1.5, "vip": True}


# --- the command ----------------------------------------------------------------------------


def command(**fields: Any) -> CreateBillingAccount:
    return CreateBillingAccount.model_validate(
        {"command_id": "cmd-1", "org_id": "org_1", "account": details().model_dump(), **fields}
    )


def test_the_account_id_is_derived_from_the_command_id_so_redeliveries_meet_the_same_row() -> None:
    assert command().billing_account_id == command().billing_account_id
    assert command().billing_account_id.startswith("ba_")
    other = CreateBillingAccount.model_validate(
        {"command_id": "cmd-2", "org_id": "org_1", "account": details().model_dump()}
    )
    assert other.billing_account_id != command().billing_account_id


def test_a_publisher_may_choose_the_account_id() -> None:
    assert command(billing_account_id="ba_mine").billing_account_id == "ba_mine"


def test_offline_must_be_a_real_boolean() -> None:
    with pytest.raises(ValidationError):
        command(offline="true")


# --- the account ----------------------------------------------------------------------------


def open_account(*, offline: bool, currency: str | None = None) -> BillingAccount:
    return BillingAccount.open(
        "ba_1",
        ORG,
        details(currency=currency, metadata={"seats": 3, "vip": True}),
        offline=offline,
        default_currency="usd",
        now=T0,
    )


def test_an_offline_account_is_active_at_once_with_no_provider() -> None:
    account = open_account(offline=True)
    assert account.state is BillingAccountState.ACTIVE
    assert account.registration_key is None
    view = account.to_view()
    assert (view["provider"], view["provider_id"]) == ("", "")


def test_an_online_account_is_pending_with_its_idempotency_key_already_chosen() -> None:
    account = open_account(offline=False)
    assert account.state is BillingAccountState.PENDING
    key = account.registration_key
    assert key is not None
    assert key.startswith("ba_1:")
    assert account.begin_registration(T0 + timedelta(hours=1)) == key  # retries reuse it
    assert account.registration_started_at == T0


def test_the_default_currency_applies_when_none_is_given() -> None:
    assert open_account(offline=True).currency == "usd"
    assert open_account(offline=True, currency="eur").currency == "eur"


def test_registration_activates_a_pending_account_and_records_the_provider() -> None:
    account = open_account(offline=False)
    account.registered("stripe", "cus_1", T0 + timedelta(seconds=1))
    assert account.state is BillingAccountState.ACTIVE
    assert (account.provider, account.provider_id) == ("stripe", "cus_1")
    assert account.registration_key is None


def test_a_registration_outlives_the_providers_idempotency_window() -> None:
    account = open_account(offline=False)
    window = timedelta(hours=23)
    assert not account.registration_outlived(window, T0 + timedelta(hours=22))
    assert account.registration_outlived(window, T0 + timedelta(hours=23))


def test_an_abandoned_registration_gets_a_new_key_next_time() -> None:
    account = open_account(offline=False)
    first = account.registration_key
    account.abandon_registration(T0)
    assert account.begin_registration(T0) != first


def test_the_provider_gets_string_metadata_with_our_ids() -> None:
    customer = open_account(offline=False).provider_customer()
    assert customer.metadata == {
        "seats": "3",
        "vip": "true",
        "org_id": "org_1",
        "billing_account_id": "ba_1",
    }

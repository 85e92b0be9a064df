"""Customers and tax IDs: behaviour shared by the emulator and real Stripe test mode."""

from __future__ import annotations

import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.support import StripeTarget, unique


def test_a_created_customer_round_trips_with_its_fields(stripe_target: StripeTarget) -> None:
    email = f"{unique('jenny')}@example.com"
    created = stripe_target.customer(
        email=email,
        name="Jenny Rosen",
        phone="+14155550100",
        description="founder",
        metadata={"org_id": "42"},
        address={"line1": "1 Main St", "city": "Berlin", "postal_code": "10115", "country": "DE"},
    )

    fetched = stripe_target.client.v1.customers.retrieve(created.id)

    assert created.id.startswith("cus_")
    assert fetched.id == created.id
    assert fetched.livemode is False
    assert (fetched.email, fetched.name, fetched.phone) == (email, "Jenny Rosen", "+14155550100")
    assert fetched.description == "founder"
    assert fetched.to_dict()["metadata"] == {"org_id": "42"}
    assert fetched.address is not None
    assert fetched.address.city == "Berlin"
    assert fetched.address.line2 is None
    assert isinstance(fetched.created, int)


def test_updating_a_customer_merges_metadata_and_empty_values_remove_keys(
    stripe_target: StripeTarget,
) -> None:
    customer = stripe_target.customer(metadata={"keep": "1", "drop": "2"})

    updated = stripe_target.client.v1.customers.update(
        customer.id, params={"name": "New Name", "metadata": {"drop": "", "add": "3"}}
    )

    assert updated.name == "New Name"
    assert updated.to_dict()["metadata"] == {"keep": "1", "add": "3"}


def test_an_empty_address_unsets_it(stripe_target: StripeTarget) -> None:
    customer = stripe_target.customer(address={"city": "Paris"})

    updated = stripe_target.client.v1.customers.update(customer.id, params={"address": ""})

    assert updated.address is None


def test_a_deleted_customer_retrieves_as_a_deleted_stub_and_cannot_be_updated(
    stripe_target: StripeTarget,
) -> None:
    customer = stripe_target.customer(name="Gone")

    deleted = stripe_target.client.v1.customers.delete(customer.id)
    retrieved = stripe_target.client.v1.customers.retrieve(customer.id)

    assert deleted.deleted is True
    assert deleted.id == customer.id
    assert retrieved.to_dict() == {"id": customer.id, "object": "customer", "deleted": True}
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.client.v1.customers.update(customer.id, params={"name": "x"})
    assert raised.value.http_status == 404
    assert raised.value.code == "resource_missing"


def test_a_missing_customer_is_a_404_resource_missing_on_param_id(
    stripe_target: StripeTarget,
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.client.v1.customers.retrieve("cus_doesnotexist000")

    assert raised.value.http_status == 404
    assert raised.value.code == "resource_missing"
    assert raised.value.param == "id"


def test_listing_customers_filters_by_exact_email(stripe_target: StripeTarget) -> None:
    email = f"{unique('list')}@example.com"
    first = stripe_target.customer(email=email)
    second = stripe_target.customer(email=email)
    stripe_target.customer(email=f"{unique('other')}@example.com")

    listed = stripe_target.client.v1.customers.list(params={"email": email})

    assert listed["object"] == "list"
    assert listed["url"] == "/v1/customers"
    assert [customer.id for customer in listed.data] == [second.id, first.id]  # newest first
    assert listed.has_more is False


def test_listing_customers_pages_with_limit_and_starting_after(
    stripe_target: StripeTarget,
) -> None:
    email = f"{unique('page')}@example.com"
    ids = [stripe_target.customer(email=email).id for _ in range(3)]

    first_page = stripe_target.client.v1.customers.list(params={"email": email, "limit": 2})
    second_page = stripe_target.client.v1.customers.list(
        params={"email": email, "limit": 2, "starting_after": first_page.data[-1].id}
    )
    back = stripe_target.client.v1.customers.list(
        params={"email": email, "limit": 2, "ending_before": second_page.data[0].id}
    )

    assert [c.id for c in first_page.data] == [ids[2], ids[1]]
    assert first_page.has_more is True
    assert [c.id for c in second_page.data] == [ids[0]]
    assert second_page.has_more is False
    assert [c.id for c in back.data] == [ids[2], ids[1]]


def test_searching_customers_by_metadata_and_email_finds_the_match(
    stripe_target: StripeTarget,
) -> None:
    tag = unique("org")
    email = f"{unique('search')}@example.com"
    wanted = stripe_target.customer(email=email, name="Search Me", metadata={"org_id": tag})
    stripe_target.customer(email=f"{unique('search')}@example.com", metadata={"org_id": tag})

    result = stripe_target.eventually(
        lambda: stripe_target.client.v1.customers.search(
            params={"query": f"metadata['org_id']:'{tag}' AND email:'{email}'"}
        ),
        lambda found: len(found.data) == 1,
    )

    assert result["object"] == "search_result"
    assert [customer.id for customer in result.data] == [wanted.id]
    assert result["url"] == "/v1/customers/search"


def test_an_unparseable_search_query_is_a_400_on_param_query(
    stripe_target: StripeTarget,
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.client.v1.customers.search(params={"query": "email:'a@b.co' AND AND"})

    assert raised.value.http_status == 400
    assert raised.value.param == "query"


def test_tax_id_data_on_create_attaches_tax_ids_to_the_customer(
    stripe_target: StripeTarget,
) -> None:
    customer = stripe_target.customer(
        name="VAT GmbH",
        tax_id_data=[
            {"type": "eu_vat", "value": "DE123456789"},
            {"type": "us_ein", "value": "12-3456789"},
        ],
        expand=["tax_ids"],
    )

    tax_ids = stripe_target.client.v1.customers.tax_ids.list(customer.id)

    assert sorted((t.type, t.value) for t in tax_ids.data) == [
        ("eu_vat", "DE123456789"),
        ("us_ein", "12-3456789"),
    ]
    assert all(t.id.startswith("txi_") and t.customer == customer.id for t in tax_ids.data)
    assert customer.tax_ids is not None
    assert {t.id for t in customer.tax_ids.data} == {t.id for t in tax_ids.data}
    german = next(t for t in tax_ids.data if t.type == "eu_vat")
    assert german.country == "DE"


def test_tax_ids_can_be_added_retrieved_and_deleted(stripe_target: StripeTarget) -> None:
    customer = stripe_target.customer(name="Tax Owner")
    tax_ids = stripe_target.client.v1.customers.tax_ids

    created = tax_ids.create(customer.id, params={"type": "gb_vat", "value": "GB123456789"})
    retrieved = tax_ids.retrieve(customer.id, created.id)
    deleted = tax_ids.delete(customer.id, created.id)

    assert retrieved.value == "GB123456789"
    assert retrieved.country == "GB"
    assert deleted.deleted is True
    assert tax_ids.list(customer.id).data == []


@pytest.mark.parametrize(
    ("tax_type", "value"),
    [
        ("eu_vat", "DE12345678"),  # one digit short
        ("gb_vat", "GB12345"),
        ("us_ein", "12-345678"),
        ("in_gst", "22AAAAA0000A1Z"),
        ("au_abn", "1234567891"),
        ("ca_bn", "12345678"),
    ],
)
def test_an_invalid_tax_id_value_is_rejected_with_tax_id_invalid(
    stripe_target: StripeTarget, tax_type: str, value: str
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.customer(name="Bad VAT", tax_id_data=[{"type": tax_type, "value": value}])

    assert raised.value.http_status == 400
    assert raised.value.code == "tax_id_invalid"
    assert raised.value.param == "tax_id_data[0][value]"


@pytest.mark.parametrize(
    ("tax_type", "value"),
    [
        ("eu_vat", "DE123456789"),
        ("eu_vat", "ATU12345678"),
        ("gb_vat", "GB123456789"),
        ("us_ein", "12-3456789"),
        ("in_gst", "22AAAAA0000A1Z5"),
        ("in_gst", "12ABCDE3456FGZH"),
        ("au_abn", "12345678912"),
        ("ca_bn", "123456789"),
    ],
)
def test_well_formed_tax_ids_of_the_common_types_are_accepted(
    stripe_target: StripeTarget, tax_type: str, value: str
) -> None:
    customer = stripe_target.customer(tax_id_data=[{"type": tax_type, "value": value}])

    listed = stripe_target.client.v1.customers.tax_ids.list(customer.id)

    assert [(t.type, t.value) for t in listed.data] == [(tax_type, value)]


def test_an_unknown_tax_id_type_is_rejected_on_its_param(stripe_target: StripeTarget) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.customer(tax_id_data=[{"type": "xx_vat", "value": "123"}])

    assert raised.value.http_status == 400
    assert raised.value.param == "tax_id_data[0][type]"


def test_an_unknown_parameter_is_rejected_and_named(stripe_target: StripeTarget) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.customer(name="x", nickname="not a customer field")

    assert raised.value.http_status == 400
    assert raised.value.code == "parameter_unknown"
    assert raised.value.param == "nickname"


def test_an_unknown_nested_parameter_is_rejected_with_its_bracket_name(
    stripe_target: StripeTarget,
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        stripe_target.customer(address={"city": "Rome", "planet": "Earth"})

    assert raised.value.code == "parameter_unknown"
    assert raised.value.param == "address[planet]"


def test_the_sdks_auto_pagination_walks_every_page(stripe_target: StripeTarget) -> None:
    email = f"{unique('auto')}@example.com"
    ids = {stripe_target.customer(email=email).id for _ in range(5)}

    walked = stripe_target.client.v1.customers.list(params={"email": email, "limit": 2})

    assert {customer.id for customer in walked.auto_paging_iter()} == ids

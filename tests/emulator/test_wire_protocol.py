"""Stripe's wire protocol as the emulator speaks it, checked at the HTTP level."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator

import httpx
import pytest
import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from tests.emulator.support import EMULATOR_KEY, EmulatorProcess, sdk_client

pytestmark = pytest.mark.emulator_only

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def http(emulator: EmulatorProcess) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=emulator.url, headers={"Authorization": f"Bearer {EMULATOR_KEY}"}
    ) as client:
        yield client


def _error(response: httpx.Response) -> dict[str, object]:
    error: dict[str, object] = response.json()["error"]
    return error


def test_a_missing_api_key_is_a_401_telling_how_to_authenticate(
    emulator: EmulatorProcess,
) -> None:
    response = httpx.get(f"{emulator.url}/v1/customers")

    assert response.status_code == 401
    assert _error(response)["type"] == "invalid_request_error"
    assert "You did not provide an API key" in str(_error(response)["message"])


def test_a_wrong_api_key_is_a_401_naming_the_masked_key(emulator: EmulatorProcess) -> None:
    response = httpx.get(
        f"{emulator.url}/v1/customers", headers={"Authorization": "Bearer sk_test_wrongkey1234"}
    )

    assert response.status_code == 401
    assert _error(response)["message"] == "Invalid API Key provided: sk_test_********1234"


def test_the_sdk_raises_authentication_error_for_a_wrong_key(emulator: EmulatorProcess) -> None:
    with pytest.raises(stripe.AuthenticationError) as raised:
        sdk_client(emulator.url, "sk_test_wrong").v1.customers.list()

    assert raised.value.http_status == 401


def test_basic_auth_with_the_key_as_user_name_is_accepted(emulator: EmulatorProcess) -> None:
    token = base64.b64encode(f"{EMULATOR_KEY}:".encode()).decode()

    response = httpx.get(
        f"{emulator.url}/v1/customers", headers={"Authorization": f"Basic {token}"}
    )

    assert response.status_code == 200


def test_responses_carry_a_request_id_and_the_api_version(http: httpx.Client) -> None:
    default = http.get("/v1/customers")
    pinned = http.get("/v1/customers", headers={"Stripe-Version": "2024-06-20"})
    beta = http.get("/v1/customers", headers={"Stripe-Version": "2025-09-30.preview; x_beta=v2"})

    assert re.fullmatch(r"req_[A-Za-z0-9]{14}", default.headers["request-id"])
    assert default.headers["stripe-version"] == stripe.api_version
    assert pinned.headers["stripe-version"] == "2024-06-20"
    assert beta.status_code == 200
    assert default.headers["content-type"] == "application/json"


def test_a_malformed_stripe_version_is_rejected(http: httpx.Client) -> None:
    response = http.get("/v1/customers", headers={"Stripe-Version": "yesterday"})

    assert response.status_code == 400
    assert "Invalid Stripe API version" in str(_error(response)["message"])


def test_an_unknown_url_is_a_404_unrecognized_request_url(http: httpx.Client) -> None:
    response = http.post("/v1/invoices", content="", headers=FORM)

    assert response.status_code == 404
    assert _error(response)["message"] == (
        "Unrecognized request URL (POST: /v1/invoices). Please see https://stripe.com/docs or we "
        "can help at https://support.stripe.com/."
    )


def test_a_json_body_is_refused_as_stripe_v1_does(http: httpx.Client) -> None:
    response = http.post("/v1/customers", json={"name": "json"})

    assert response.status_code == 400
    assert "unsupported Content-Type application/json" in str(_error(response)["message"])


def test_bracket_notation_builds_nested_objects_and_arrays(http: httpx.Client) -> None:
    product = http.post("/v1/products", content="name=Nested", headers=FORM).json()
    price = http.post(
        "/v1/prices",
        content=f"product={product['id']}&currency=usd&unit_amount=700&recurring[interval]=week"
        "&recurring[interval_count]=2&metadata[a]=1&metadata[0]=zero",
        headers=FORM,
    ).json()
    customer = http.post(
        "/v1/customers",
        content="name=A&address[city]=Oslo&tax_id_data[0][type]=no_vat"
        "&tax_id_data[0][value]=123456789MVA&expand[]=tax_ids&preferred_locales[]=nb"
        "&preferred_locales[]=en",
        headers=FORM,
    ).json()
    subscription = http.post(
        "/v1/subscriptions",
        content=f"customer={customer['id']}&items[0][price]={price['id']}&items[0][quantity]=4"
        "&expand[0]=items.data.price.product",
        headers=FORM,
    ).json()

    assert price["recurring"]["interval"] == "week"
    assert price["recurring"]["interval_count"] == 2
    assert price["metadata"] == {"a": "1", "0": "zero"}  # metadata keys stay keys, even "0"
    assert customer["address"]["city"] == "Oslo"
    assert customer["preferred_locales"] == ["nb", "en"]
    assert customer["tax_ids"]["data"][0]["value"] == "123456789MVA"
    assert subscription["items"]["data"][0]["quantity"] == 4
    assert subscription["items"]["data"][0]["price"]["product"]["name"] == "Nested"


def test_list_filters_and_expand_work_in_the_query_string(http: httpx.Client) -> None:
    product = http.post("/v1/products", content="name=Query", headers=FORM).json()
    for key in ("q1", "q2", "q3"):
        http.post(
            "/v1/prices",
            content=f"product={product['id']}&currency=usd&unit_amount=1&lookup_key={key}",
            headers=FORM,
        )

    listed = http.get(
        "/v1/prices?lookup_keys[]=q1&lookup_keys[]=q3&expand[]=data.product&limit=5"
    ).json()

    assert sorted(price["lookup_key"] for price in listed["data"]) == ["q1", "q3"]
    assert all(price["product"]["id"] == product["id"] for price in listed["data"])


def test_array_indices_must_be_sequential_from_zero(http: httpx.Client) -> None:
    response = http.post(
        "/v1/customers",
        content="tax_id_data[1][type]=us_ein&tax_id_data[1][value]=12-3456789",
        headers=FORM,
    )

    assert response.status_code == 400
    assert _error(response)["param"] == "tax_id_data"
    assert "sequential starting from 0" in str(_error(response)["message"])


def test_an_empty_string_for_a_field_that_cannot_be_unset_is_parameter_invalid_empty(
    http: httpx.Client,
) -> None:
    response = http.post("/v1/products", content="name=", headers=FORM)

    assert response.status_code == 400
    assert _error(response)["code"] == "parameter_invalid_empty"
    assert _error(response)["param"] == "name"


def test_an_invalid_boolean_is_rejected_on_its_param(http: httpx.Client) -> None:
    response = http.post("/v1/products", content="name=P&active=yes", headers=FORM)

    assert response.status_code == 400
    assert _error(response)["param"] == "active"
    assert _error(response)["message"] == "Invalid boolean: yes"


def test_a_bad_enum_value_lists_the_allowed_values(emulator_client: stripe.StripeClient) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        emulator_client.v1.customers.create(params={"tax_exempt": "sometimes"})

    assert raised.value.param == "tax_exempt"
    assert raised.value.code is None  # Stripe sends no code for a bad enum value
    assert "must be one of exempt, none, or reverse" in str(raised.value.user_message)


def test_a_limit_above_100_is_rejected(http: httpx.Client) -> None:
    response = http.get("/v1/customers?limit=101")

    assert response.status_code == 400
    assert _error(response)["param"] == "limit"


def test_an_unknown_query_parameter_on_a_list_is_rejected(http: httpx.Client) -> None:
    response = http.get("/v1/customers?emial=a@b.co")

    assert response.status_code == 400
    assert _error(response)["code"] == "parameter_unknown"
    assert _error(response)["param"] == "emial"


def test_a_starting_after_cursor_that_does_not_exist_is_a_404(http: httpx.Client) -> None:
    response = http.get("/v1/customers?starting_after=cus_nope")

    assert response.status_code == 404
    assert _error(response)["param"] == "starting_after"


def test_search_pages_through_results_with_next_page(
    emulator_client: stripe.StripeClient,
) -> None:
    created = [
        emulator_client.v1.customers.create(params={"name": "Paged", "metadata": {"n": str(n)}})
        for n in range(3)
    ]

    first = emulator_client.v1.customers.search(params={"query": "name:'paged'", "limit": 2})
    assert first.next_page is not None
    second = emulator_client.v1.customers.search(
        params={"query": "name:'paged'", "limit": 2, "page": first.next_page}
    )

    assert first.has_more is True
    assert second.has_more is False
    assert not second.next_page
    assert {c.id for c in first.data} | {c.id for c in second.data} == {c.id for c in created}


def test_search_supports_substring_negation_or_and_numeric_comparisons(
    emulator_client: stripe.StripeClient,
) -> None:
    customers = emulator_client.v1.customers
    alice = customers.create(params={"email": "alice@acme.test", "name": "Alice"})
    bob = customers.create(params={"email": "bob@other.test", "name": "Bob"})

    def ids(query: str) -> set[str]:
        return {c.id for c in customers.search(params={"query": query}).data}

    assert ids("email~'acme'") == {alice.id}
    assert ids("-name:'alice' AND email~'test'") == {bob.id}
    assert ids("name:'alice' OR name:'bob'") == {alice.id, bob.id}
    assert ids(f"created>={alice.created}") == {alice.id, bob.id}
    assert ids('metadata["missing"]:"x"') == set()


@pytest.mark.parametrize(
    "query",
    [
        "name:'a' AND email:'b' OR phone:'c'",  # mixing AND and OR
        "nickname:'x'",  # not a customer search field
        "email~'ab'",  # substring shorter than 3
        "email:",
    ],
)
def test_invalid_search_queries_are_rejected_on_param_query(
    emulator_client: stripe.StripeClient, query: str
) -> None:
    with pytest.raises(stripe.InvalidRequestError) as raised:
        emulator_client.v1.customers.search(params={"query": query})

    assert raised.value.param == "query"


def test_expand_total_count_adds_the_count_to_a_list(http: httpx.Client) -> None:
    for _ in range(3):
        http.post("/v1/customers", content="name=Counted", headers=FORM)

    listed = http.get("/v1/customers?limit=1&expand[]=total_count").json()
    plain = http.get("/v1/customers?limit=1").json()

    assert listed["total_count"] == 3
    assert "total_count" not in plain


def test_expanding_what_the_emulator_does_not_serve_is_refused_rather_than_ignored(
    emulator_client: stripe.StripeClient,
) -> None:
    customer = emulator_client.v1.customers.create()
    price = emulator_client.v1.prices.create(
        params={"currency": "usd", "unit_amount": 1, "product_data": {"name": "P"},
                "recurring": {"interval": "month"}}
    )  # fmt: skip
    subscription = emulator_client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}]}
    )

    with pytest.raises(stripe.InvalidRequestError) as raised:
        emulator_client.v1.subscriptions.retrieve(
            subscription.id, params={"expand": ["default_tax_rates"]}
        )

    assert raised.value.param == "expand"
    assert "cannot be expanded (default_tax_rates)" in str(raised.value.user_message)


def test_expanding_a_field_on_a_list_needs_the_data_prefix(http: httpx.Client) -> None:
    response = http.get("/v1/prices?expand[]=product")

    assert response.status_code == 400
    assert "try expanding 'data.product'" in str(_error(response)["message"])


def test_expanding_a_non_expandable_field_is_rejected(http: httpx.Client) -> None:
    customer = http.post("/v1/customers", content="name=E", headers=FORM).json()

    response = http.get(f"/v1/customers/{customer['id']}?expand[]=email")

    assert response.status_code == 400
    assert _error(response)["message"] == "This property cannot be expanded (email)."


def test_the_idempotency_key_is_echoed_on_posts(http: httpx.Client) -> None:
    response = http.post(
        "/v1/customers", content="name=K", headers={**FORM, "Idempotency-Key": "echo-me"}
    )

    assert response.headers["idempotency-key"] == "echo-me"
    assert response.headers["original-request"] == response.headers["request-id"]


def test_an_api_version_before_flexible_became_the_default_creates_classic_subscriptions(
    emulator_client: stripe.StripeClient,
) -> None:
    customer = emulator_client.v1.customers.create()
    price = emulator_client.v1.prices.create(
        params={
            "currency": "usd",
            "unit_amount": 900,
            "recurring": {"interval": "month"},
            "product_data": {"name": "Starter"},
        }
    )
    subscription = emulator_client.v1.subscriptions.create(
        params={"customer": customer.id, "items": [{"price": price.id}]},
        options={"stripe_version": "2025-03-31.basil"},
    )

    assert subscription.billing_mode.type == "classic"

"""Unit tests: the bracket-notation parser, parameter schemas, tax ID checks."""

from __future__ import annotations

from typing import Any

import pytest

from stripe_emulator import taxids
from stripe_emulator.errors import StripeError, mask_key
from stripe_emulator.forms import parse_form
from stripe_emulator.params import UNSET, Arr, Enum, Int, Metadata, Obj, Str, schema

pytestmark = pytest.mark.emulator_only


def test_plain_keys_parse_to_strings() -> None:
    assert parse_form("name=Jenny+Rosen&email=j%40example.com") == {
        "name": "Jenny Rosen",
        "email": "j@example.com",
    }


def test_brackets_nest_hashes_and_indexed_arrays() -> None:
    parsed = parse_form("address[city]=Berlin&items[0][price]=p1&items[1][price]=p2&metadata[k]=")

    assert parsed == {
        "address": {"city": "Berlin"},
        "items": {"0": {"price": "p1"}, "1": {"price": "p2"}},
        "metadata": {"k": ""},
    }


def test_empty_brackets_append_to_a_list() -> None:
    assert parse_form("expand[]=a&expand[]=b.c") == {"expand": ["a", "b.c"]}


def test_mixing_appended_and_indexed_forms_of_one_key_is_rejected() -> None:
    with pytest.raises(StripeError) as raised:
        parse_form("expand[]=a&expand[0]=b")

    assert raised.value.param == "expand"


def test_a_key_used_as_value_and_hash_is_rejected() -> None:
    with pytest.raises(StripeError):
        parse_form("address=x&address[city]=y")


ADDRESS = Obj({"city": Str(), "line1": Str()}, emptyable=True)
ROOT = schema(
    {
        "name": Str(required=True),
        "address": ADDRESS,
        "count": Int(minimum=1),
        "mode": Enum("a", "b", "c"),
        "metadata": Metadata(),
        "items": Arr(Obj({"price": Str(required=True)})),
    }
)


def validate(raw: dict[str, Any]) -> dict[str, Any]:
    return ROOT.validate(raw)


def test_a_schema_converts_types_and_indexed_arrays() -> None:
    typed = validate(
        {"name": "n", "count": "3", "items": {"1": {"price": "b"}, "0": {"price": "a"}}}
    )

    assert typed == {"name": "n", "count": 3, "items": [{"price": "a"}, {"price": "b"}]}


def test_emptyable_fields_become_unset_markers() -> None:
    typed = validate({"name": "n", "address": "", "metadata": {"gone": "", "kept": "v"}})

    assert typed["address"] is UNSET
    assert typed["metadata"] == {"gone": UNSET, "kept": "v"}


@pytest.mark.parametrize(
    ("raw", "code", "param"),
    [
        ({}, "parameter_missing", "name"),
        ({"name": "n", "nam": "x"}, "parameter_unknown", "nam"),
        ({"name": "n", "address": {"town": "x"}}, "parameter_unknown", "address[town]"),
        ({"name": ""}, "parameter_invalid_empty", "name"),
        ({"name": "n", "count": "1.5"}, "parameter_invalid_integer", "count"),
        ({"name": "n", "items": {"0": {}}}, "parameter_missing", "items[0][price]"),
        ({"name": "n", "items": {"1": {"price": "p"}}}, None, "items"),
        ({"name": "n", "mode": "d"}, None, "mode"),
        ({"name": "n", "count": "0"}, None, "count"),
        ({"name": "n", "metadata": "flat"}, None, "metadata"),
    ],
)
def test_schema_violations_are_stripe_errors_naming_the_param(
    raw: dict[str, Any], code: str | None, param: str
) -> None:
    with pytest.raises(StripeError) as raised:
        validate(raw)

    assert (raised.value.status, raised.value.code, raised.value.param) == (400, code, param)


def test_every_endpoint_accepts_expand() -> None:
    assert validate({"name": "n", "expand": ["a"]})["expand"] == ["a"]


def test_metadata_limits_are_enforced() -> None:
    with pytest.raises(StripeError):
        Metadata().parse({f"k{n}": "v" for n in range(51)}, "metadata")
    with pytest.raises(StripeError):
        Metadata().parse({"k" * 41: "v"}, "metadata")


def test_the_tax_id_type_list_is_stripes_full_enum() -> None:
    assert len(taxids.TAX_ID_TYPES) == len(set(taxids.TAX_ID_TYPES)) == 135
    assert {"eu_vat", "gb_vat", "us_ein", "in_gst", "au_abn", "ca_bn"} <= set(taxids.TAX_ID_TYPES)


@pytest.mark.parametrize(
    ("tax_type", "value", "valid"),
    [
        ("eu_vat", "DE123456789", True),
        ("eu_vat", "ELC123456789", False),
        ("eu_vat", "EL123456789", True),
        ("eu_vat", "XI123456789", True),
        ("eu_vat", "US123456789", False),
        ("eu_vat", "NL123456789B01", True),
        ("gb_vat", "GB123456789012", True),
        ("gb_vat", "DE123456789", False),
        ("in_gst", "22AAAAA0000A1Z5", True),
        ("in_gst", "22aaaaa0000a1z5", False),
        ("ch_vat", "CHE-123.456.789 MWST", True),
        ("br_cpf", "123.456.789-87", True),
        ("kr_brn", "123-45-67890", True),
        ("ng_tin", "12345678-0001", True),  # generic check for the rarer types
        ("ng_tin", "not-a-number", False),
    ],
)
def test_tax_id_values_are_checked_by_type(tax_type: str, value: str, valid: bool) -> None:
    assert taxids.is_valid(tax_type, value) is valid


def test_the_country_of_a_tax_id_follows_its_type_or_vat_prefix() -> None:
    assert taxids.country_of("eu_vat", "EL123456789") == "GR"
    assert taxids.country_of("eu_vat", "XI123456789") == "GB"
    assert taxids.country_of("eu_vat", "FR12345678901") == "FR"
    assert taxids.country_of("us_ein", "12-3456789") == "US"


@pytest.mark.parametrize(
    ("key", "masked"),
    [("sk_test_abcdefgh1234", "sk_test_********1234"), ("sk_test_abc", "sk_test_abc")],
)
def test_api_keys_are_masked_like_stripe_does(key: str, masked: str) -> None:
    assert mask_key(key) == masked

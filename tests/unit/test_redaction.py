"""The rules for masking personal data (domain/redaction.py)."""

from __future__ import annotations

from typing import Any

import pytest

from domain.redaction import mask_email, mask_phone, mask_tax_id, mask_text, mask_value, redact


def a_billing_account() -> dict[str, Any]:
    return {
        "id": "ba_1",
        "org_id": "org_1",
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
        "tax_data": [{"type": "gb_vat", "id": "GB123456789"}],
        "metadata": {"contact": "ada@acme.example", "seats": 12},
        "state": "active",
    }


def test_an_email_keeps_its_first_character_and_its_domain() -> None:
    assert mask_email("billing@acme.example") == "b***@acme.example"


def test_a_phone_keeps_its_country_code_and_last_three_digits_and_its_length() -> None:
    assert mask_phone("+442079460958") == "+44*******958"
    assert len(mask_phone("+442079460958")) == len("+442079460958")


def test_a_tax_id_keeps_its_first_and_last_two_characters() -> None:
    assert mask_tax_id("GB123456789") == "GB*******89"


def test_a_name_keeps_its_first_character() -> None:
    assert mask_value("Acme Ltd") == "A***"


def test_short_values_are_all_stars_and_empty_ones_stay_empty() -> None:
    assert (mask_phone("+4412"), mask_tax_id("GB1")) == ("***", "***")
    assert (mask_value(""), mask_phone(""), mask_tax_id(""), mask_email("")) == ("", "", "", "")


def test_a_billing_account_is_masked_field_by_field() -> None:
    masked = redact(a_billing_account())

    assert masked == {
        "id": "ba_1",
        "org_id": "org_1",
        "name": "A***",
        "email": "b***@acme.example",
        "phone": "+44*******958",
        "address": {
            "line1": "1***",
            "line2": "F***",
            "city": "L***",
            "state": "",
            "postal_code": "E***",
            "country": "GB",
        },
        "currency": "gbp",
        "tax_data": [{"type": "gb_vat", "id": "GB*******89"}],
        "metadata": {"contact": "a***@acme.example", "seats": 12},
        "state": "active",
    }


def test_a_create_command_s_kwargs_are_masked_where_they_nest() -> None:
    kwargs = {"command_id": "c1", "org_id": "org_1", "account": a_billing_account()}

    masked = redact(kwargs)

    assert masked["command_id"] == "c1"
    assert masked["account"]["email"] == "b***@acme.example"
    assert "Acme Ltd" not in repr(masked)


def test_masking_leaves_the_original_untouched() -> None:
    account = a_billing_account()

    redact(account)

    assert account == a_billing_account()


def test_masking_twice_is_masking_once() -> None:
    once = redact(a_billing_account())

    assert redact(once) == once
    assert mask_text(mask_text("write to ada@acme.example")) == "write to a***@acme.example"


def test_an_organization_s_or_a_plan_s_name_is_not_personal() -> None:
    view = {"organization": {"id": "org_1", "name": "acme", "title": "Acme"}}

    assert redact(view) == view
    assert redact({"plan": {"name": "team"}}) == {"plan": {"name": "team"}}


def test_emails_and_international_phones_in_free_text_are_masked() -> None:
    text = "Invalid email address: ada.lovelace@acme.example; phone +44 20 7946 0958 refused"

    masked = mask_text(text)

    assert masked == "Invalid email address: a***@acme.example; phone +44**********958 refused"


def test_ids_times_and_amounts_in_free_text_are_left_alone() -> None:
    text = (
        "command 8f1c-42 (billing.create_account) attempt 2 failed; retry in 1.25s at "
        "2026-11-22T14:56:51+00:00, amount 2900, org_1234567890"
    )

    assert mask_text(text) == text


def test_an_email_inside_a_repr_keeps_its_quotes() -> None:
    assert mask_text("{'email': 'ada@acme.example'}") == "{'email': 'a***@acme.example'}"


@pytest.mark.parametrize(
    ("shown", "masked"),
    [
        ("https://user:pass@evil.example", "https://***@evil.example"),
        ("Origin https://ops@evil.example:8443/form", "Origin https://***@evil.example:8443/form"),
        ("http://ada%40acme.example:pw@host.example/x?y=1", "http://***@host.example/x?y=1"),
        ("redis://:s3cret@127.0.0.1:6379/0", "redis://***@127.0.0.1:6379/0"),
        (
            "from http://a:b@c@evil.example/ or ada@acme.example",
            "from http://***@evil.example/ or a***@acme.example",
        ),
    ],
)
def test_a_urls_user_information_is_masked_and_the_rest_of_it_stays_readable(
    shown: str, masked: str
) -> None:
    assert mask_text(shown) == masked
    assert mask_text(masked) == masked


def test_a_url_without_user_information_is_left_alone() -> None:
    text = "the request comes from another site (Origin https://evil.example:8443)"

    assert mask_text(text) == text

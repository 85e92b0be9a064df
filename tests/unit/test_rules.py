"""The input rules the API, the queue and the command line share (domain/rules.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from domain.billing.account_details import BillingDetails
from domain.billing.organizations import NewOrganization
from domain.errors import AlreadyExists, ErrorCode, InvalidArgument, UniquenessViolation
from domain.rules import checked_id, checked_name
from domain.users import NewUser


def test_an_email_is_normalized_alike_for_a_user_and_a_billing_account() -> None:
    user = NewUser(email=" Ada@Example.COM ")
    account = BillingDetails(name="Ada", email="Ada@Example.COM")

    assert user.email == account.email == "Ada@example.com"


@pytest.mark.parametrize("email", ["not-an-email", "", "a@b", "ada@localhost"])
def test_a_user_with_an_invalid_email_is_refused(email: str) -> None:
    with pytest.raises(ValidationError, match="email"):
        NewUser(email=email)


@pytest.mark.parametrize("name", ["Acme Ltd", "", "-acme", "a/b", "a" * 256])
def test_an_organization_name_is_a_handle(name: str) -> None:
    with pytest.raises(ValidationError, match="name"):
        NewOrganization(name=name)


def test_an_organization_name_keeps_its_case_and_loses_its_spaces() -> None:
    assert NewOrganization(name=" Acme.eu_1 ").name == "Acme.eu_1"


@pytest.mark.parametrize("value", ["", "a b", "../x", "x" * 129, "_leading"])
def test_an_id_breaking_the_api_path_rule_is_an_invalid_argument(value: str) -> None:
    with pytest.raises(InvalidArgument, match="invalid org"):
        checked_id(value, "org")


def test_an_id_of_the_api_path_rule_passes_unchanged() -> None:
    assert checked_id("org_demo:1.a-b", "org") == "org_demo:1.a-b"


@pytest.mark.parametrize("value", ["", "   ", "a\nb", "x" * 256])
def test_a_name_people_read_is_one_to_255_printable_characters(value: str) -> None:
    with pytest.raises(InvalidArgument):
        checked_name(value, "name")


def test_a_uniqueness_violation_is_an_already_exists_refusal() -> None:
    clash = UniquenessViolation("UNIQUE constraint failed: organizations.name")
    taken = UniquenessViolation.taken("organization name", "acme", "org_1")

    assert isinstance(clash, AlreadyExists)
    assert clash.code is ErrorCode.ALREADY_EXISTS
    assert taken.message == "organization name 'acme' is taken (org_1)"

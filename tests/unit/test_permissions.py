"""Which client may do what: scopes, organizations, and the 403 body naming what is missing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from domain.errors import ErrorCode, PermissionDenied
from domain.permissions import (
    ALL_SCOPES,
    DEFAULT_SCOPES,
    OPERATOR_SCOPES,
    Grant,
    Scope,
    parse_scopes,
)


def test_a_new_client_may_only_read_back_its_commands() -> None:
    assert Grant().scopes == DEFAULT_SCOPES == {Scope.COMMANDS_READ}


def test_a_grant_holding_the_scope_in_every_organization_allows_the_operation() -> None:
    Grant(scopes=frozenset({Scope.BILLING_CREATE})).check(Scope.BILLING_CREATE, "org_any")


def test_a_missing_scope_is_refused_naming_the_permission() -> None:
    with pytest.raises(PermissionDenied) as refused:
        Grant().check(Scope.SUBSCRIPTIONS_CHANGE, "org_1")

    body = refused.value.to_body()
    assert body["code"] == 7 == int(ErrorCode.PERMISSION_DENIED)
    assert "'subscriptions:change'" in body["message"]
    assert body["details"][0]["reason"] == "PERMISSION_DENIED"
    assert body["details"][0]["metadata"] == {"permission": "subscriptions:change"}


def test_a_client_limited_to_organizations_is_refused_in_any_other() -> None:
    grant = Grant(scopes=frozenset({Scope.BILLING_CREATE}), org_ids=frozenset({"org_mine"}))
    grant.check(Scope.BILLING_CREATE, "org_mine")

    with pytest.raises(PermissionDenied) as refused:
        grant.check(Scope.BILLING_CREATE, "org_theirs")

    assert refused.value.details[0]["metadata"] == {
        "permission": "billing:create",
        "organization": "org_theirs",
    }


def test_an_operation_outside_organizations_ignores_the_organization_limit() -> None:
    grant = Grant(scopes=frozenset({Scope.USERS_ENABLE}), org_ids=frozenset({"org_mine"}))
    grant.check(Scope.USERS_ENABLE)


def test_scope_names_parse_and_a_star_means_every_scope() -> None:
    assert parse_scopes(["users:enable", "commands:read"]) == {
        Scope.USERS_ENABLE,
        Scope.COMMANDS_READ,
    }
    assert parse_scopes(["*"]) == ALL_SCOPES


def test_an_unknown_scope_name_is_refused_listing_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown scope 'billing:delete' \(known: .*users:enable"):
        parse_scopes(["billing:delete"])


def permissions_table() -> dict[str, str]:
    """The HTTP API page's permissions table: each scope and what it allows."""
    page = (Path(__file__).resolve().parents[2] / "docs/reference/http-api.md").read_text()
    section = page.split("## Permissions", 1)[1].split("\n## ", 1)[0]
    return {
        match.group(1): match.group(2)
        for match in re.finditer(r"^\| `([a-z:]+)` \| (.*) \|$", section, re.MULTILINE)
    }


def test_the_http_api_page_lists_every_scope_and_says_which_span_every_organization() -> None:
    table = permissions_table()

    assert set(table) == {scope.value for scope in ALL_SCOPES}
    for scope in OPERATOR_SCOPES:
        assert "every organization" in table[scope.value], scope

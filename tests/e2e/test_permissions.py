"""Permissions over HTTP: a client's scopes and organizations decide what it may do; a refusal
is a 403 in the spec's body naming the missing permission, and never tells whether the
resource exists; a disabled client is a 401."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from adapters.clock import SystemClock
from adapters.db.api_clients import NewClient, update_client
from domain.permissions import Grant, Scope
from tests.support.records import create_organization
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

ACCOUNT = {"body": {"name": "Scoped Ltd", "email": "billing@scoped.example"}, "offline": True}


def new_org(stack: Stack) -> str:
    org = create_organization(stack.sessions, SystemClock(), name=f"perm-{uuid.uuid4().hex[:8]}")
    return org.id


def client_with(stack: Stack, *scopes: Scope, org_ids: set[str] | None = None) -> NewClient:
    grant = Grant(scopes=frozenset(scopes), org_ids=None if org_ids is None else frozenset(org_ids))
    return stack.new_client("scoped", grant=grant)


def post(stack: Stack, client: NewClient, path: str, body: Any) -> httpx.Response:
    with stack.http(client) as http:
        return http.post(path, json=body)


def change_path(org_id: str) -> str:
    return f"/v1beta1/organizations/{org_id}/billing/ba_x/subscriptions/sub_x/change"


def test_a_client_without_the_scope_gets_403_naming_the_missing_permission(
    stack: Stack,
) -> None:
    client = client_with(stack, Scope.BILLING_CREATE, Scope.COMMANDS_READ)

    refused = post(stack, client, change_path(new_org(stack)), {"plan_change": {"plan": "team"}})

    assert refused.status_code == 403
    assert refused.headers["content-type"] == "application/json"
    body = refused.json()
    assert body["code"] == 7
    assert body["message"] == "the client lacks the permission 'subscriptions:change'"
    assert body["details"] == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "PERMISSION_DENIED",
            "domain": "billing-worker",
            "metadata": {"permission": "subscriptions:change"},
        }
    ]


def test_a_refusal_is_the_same_whether_the_resource_exists_or_not(stack: Stack) -> None:
    client = client_with(stack)  # the default scopes: reading back its own commands only

    existing = post(stack, client, change_path(new_org(stack)), {"plan_change": {"plan": "x"}})
    missing = post(stack, client, change_path("org_nowhere"), {"plan_change": {"plan": "x"}})
    bad_body = post(stack, client, change_path("org_nowhere"), {"surprise": True})

    assert existing.status_code == missing.status_code == bad_body.status_code == 403
    assert existing.json() == missing.json() == bad_body.json()


def test_a_client_limited_to_an_organization_acts_there_and_nowhere_else(stack: Stack) -> None:
    mine, theirs = new_org(stack), new_org(stack)
    client = client_with(stack, Scope.BILLING_CREATE, org_ids={mine})

    created = post(stack, client, f"/v1beta1/organizations/{mine}/billing", ACCOUNT)
    elsewhere = post(stack, client, f"/v1beta1/organizations/{theirs}/billing", ACCOUNT)
    nowhere = post(stack, client, "/v1beta1/organizations/org_nowhere/billing", ACCOUNT)

    assert created.status_code == 200, created.text
    assert elsewhere.status_code == nowhere.status_code == 403
    assert elsewhere.json()["details"][0]["metadata"] == {
        "permission": "billing:create",
        "organization": theirs,
    }
    assert nowhere.json()["details"][0]["metadata"]["organization"] == "org_nowhere"


def test_each_operation_needs_its_own_scope(stack: Stack) -> None:
    org_id = new_org(stack)
    operations = {
        Scope.USERS_ENABLE: ("/v1beta1/users/usr_x/enable", {}),
        Scope.BILLING_CREATE: (f"/v1beta1/organizations/{org_id}/billing", ACCOUNT),
        Scope.BILLING_REGISTER: (f"/v1beta1/organizations/{org_id}/billing/ba_x/register", {}),
        Scope.SUBSCRIPTIONS_CHANGE: (change_path(org_id), {"plan_change": {"plan": "x"}}),
        Scope.WEBHOOKS_MANAGE: ("/v1beta1/webhooks", {"url": "https://hooks.example/x"}),
    }
    for scope, (path, body) in operations.items():
        others = client_with(stack, *(set(Scope) - {scope}))
        holder = client_with(stack, scope)

        assert post(stack, others, path, body).status_code == 403, scope
        assert post(stack, holder, path, body).status_code != 403, scope


def test_reading_a_command_needs_the_commands_read_scope(stack: Stack) -> None:
    writer = client_with(stack, Scope.USERS_ENABLE)
    with stack.http(writer) as http:
        sent = http.post(
            "/v1beta1/users/usr_x/enable", json={}, headers={"Prefer": "respond-async"}
        )
        read = http.get(f"/v1beta1/commands/{sent.headers['Command-Id']}")

    assert sent.status_code == 202
    assert read.status_code == 403
    assert read.json()["details"][0]["metadata"] == {"permission": "commands:read"}


def test_a_disabled_client_is_unauthenticated(stack: Stack) -> None:
    client = client_with(stack, Scope.USERS_ENABLE)
    update_client(stack.sessions, SystemClock(), client.client_id, enabled=False)

    refused = post(stack, client, "/v1beta1/users/usr_x/enable", {})

    assert refused.status_code == 401
    assert refused.json()["code"] == 16
    assert refused.headers["www-authenticate"].startswith("Basic")

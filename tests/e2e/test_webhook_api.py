"""``/v1beta1/webhooks`` over HTTP: endpoints added (the secret in that answer only), listed,
disabled with their unfinished deliveries failed, enabled, their secrets rotated, and failed
deliveries listed and replayed; errors in the spec's body; all behind ``webhooks:manage``."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest

from adapters.clock import SystemClock
from adapters.db.uow import SqlUnitOfWork
from domain.operations.audit import AuditFilter
from domain.permissions import ALL_SCOPES, Grant, Scope
from domain.webhooks import DeliveryState, WebhookDelivery
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

WEBHOOKS = "/v1beta1/webhooks"


def add(stack: Stack, **body: Any) -> dict[str, Any]:
    with stack.http() as http:
        created = http.post(WEBHOOKS, json={"url": "https://hooks.example/x", **body})
    assert created.status_code == 201, created.text
    answer: dict[str, Any] = created.json()
    return answer


def add_deliveries(stack: Stack, endpoint_id: str, *states: DeliveryState) -> list[str]:
    now = SystemClock().now()
    made = []
    with SqlUnitOfWork(stack.sessions) as uow:
        for sequence, state in enumerate(states, start=1):
            delivery = WebhookDelivery.of(
                f"evt_{uuid.uuid4().hex}",
                "command.failed",
                sequence,
                f"command:c{sequence}",
                endpoint_id,
                now - timedelta(minutes=10 - sequence),
            )
            delivery.state = state
            uow.webhook_deliveries.add(delivery)
            made.append(delivery.id)
        uow.commit()
    return made


def test_an_added_endpoint_answers_201_with_its_secret_which_nothing_else_shows(
    stack: Stack,
) -> None:
    with stack.http() as http:
        created = http.post(
            WEBHOOKS,
            json={
                "url": "https://hooks.example/plans",
                "events": ["subscription.plan_change.applied", "command.failed"],
                "description": "crm",
            },
        )
        endpoint = created.json()
        listed = http.get(WEBHOOKS)
        one = http.get(f"{WEBHOOKS}/{endpoint['id']}")

    assert created.status_code == 201, created.text
    assert created.headers["location"] == f"{WEBHOOKS}/{endpoint['id']}"
    assert created.headers["cache-control"] == "no-store"
    assert endpoint["secret"].startswith("whsec_")
    assert endpoint["state"] == "enabled"
    assert endpoint["events"] == ["subscription.plan_change.applied", "command.failed"]
    assert one.status_code == listed.status_code == 200
    view = {key: value for key, value in endpoint.items() if key != "secret"}
    assert one.json() == view
    assert view in listed.json()["webhooks"]
    assert "whsec_" not in one.text + listed.text


def test_an_endpoint_without_events_gets_every_event(stack: Stack) -> None:
    assert add(stack)["events"] == ["*"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "url"),
        ({"url": "ftp://hooks.example"}, "url"),
        ({"url": "https://hooks.example", "events": ["user.deleted"]}, "events"),
        ({"url": "https://hooks.example", "events": []}, "events"),
        ({"url": "https://hooks.example", "description": "x" * 256}, "description"),
        ({"url": "https://hooks.example", "secret": "whsec_mine"}, "secret"),
        ({"url": "https://hooks.example/\ud800"}, "url"),
    ],
)
def test_a_bad_endpoint_is_a_400_naming_the_field(
    stack: Stack, body: dict[str, Any], field: str
) -> None:
    with stack.http() as http:
        # Encoded here: a lone surrogate travels as its JSON escape.
        raw = json.dumps(body)
        refused = http.post(WEBHOOKS, content=raw, headers={"content-type": "application/json"})

    assert refused.status_code == 400, refused.text
    assert refused.json()["code"] == 3
    (detail,) = refused.json()["details"]
    assert field in [violation["field"] for violation in detail["fieldViolations"]]


def test_unknown_endpoints_and_deliveries_are_404_naming_them(stack: Stack) -> None:
    with stack.http() as http:
        answers = [
            http.get(f"{WEBHOOKS}/we_nope"),
            http.post(f"{WEBHOOKS}/we_nope/disable", json={}),
            http.post(f"{WEBHOOKS}/we_nope/enable", json={}),
            http.post(f"{WEBHOOKS}/we_nope/rotate-secret", json={"reason": "r"}),
            http.get(f"{WEBHOOKS}/we_nope/deliveries"),
        ]
        delivery = http.post(f"{WEBHOOKS}/deliveries/whd_nope/replay", json={})

    for answer in answers:
        assert answer.status_code == 404, answer.text
        assert answer.json()["details"][0]["resourceName"] == "we_nope"
    assert delivery.status_code == 404
    assert delivery.json()["message"] == "webhook_delivery 'whd_nope' not found"


def test_disabling_fails_the_unfinished_deliveries_which_replay_once_enabled_again(
    stack: Stack,
) -> None:
    endpoint = add(stack)
    path = f"{WEBHOOKS}/{endpoint['id']}"
    pending, succeeded = add_deliveries(
        stack, endpoint["id"], DeliveryState.PENDING, DeliveryState.SUCCEEDED
    )
    with stack.http() as http:
        disabled = http.post(f"{path}/disable", json={"reason": "receiver moved"})
        failed = http.get(f"{path}/deliveries", params={"state": "failed"})
        every = http.get(f"{path}/deliveries")
        refused = http.post(f"{WEBHOOKS}/deliveries/{pending}/replay", json={})
        enabled = http.post(f"{path}/enable", json={})
        replayed = http.post(f"{WEBHOOKS}/deliveries/{pending}/replay", json={})
        again = http.post(f"{WEBHOOKS}/deliveries/{pending}/replay", json={})

    assert disabled.status_code == 200, disabled.text
    assert disabled.json()["state"] == "disabled"
    assert disabled.json()["disabled_reason"] == "receiver moved"
    assert disabled.json()["abandoned_deliveries"] == 1
    assert [d["id"] for d in failed.json()["deliveries"]] == [pending]
    assert failed.json()["deliveries"][0]["last_error"] == "endpoint disabled: receiver moved"
    assert [d["id"] for d in every.json()["deliveries"]] == [succeeded, pending]
    assert refused.status_code == 400
    assert refused.json()["code"] == 9
    assert refused.json()["message"] == (
        f"endpoint {endpoint['id']!r} is disabled (receiver moved); enable it before "
        f"replaying delivery {pending!r}"
    )
    assert enabled.json()["state"] == "enabled"
    assert enabled.json()["disabled_reason"] is None
    assert replayed.status_code == 200, replayed.text
    assert replayed.json()["state"] == "pending"
    assert replayed.json()["attempts"] == 0
    assert again.status_code == 400
    assert again.json()["details"][0]["reason"] == "DELIVERY_NOT_FAILED"


def test_a_rotated_secret_is_new_and_the_previous_one_signs_until_the_grace_ends(
    stack: Stack,
) -> None:
    endpoint = add(stack)

    with stack.http() as http:
        rotated = http.post(f"{WEBHOOKS}/{endpoint['id']}/rotate-secret", json={"reason": "leaked"})

    assert rotated.status_code == 200, rotated.text
    assert rotated.headers["cache-control"] == "no-store"
    assert rotated.json()["secret"].startswith("whsec_")
    assert rotated.json()["secret"] != endpoint["secret"]
    with SqlUnitOfWork(stack.sessions) as uow:
        stored = uow.webhook_endpoints.get(endpoint["id"])
    assert stored is not None
    assert stored.previous_secret == endpoint["secret"]
    assert stored.previous_secret_expires_at is not None
    assert rotated.json()["previous_secret_expires_at"] == (
        stored.previous_secret_expires_at.isoformat()
    )


def test_the_endpoints_actions_are_audited_with_the_client_that_took_them_never_a_secret(
    stack: Stack,
) -> None:
    endpoint = add(stack, reason="the CRM wants events")
    path = f"{WEBHOOKS}/{endpoint['id']}"

    with stack.http() as http:
        unexplained = http.post(f"{path}/rotate-secret", json={})
        disabled = http.post(f"{path}/disable", json={"reason": "receiver moved"})
        enabled = http.post(f"{path}/enable", json={"reason": "receiver back"})
        rotated = http.post(f"{path}/rotate-secret", json={"reason": "leaked"})

    assert unexplained.status_code == 400
    assert unexplained.json()["details"][0]["fieldViolations"][0]["field"] == "reason"
    assert disabled.status_code == 200, disabled.text
    assert enabled.status_code == 200, enabled.text
    assert rotated.status_code == 200, rotated.text
    with SqlUnitOfWork(stack.sessions) as uow:
        entries = uow.audit.find(AuditFilter(target=endpoint["id"]), 10)
    assert [entry.action for entry in entries] == [
        "rotate-webhook-secret",
        "enable-webhook",
        "disable-webhook",
        "add-webhook",
    ]
    assert stack.client is not None
    assert {(entry.operator, entry.surface) for entry in entries} == {
        (stack.client.client_id, "api")
    }
    assert [entry.reason for entry in entries] == [
        "leaked",
        "receiver back",
        "receiver moved",
        "the CRM wants events",
    ]
    kept = json.dumps([entry.model_dump(mode="json") for entry in entries])
    assert endpoint["secret"] not in kept
    assert rotated.json()["secret"] not in kept
    reader = stack.new_client(
        f"ops-{uuid.uuid4().hex[:6]}", grant=Grant(scopes=frozenset({Scope.OPERATIONS_READ}))
    )
    with stack.http(reader) as console:
        page = console.get("/console/audit", params={"target": endpoint["id"]})
    assert page.status_code == 200, page.text
    assert f"<code>webhook_endpoint:{endpoint['id']}</code>" in page.text
    for shown in ("rotate-webhook-secret", "disable-webhook", "add-webhook", "receiver moved"):
        assert shown in page.text
    assert rotated.json()["secret"] not in page.text


def test_a_bad_filter_or_id_is_a_400(stack: Stack) -> None:
    endpoint = add(stack)
    with stack.http() as http:
        answers = [
            http.get(f"{WEBHOOKS}/{endpoint['id']}/deliveries", params={"state": "lost"}),
            http.get(f"{WEBHOOKS}/{endpoint['id']}/deliveries", params={"limit": "0"}),
            http.get(f"{WEBHOOKS}/{endpoint['id']}/deliveries", params={"event_id": "a b"}),
            http.get(f"{WEBHOOKS}/a%20b"),
            http.post(f"{WEBHOOKS}/{endpoint['id']}/enable", json={"surprise": True}),
            http.post(f"{WEBHOOKS}/{endpoint['id']}/disable", json={"reason": 7}),
        ]

    for answer in answers:
        assert answer.status_code == 400, (answer.request.url, answer.text)
        assert answer.json()["code"] == 3


def test_a_client_without_webhooks_manage_gets_403_whether_the_endpoint_exists_or_not(
    stack: Stack,
) -> None:
    endpoint = add(stack)
    client = stack.new_client(
        "no-webhooks", grant=Grant(scopes=ALL_SCOPES - {Scope.WEBHOOKS_MANAGE})
    )

    def refusals(http: httpx.Client, endpoint_id: str) -> list[httpx.Response]:
        return [
            http.get(WEBHOOKS),
            http.post(WEBHOOKS, json={"url": "https://hooks.example"}),
            http.get(f"{WEBHOOKS}/{endpoint_id}"),
            http.post(f"{WEBHOOKS}/{endpoint_id}/disable", json={}),
            http.post(f"{WEBHOOKS}/{endpoint_id}/enable", json={}),
            http.post(f"{WEBHOOKS}/{endpoint_id}/rotate-secret", json={"reason": "r"}),
            http.get(f"{WEBHOOKS}/{endpoint_id}/deliveries"),
            http.post(f"{WEBHOOKS}/deliveries/whd_x/replay", json={}),
        ]

    with stack.http(client) as http:
        existing = refusals(http, endpoint["id"])
        missing = refusals(http, "we_nope")

    for refused in existing + missing:
        assert refused.status_code == 403, refused.request.url
        assert refused.json() == {
            "code": 7,
            "message": "the client lacks the permission 'webhooks:manage'",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "PERMISSION_DENIED",
                    "domain": "billing-worker",
                    "metadata": {"permission": "webhooks:manage"},
                }
            ],
        }
    with stack.http() as http:
        assert http.get(f"{WEBHOOKS}/{endpoint['id']}").json()["state"] == "enabled"

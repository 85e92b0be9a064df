"""The operator console end to end: a registration that Stripe fails (an emulator fault) until
its retries are spent, then replayed, is one story in `accounts show ORG`: each attempt at
Stripe under one idempotency key, its error, the replay's success and the events; the same
story over HTTP behind `operations:read`, personal data masked as the console masks it. On
SQLite and PostgreSQL."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from sqlalchemy import select

from adapters.clock import SystemClock
from adapters.db.models import EventRow
from adapters.db.uow import SqlUnitOfWork
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount
from domain.permissions import Grant, Scope
from stripe_emulator import EmulatorAdmin
from tests.support.records import create_organization
from tests.support.stack import Stack
from tests.support.stack import cli_output as cli
from tests.support.subscriptions import new_account, new_plan, operator, subscribe

pytestmark = pytest.mark.e2e

ACCOUNT = {"body": {"name": "Acme Ltd", "email": "billing@acme.example"}}


def test_a_failed_then_replayed_registration_shows_both_attempts_in_the_accounts_story(
    stack: Stack, emulator: EmulatorAdmin
) -> None:
    org = create_organization(stack.sessions, SystemClock(), name=f"con-{uuid.uuid4().hex[:8]}")
    emulator.add_fault("service_unavailable", "POST /v1/customers")
    with stack.http() as api:
        failed = api.post(f"/v1beta1/organizations/{org.id}/billing", json=ACCOUNT)
    assert failed.status_code == 503, failed.text
    command_id = failed.headers["Command-Id"]
    emulator.clear_faults()  # Stripe is back
    cli(stack, "commands", "replay", command_id, "--reason", "Stripe is back")
    assert stack.finished(command_id).status.value == "succeeded"

    story = json.loads(cli(stack, "accounts", "show", org.id, "--json"))
    text = cli(stack, "accounts", "show", org.id)

    assert story["billing_account"]["state"] == "active"
    assert story["provider_customer_id"].startswith("cus_")
    creations = [c for c in story["provider_calls"] if c["operation"] == "create_customer"]
    assert [(c["attempt"], c["outcome"]) for c in creations] == [
        (1, "retryable"),
        (2, "retryable"),
        (3, "retryable"),
        (4, "retryable"),  # TEST_SETTINGS: 4 attempts, then the command failed
        (5, "succeeded"),  # the operator's replay
    ]
    assert len({c["idempotency_key"] for c in creations}) == 1
    assert {c["command_id"] for c in creations} == {command_id}
    assert all(c["error"] for c in creations[:4])
    [command] = [c for c in story["commands"] if c["id"] == command_id]
    assert (command["status"], command["attempts"]) == ("succeeded", 5)
    assert {"billing_account.created", "billing_account.registered"} <= {
        event["type"] for event in story["events"]
    }
    assert "create_customer attempt 4: retryable" in text
    assert "create_customer attempt 5: succeeded" in text

    with stack.http() as api:
        served = api.get(f"/v1beta1/operations/billing-accounts/{org.id}")
    assert served.status_code == 200, served.text
    assert served.json()["provider_calls"] == story["provider_calls"]


def test_an_action_through_the_operations_api_is_audited_and_needs_a_reason(stack: Stack) -> None:
    org = create_organization(stack.sessions, SystemClock(), name=f"aud-{uuid.uuid4().hex[:8]}")
    pending = BillingAccount.open(
        f"ba_{uuid.uuid4().hex[:12]}",
        org,
        BillingDetails(name="Acme", email="billing@acme.example"),
        offline=False,
        default_currency="usd",
        now=SystemClock().now(),
    )
    with SqlUnitOfWork(stack.sessions) as uow:
        uow.billing_accounts.add(pending)
        uow.commit()
    operator = stack.new_client(f"ops-{uuid.uuid4().hex[:6]}")
    path = f"/v1beta1/operations/billing-accounts/{pending.id}/mark-offline"

    with stack.http(operator) as api:
        refused = {body: api.post(path, json=json.loads(body)) for body in ("{}", '{"reason": ""}')}
        done = api.post(path, json={"reason": "Stripe refuses it"})
    story = json.loads(cli(stack, "accounts", "show", org.id, "--json"))
    listed = json.loads(cli(stack, "audit", "--operator", operator.client_id, "--json"))

    for answer in refused.values():
        assert answer.status_code == 400, answer.text
        assert answer.json()["details"][0]["fieldViolations"][0]["field"] == "reason"
    assert done.status_code == 200, done.text
    [entry] = listed
    assert entry["id"] == done.json()["command_id"]
    assert (entry["surface"], entry["reason"]) == ("api", "Stripe refuses it")
    assert entry["targets"] == [f"billing_account:{pending.id}"]
    assert entry["changes"] == [f"billing_account.marked_offline billing_account:{pending.id}"]
    assert story["billing_account"]["state"] == "active"
    assert [one["id"] for one in story["audit"]] == [entry["id"]]
    with stack.sessions() as session:
        exported = session.scalars(
            select(EventRow.document).where(
                EventRow.command_id == entry["id"], EventRow.type == "operator.action_taken"
            )
        ).one()
    assert exported["data"]["operator"] == operator.client_id
    assert exported["data"]["reason"] == "Stripe refuses it"


def test_the_operations_api_needs_its_scope_and_a_client_of_every_organization(
    stack: Stack,
) -> None:
    org = create_organization(stack.sessions, SystemClock(), name=f"ops-{uuid.uuid4().hex[:8]}")
    path = f"/v1beta1/operations/billing-accounts/{org.id}"
    without = stack.new_client("no-ops", grant=Grant(scopes=frozenset({Scope.COMMANDS_READ})))
    limited = stack.new_client(
        "limited-ops",
        grant=Grant(scopes=frozenset({Scope.OPERATIONS_READ}), org_ids=frozenset({org.id})),
    )
    reader = stack.new_client("ops", grant=Grant(scopes=frozenset({Scope.OPERATIONS_READ})))

    answers = {}
    for name, client in (("without", without), ("limited", limited), ("reader", reader)):
        with stack.http(client) as http:
            answers[name] = http.get(path)
            answers[f"{name}-write"] = http.post(
                f"/v1beta1/operations/billing-accounts/{org.id}/mark-offline", json={}
            )

    assert answers["without"].status_code == answers["limited"].status_code == 403
    assert answers["reader"].status_code == 404  # the organization has no account
    assert answers["reader"].json()["code"] == 5
    assert answers["reader-write"].status_code == 403
    assert answers["reader-write"].json()["details"][0]["metadata"] == {
        "permission": "operations:write"
    }


@pytest.mark.parametrize("listed", ["organizations", "users", "billing-accounts", "subscriptions"])
def test_an_id_ordered_list_refuses_a_cursor_no_page_of_it_gave_with_a_400_naming_after(
    stack: Stack, listed: str
) -> None:
    for _ in range(2):
        create_organization(stack.sessions, SystemClock(), name=f"cur-{uuid.uuid4().hex[:8]}")
    with stack.http() as api:
        other = api.get("/v1beta1/operations/organizations", params={"limit": 1})
        cursor_of_another_list = other.json()["next_cursor"]
        assert cursor_of_another_list
        answers = [
            api.get(f"/v1beta1/operations/{listed}", params={"after": after})
            for after in ("x", "org_0001", "not base64!")
        ]
        if listed != "organizations":
            answers.append(
                api.get(f"/v1beta1/operations/{listed}", params={"after": cursor_of_another_list})
            )

    for answer in answers:
        assert answer.status_code == 400, answer.text
        body = answer.json()
        assert set(body) == {"code", "message", "details"}
        assert body["code"] == 3
        assert body["details"][0]["fieldViolations"][0]["field"] == "after"


def test_lists_over_http_page_and_refuse_a_cursor_no_page_gave(stack: Stack) -> None:
    for _ in range(2):
        create_organization(stack.sessions, SystemClock(), name=f"lst-{uuid.uuid4().hex[:8]}")

    with stack.http() as api:
        first = api.get("/v1beta1/operations/organizations", params={"limit": 1})
        second = api.get(
            "/v1beta1/operations/organizations",
            params={"limit": 1, "after": first.json()["next_cursor"]},
        )
        in_flight = api.get("/v1beta1/operations/commands", params={"status": ["queued"]})
        bad: httpx.Response = api.get("/v1beta1/operations/commands", params={"after": "x"})

    assert first.status_code == second.status_code == in_flight.status_code == 200
    [one], [two] = first.json()["items"], second.json()["items"]
    assert one["id"] < two["id"]
    assert bad.status_code == 400
    assert bad.json()["details"][0]["fieldViolations"][0]["field"] == "after"


def test_the_operations_apis_stories_mask_personal_data_as_the_console_does(stack: Stack) -> None:
    ctx = operator(stack)
    account = new_account(ctx)  # "Acme", billing@acme.example
    subscribed = subscribe(ctx, account, new_plan(ctx, f"starter-{uuid.uuid4().hex[:8]}", 900))

    with stack.http() as api:
        account_story = api.get(f"/v1beta1/operations/billing-accounts/{account.id}")
        subscription_story = api.get(f"/v1beta1/operations/subscriptions/{subscribed.id}")

    assert account_story.status_code == 200, account_story.text
    shown = account_story.json()["billing_account"]
    assert (shown["name"], shown["email"]) == ("A***", "b***@acme.example")
    assert subscription_story.status_code == 200, subscription_story.text
    for story in (account_story, subscription_story):
        assert "billing@acme.example" not in story.text

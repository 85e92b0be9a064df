"""Changing a subscription's plan end to end: HTTP → Redis → a worker process → the database →
the Stripe emulator, and celery beat applying changes that fall due, on SQLite and PostgreSQL.

Time moves with ``stack.advance_time`` (the application clock and the emulator's together),
never by waiting for a period to pass.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import stripe  # noqa: TID251 - the tests look at the emulator's subscriptions through the SDK
from celery import Celery

from domain.subscriptions.change_states import ChangeState
from stripe_emulator import EmulatorAdmin
from tests.support.errors import field_violations
from tests.support.stack import Stack, eventually
from tests.support.subscriptions import (
    DAY,
    Catalog,
    Subscribed,
    change_in,
    changes_of,
    executed_updates,
    new_account,
    new_plan,
    provider_updates,
    stored_change,
    stored_subscription,
    subscribe,
    three_plans,
)
from worker.bootstrap import Services

pytestmark = pytest.mark.e2e

SWEEPS = 1.5
"""Three sweep intervals of TEST_SETTINGS: long enough for beat to have looked."""


@pytest.fixture(scope="module")
def catalog(ctx: Services) -> Catalog:
    return three_plans(ctx)


@pytest.fixture(scope="module")
def beat(stack: Stack) -> Iterator[subprocess.Popen[bytes]]:
    """A celery beat process for the tests that need one (stopped after the module)."""
    process = stack.start_beat(f"beat-plans-{uuid.uuid4().hex[:6]}")
    yield process
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(15)


@pytest.fixture
def sub(ctx: Services, catalog: Catalog) -> Subscribed:
    """A new organization's active subscription to the starter plan."""
    return subscribe(ctx, new_account(ctx), catalog.starter)


def change(api: httpx.Client, sub: Subscribed, body: dict[str, Any], **kw: Any) -> httpx.Response:
    return api.post(sub.change_url, json=body, **kw)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def item_price(sdk: stripe.StripeClient, sub: Subscribed) -> str:
    return str(sdk.v1.subscriptions.retrieve(sub.provider_id)["items"].data[0].price.id)


# --- immediately ------------------------------------------------------------------------------


def test_an_immediate_change_reaches_stripe_at_once_and_answers_the_new_phase(
    stack: Stack,
    api: httpx.Client,
    sub: Subscribed,
    catalog: Catalog,
    emulator: EmulatorAdmin,
    sdk: stripe.StripeClient,
) -> None:
    before = datetime.now(UTC)
    response = change(api, sub, {"plan_change": {"plan": catalog.team.name, "immediate": True}})

    assert response.status_code == 200, response.text
    assert set(response.json()) == {"phase"}
    phase = response.json()["phase"]
    assert phase["plan_id"] == catalog.team.id
    assert at(phase["effective_at"]) >= before - timedelta(seconds=1)  # now, on the app clock
    assert "Deprecation" not in response.headers
    assert item_price(sdk, sub) == catalog.team.provider_price_id
    [update] = executed_updates(emulator, sub.provider_id)
    # An upgrade is invoiced at once and made only if paid
    # (domain/subscriptions/immediate_changes.py).
    assert (update.form["proration_behavior"], update.form["payment_behavior"]) == (
        "always_invoice",
        "error_if_incomplete",
    )
    [made] = changes_of(stack, sub.id)
    assert update.idempotency_key == f"{made.id}:apply"
    assert (made.kind.value, made.state, made.effective_at) == (
        "immediate",
        ChangeState.APPLIED,
        at(phase["effective_at"]),
    )
    assert made.apply_lag_seconds is not None
    assert stored_subscription(stack, sub.id).plan_id == catalog.team.id


def test_an_immediate_change_supersedes_the_pending_change(
    stack: Stack, api: httpx.Client, sub: Subscribed, catalog: Catalog
) -> None:
    scheduled = change(api, sub, {"plan_change": {"plan": catalog.scale.name}})
    immediate = change(api, sub, {"plan_change": {"plan": catalog.team.name, "immediate": True}})

    assert scheduled.status_code == immediate.status_code == 200, immediate.text
    now, earlier = changes_of(stack, sub.id)
    assert (earlier.state, earlier.reason) == (ChangeState.CANCELED, "superseded")
    assert now.state is ChangeState.APPLIED
    assert stored_subscription(stack, sub.id).plan_id == catalog.team.id


# --- at the period's end ----------------------------------------------------------------------


def test_an_end_of_period_change_answers_the_period_end_and_leaves_stripe_alone(
    stack: Stack,
    api: httpx.Client,
    sub: Subscribed,
    catalog: Catalog,
    emulator: EmulatorAdmin,
    sdk: stripe.StripeClient,
) -> None:
    response = change(api, sub, {"plan_change": {"plan": catalog.team.name, "immediate": False}})

    assert response.status_code == 200, response.text
    period_end = sdk.v1.subscriptions.retrieve(sub.provider_id)["items"].data[0].current_period_end
    assert response.json() == {
        "phase": {
            "effective_at": datetime.fromtimestamp(period_end, UTC).isoformat(),
            "plan_id": catalog.team.id,
        }
    }
    [scheduled] = changes_of(stack, sub.id)
    assert (scheduled.state, scheduled.kind.value) == (ChangeState.SCHEDULED, "end_of_period")
    assert provider_updates(emulator, sub.provider_id) == []
    assert item_price(sdk, sub) == catalog.starter.provider_price_id
    assert stored_subscription(stack, sub.id).plan_id == catalog.starter.id


def test_a_new_end_of_period_request_replaces_the_pending_change(
    stack: Stack, api: httpx.Client, sub: Subscribed, catalog: Catalog
) -> None:
    first = change(api, sub, {"plan_change": {"plan": catalog.team.name}})
    second = change(api, sub, {"plan_change": {"plan": catalog.scale.name}})

    assert first.status_code == second.status_code == 200, second.text
    assert second.json()["phase"]["plan_id"] == catalog.scale.id
    newest, replaced = changes_of(stack, sub.id)
    assert (replaced.state, replaced.reason) == (ChangeState.CANCELED, "replaced")
    assert (newest.state, newest.target_plan_id) == (ChangeState.SCHEDULED, catalog.scale.id)


def test_canceling_upcoming_changes_answers_the_current_phase(
    stack: Stack, api: httpx.Client, sub: Subscribed, catalog: Catalog
) -> None:
    change(api, sub, {"plan_change": {"plan": catalog.team.name}})

    response = change(api, sub, {"phase_change": {"cancel_upcoming_changes": True}})

    assert response.status_code == 200, response.text
    subscription = stored_subscription(stack, sub.id)
    assert response.json() == {
        "phase": {
            "effective_at": subscription.current_period_start.isoformat(),
            "plan_id": catalog.starter.id,
        }
    }
    [canceled] = changes_of(stack, sub.id)
    assert (canceled.state, canceled.reason) == (ChangeState.CANCELED, "canceled_on_request")
    again = change(api, sub, {"phase_change": {"cancel_upcoming_changes": True}})
    assert again.status_code == 200
    assert again.json() == response.json()


def test_beat_makes_a_change_at_stripe_an_hour_ahead_and_it_takes_effect_at_the_boundary(
    stack: Stack,
    api: httpx.Client,
    sub: Subscribed,
    catalog: Catalog,
    emulator: EmulatorAdmin,
    sdk: stripe.StripeClient,
    beat: subprocess.Popen[bytes],
) -> None:
    response = change(api, sub, {"plan_change": {"plan": catalog.team.name}})
    assert response.status_code == 200, response.text
    effective_at = at(response.json()["phase"]["effective_at"])
    [scheduled] = changes_of(stack, sub.id)

    time.sleep(SWEEPS)  # beat sweeps meanwhile, and must leave it
    assert stored_change(stack, scheduled.id).state is ChangeState.SCHEDULED
    assert provider_updates(emulator, sub.provider_id) == []

    half_an_hour_ahead = effective_at - timedelta(minutes=30)
    stack.advance_time(
        (half_an_hour_ahead - datetime.fromtimestamp(emulator.now(), UTC)).total_seconds()
    )

    eventually(
        lambda: change_in(stack, scheduled.id, ChangeState.STAGED),
        timeout=15,
        what="beat to make the change at Stripe",
    )
    [update] = executed_updates(emulator, sub.provider_id)
    assert update.idempotency_key == f"{scheduled.id}:apply"
    assert update.form["proration_behavior"] == "none"
    assert item_price(sdk, sub) == catalog.team.provider_price_id
    assert stored_subscription(stack, sub.id).plan_id == catalog.starter.id  # until the end

    stack.advance_time(timedelta(hours=1).total_seconds())

    applied = eventually(
        lambda: change_in(stack, scheduled.id, ChangeState.APPLIED),
        timeout=15,
        what="the change to take effect at the boundary",
    )
    assert len(provider_updates(emulator, sub.provider_id)) == 1
    subscription = stored_subscription(stack, sub.id)
    assert subscription.plan_id == catalog.team.id
    assert subscription.current_period_start == effective_at  # the new period, from Stripe
    assert applied.applied_at is not None
    assert applied.apply_lag_seconds == pytest.approx(
        (applied.applied_at - effective_at).total_seconds(), abs=0.01
    )
    assert stack.command(f"apply:{scheduled.id}:1").status.value == "succeeded"


def test_a_due_change_of_a_subscription_canceled_meanwhile_is_skipped(
    stack: Stack,
    api: httpx.Client,
    sub: Subscribed,
    catalog: Catalog,
    emulator: EmulatorAdmin,
    sdk: stripe.StripeClient,
    beat: subprocess.Popen[bytes],
) -> None:
    assert change(api, sub, {"plan_change": {"plan": catalog.team.name}}).status_code == 200
    [scheduled] = changes_of(stack, sub.id)
    sdk.v1.subscriptions.cancel(sub.provider_id)

    stack.advance_time(32 * DAY)

    skipped = eventually(
        lambda: change_in(stack, scheduled.id, ChangeState.SKIPPED),
        timeout=15,
        what="beat to skip the change",
    )
    assert skipped.reason == "subscription_canceled"
    assert stored_subscription(stack, sub.id).state.value == "canceled"
    # The boundary is read before anything is sent: nothing is sent.
    assert provider_updates(emulator, sub.provider_id) == []


# --- how a request is read --------------------------------------------------------------------


@pytest.mark.parametrize("immediate", [True, False])
def test_the_deprecated_fields_alone_are_honoured_with_a_deprecation_header(
    stack: Stack, api: httpx.Client, sub: Subscribed, catalog: Catalog, immediate: bool
) -> None:
    response = change(api, sub, {"plan": catalog.team.name, "immediate": immediate})

    assert response.status_code == 200, response.text
    assert response.headers["Deprecation"] == "true"
    assert response.json()["phase"]["plan_id"] == catalog.team.id
    [made] = changes_of(stack, sub.id)
    assert made.kind.value == ("immediate" if immediate else "end_of_period")


def test_a_plan_is_found_by_its_id_as_well_as_its_name(
    api: httpx.Client, sub: Subscribed, catalog: Catalog
) -> None:
    response = change(api, sub, {"plan_change": {"plan": catalog.team.id}})

    assert response.status_code == 200, response.text
    assert response.json()["phase"]["plan_id"] == catalog.team.id


INVALID = [
    pytest.param(
        {"plan_change": {"plan": "team"}, "plan": "scale"}, "plan", id="contradicting-plans"
    ),
    pytest.param(
        {"plan_change": {"plan": "team", "immediate": True}, "immediate": False},
        "immediate",
        id="contradicting-immediate",
    ),
    pytest.param(
        {"plan_change": {"plan": "team"}, "phase_change": {"cancel_upcoming_changes": True}},
        "phase_change.cancel_upcoming_changes",
        id="change-and-cancel",
    ),
    pytest.param({}, "plan_change", id="nothing-requested"),
    pytest.param({"immediate": True}, "immediate", id="immediate-alone"),
    pytest.param({"plan_change": {"plan": "team"}, "colour": "red"}, "colour", id="unknown"),
    pytest.param({"plan_change": {"plan": 7}}, "plan_change.plan", id="plan-not-a-string"),
]


@pytest.mark.parametrize(("body", "field"), INVALID)
def test_an_invalid_request_is_a_400_naming_the_field_and_changes_nothing(
    stack: Stack, api: httpx.Client, sub: Subscribed, body: dict[str, Any], field: str
) -> None:
    response = change(api, sub, body)

    assert response.status_code == 400, response.text
    assert response.json()["code"] == 3
    assert field in field_violations(response.json())
    assert changes_of(stack, sub.id) == []


def test_an_unknown_plan_is_a_404(api: httpx.Client, sub: Subscribed) -> None:
    response = change(api, sub, {"plan_change": {"plan": "no-such-plan"}})

    assert response.status_code == 404, response.text
    assert response.json()["code"] == 5
    assert response.json()["details"][0]["resourceType"] == "plan"


def test_the_current_plan_is_a_400(api: httpx.Client, sub: Subscribed, catalog: Catalog) -> None:
    response = change(api, sub, {"plan_change": {"plan": catalog.starter.name}})

    assert response.status_code == 400, response.text
    assert response.json()["code"] == 3
    assert "plan_change.plan" in field_violations(response.json())


@pytest.mark.parametrize("where", ["unknown-subscription", "other-org", "other-account"])
def test_a_subscription_not_under_the_org_and_billing_account_is_a_404(
    api: httpx.Client, ctx: Services, sub: Subscribed, catalog: Catalog, where: str
) -> None:
    other = subscribe(ctx, new_account(ctx), catalog.starter)
    target = {
        "unknown-subscription": Subscribed(sub.org_id, sub.account_id, "sub_nope", ""),
        "other-org": Subscribed(other.org_id, sub.account_id, sub.id, ""),
        "other-account": Subscribed(sub.org_id, other.account_id, sub.id, ""),
    }[where]

    response = change(api, target, {"plan_change": {"plan": catalog.team.name}})

    assert response.status_code == 404, response.text
    assert response.json()["code"] == 5
    assert response.json()["details"][0]["resourceType"] == "subscription"


def test_a_subscription_canceled_at_stripe_cannot_change_plan(
    stack: Stack, api: httpx.Client, sub: Subscribed, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    sdk.v1.subscriptions.cancel(sub.provider_id)

    later = change(api, sub, {"plan_change": {"plan": catalog.team.name}})
    now = change(api, sub, {"plan_change": {"plan": catalog.team.name, "immediate": True}})

    for response in (later, now):
        assert response.status_code == 400, response.text
        assert response.json()["code"] == 9  # FAILED_PRECONDITION
    assert stored_subscription(stack, sub.id).state.value == "canceled"
    assert change(api, sub, {"phase_change": {"cancel_upcoming_changes": True}}).status_code == 200


# --- Stripe failing ---------------------------------------------------------------------------


def test_transient_stripe_failures_are_retried_with_one_idempotency_key(
    api: httpx.Client,
    sub: Subscribed,
    catalog: Catalog,
    emulator: EmulatorAdmin,
    sdk: stripe.StripeClient,
) -> None:
    emulator.add_fault("service_unavailable", f"POST /v1/subscriptions/{sub.provider_id}", count=2)

    response = change(api, sub, {"plan_change": {"plan": catalog.team.name, "immediate": True}})

    assert response.status_code == 200, response.text
    attempts = provider_updates(emulator, sub.provider_id)
    assert len(attempts) == 3
    assert len({attempt.idempotency_key for attempt in attempts}) == 1
    assert len(executed_updates(emulator, sub.provider_id)) == 1
    assert item_price(sdk, sub) == catalog.team.provider_price_id
    command = api.get(f"/v1beta1/commands/{response.headers['Command-Id']}").json()
    assert len(command["retries"]) == 2


def test_a_change_stripe_refuses_fails_clearly_and_the_pending_change_stands(
    stack: Stack,
    api: httpx.Client,
    ctx: Services,
    sub: Subscribed,
    catalog: Catalog,
    sdk: stripe.StripeClient,
) -> None:
    retired = new_plan(ctx, "retired", 4900)
    assert retired.provider_price_id is not None
    sdk.v1.prices.update(retired.provider_price_id, params={"active": False})
    change(api, sub, {"plan_change": {"plan": catalog.team.name}})

    response = change(api, sub, {"plan_change": {"plan": retired.name, "immediate": True}})

    assert response.status_code == 400, response.text
    assert response.json()["code"] == 3
    assert "inactive" in field_violations(response.json())["plan_change.plan"]
    command = api.get(f"/v1beta1/commands/{response.headers['Command-Id']}").json()
    assert (command["status"], command["attempts"]) == ("rejected", 1)
    refused, pending = changes_of(stack, sub.id)
    assert refused.state is ChangeState.SKIPPED
    assert refused.reason is not None
    assert refused.reason.startswith("provider_rejected: ")
    assert (pending.state, pending.target_plan_id) == (ChangeState.SCHEDULED, catalog.team.id)
    assert stored_subscription(stack, sub.id).plan_id == catalog.starter.id


# --- the queue contract -----------------------------------------------------------------------


def publish(stack: Stack, task: str, **kwargs: Any) -> str:
    """Publish a command as another service would (a plain Celery client); its command id."""
    publisher = Celery("another-service", broker=stack.redis_url)
    publisher.conf.update(task_serializer="json", accept_content=["json"])
    command_id = str(uuid.uuid4())
    try:
        publisher.send_task(
            task, queue="subscriptions", kwargs={"command_id": command_id, **kwargs}
        )
    finally:
        publisher.close()
    return command_id


def test_another_service_can_publish_a_plan_change(
    stack: Stack, sub: Subscribed, catalog: Catalog, sdk: stripe.StripeClient
) -> None:
    command_id = publish(
        stack,
        "subscriptions.change_plan",
        org_id=sub.org_id,
        billing_account_id=sub.account_id,
        subscription_id=sub.id,
        plan=catalog.team.name,
        immediate=True,
    )

    record = stack.finished(command_id)
    assert record.status.value == "succeeded", record.error
    assert record.source == "queue"
    assert record.result is not None
    assert record.result["phase"]["plan_id"] == catalog.team.id
    assert item_price(sdk, sub) == catalog.team.provider_price_id


def test_a_published_change_to_the_current_plan_names_the_commands_plan_field(
    stack: Stack, sub: Subscribed, catalog: Catalog
) -> None:
    command_id = publish(
        stack,
        "subscriptions.change_plan",
        org_id=sub.org_id,
        billing_account_id=sub.account_id,
        subscription_id=sub.id,
        plan=catalog.starter.name,
    )

    record = stack.finished(command_id)
    assert record.status.value == "rejected"
    assert record.error is not None
    fields = [v["field"] for v in record.error["details"][0]["fieldViolations"]]
    assert fields == ["plan"]


def test_an_apply_command_for_a_change_not_yet_due_is_refused_and_sends_nothing(
    stack: Stack,
    api: httpx.Client,
    sub: Subscribed,
    catalog: Catalog,
    emulator: EmulatorAdmin,
) -> None:
    assert change(api, sub, {"plan_change": {"plan": catalog.team.name}}).status_code == 200
    [scheduled] = changes_of(stack, sub.id)
    command_id = publish(stack, "subscriptions.apply_scheduled_change", change_id=scheduled.id)

    record = stack.finished(command_id)
    assert record.status.value == "rejected"
    assert record.error is not None
    assert record.error["code"] == 9  # FAILED_PRECONDITION: not due
    assert stored_change(stack, scheduled.id).state is ChangeState.SCHEDULED
    assert provider_updates(emulator, sub.provider_id) == []

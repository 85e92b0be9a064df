"""Plans, subscriptions and plan changes: the domain's rules, without I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from domain.errors import ErrorCode, FailedPrecondition, InvalidArgument
from domain.subscriptions.change_commands import ChangeSubscriptionPlan
from domain.subscriptions.change_states import ChangeKind, ChangeReason, ChangeState
from domain.subscriptions.plans import Plan, PlanSpec, ProviderPrice
from domain.subscriptions.scheduled_changes import ScheduledChange, change_id_for
from domain.subscriptions.subscription import (
    Phase,
    ProviderSubscription,
    Subscription,
    SubscriptionState,
)
from tests.support.environment import clear_settings
from tests.support.errors import field_violations

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
PERIOD_END = datetime(2026, 12, 21, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=15)


def plan(plan_id: str = "plan_team", name: str = "team", *, registered: bool = True) -> Plan:
    made = Plan.new(plan_id, PlanSpec(name=name, amount=2900, currency="usd"), NOW)
    if registered:
        made.registered("stripe", ProviderPrice("prod_1", f"price_{name}"), NOW)
    return made


def subscription(state: SubscriptionState = SubscriptionState.ACTIVE) -> Subscription:
    return Subscription(
        id="sub_1",
        billing_account_id="ba_1",
        plan_id="plan_starter",
        state=state,
        provider="stripe",
        provider_id="sub_stripe_1",
        current_period_start=NOW - timedelta(days=1),
        current_period_end=PERIOD_END,
        created_at=NOW,
        updated_at=NOW,
    )


def remote(status: str = "active", **overrides: Any) -> ProviderSubscription:
    values: dict[str, Any] = {
        "id": "sub_stripe_1",
        "status": status,
        "item_id": "si_1",
        "price_id": "price_team",
        "current_period_start": PERIOD_END,
        "current_period_end": PERIOD_END + timedelta(days=31),
    }
    values.update(overrides)
    return ProviderSubscription(**values)


# --- the command message ----------------------------------------------------------------------

PATH = {"org_id": "org_1", "billing_account_id": "ba_1", "subscription_id": "sub_1"}


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"plan": "team", "cancel_upcoming_changes": True}, id="plan-and-cancel"),
        pytest.param({}, id="nothing"),
        pytest.param({"immediate": True}, id="immediate-alone"),
        pytest.param({"cancel_upcoming_changes": True, "immediate": True}, id="cancel-immediate"),
        pytest.param({"plan": "team", "immediate": "yes"}, id="immediate-not-strict-bool"),
        pytest.param({"plan": "team", "when": "now"}, id="unknown-field"),
    ],
)
def test_a_change_command_does_exactly_one_thing(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ChangeSubscriptionPlan.model_validate({"command_id": "c1", **PATH, **fields})


def test_a_change_command_from_the_queue_needs_only_ids_and_the_plan() -> None:
    command = ChangeSubscriptionPlan.model_validate({"command_id": "c1", **PATH, "plan": "team"})

    assert (command.immediate, command.cancel_upcoming_changes) == (False, False)
    assert ChangeSubscriptionPlan.TASK_NAME == "subscriptions.change_plan"
    assert ChangeSubscriptionPlan.QUEUE == "subscriptions"


# --- plans ------------------------------------------------------------------------------------


def test_a_plan_spec_normalises_name_and_currency_and_derives_a_title() -> None:
    spec = PlanSpec(name=" Team-Annual ", amount=29000, currency="EUR", interval="year")

    assert (spec.name, spec.currency, spec.title, spec.interval.value) == (
        "team-annual",
        "eur",
        "Team Annual",
        "year",
    )


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"name": "", "amount": 1, "currency": "usd"}, id="empty-name"),
        pytest.param({"name": "team plan", "amount": 1, "currency": "usd"}, id="name-space"),
        pytest.param({"name": "team", "amount": -1, "currency": "usd"}, id="negative"),
        pytest.param({"name": "team", "amount": 1, "currency": "dollars"}, id="currency"),
        pytest.param({"name": "team", "amount": 1, "currency": "usd", "interval": "week"}, id="w"),
    ],
)
def test_an_invalid_plan_spec_is_rejected(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        PlanSpec.model_validate(fields)


def test_a_plan_is_available_once_its_price_exists_and_while_it_is_active() -> None:
    pending = plan(registered=False)
    with pytest.raises(FailedPrecondition):
        pending.ensure_available()

    ready = plan()
    ready.ensure_available()
    assert ready.registration_key == "plan_team:create-price"

    ready.active = False
    with pytest.raises(FailedPrecondition):
        ready.ensure_available()


def test_a_failed_plan_creation_is_resumed_only_with_the_same_terms() -> None:
    spec = PlanSpec(name="team", amount=2900, currency="usd")
    made = Plan.new("plan_1", spec, NOW)

    assert made.matches(spec)
    assert not made.matches(PlanSpec(name="team", amount=3900, currency="usd"))


# --- subscriptions ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ("active", SubscriptionState.ACTIVE),
        ("trialing", SubscriptionState.TRIALING),
        ("past_due", SubscriptionState.PAST_DUE),
        ("unpaid", SubscriptionState.PAST_DUE),
        ("incomplete", SubscriptionState.PAST_DUE),
        ("paused", SubscriptionState.PAST_DUE),
        ("canceled", SubscriptionState.CANCELED),
        ("incomplete_expired", SubscriptionState.ENDED),
    ],
)
def test_the_providers_status_maps_onto_our_states(status: str, state: SubscriptionState) -> None:
    assert SubscriptionState.from_provider(status) is state


@pytest.mark.parametrize("state", list(SubscriptionState))
def test_only_active_and_trialing_subscriptions_change_plan(state: SubscriptionState) -> None:
    if state in (SubscriptionState.ACTIVE, SubscriptionState.TRIALING):
        subscription(state).ensure_accepts_plan_changes()
        return
    with pytest.raises(FailedPrecondition) as raised:
        subscription(state).ensure_accepts_plan_changes()
    assert raised.value.code is ErrorCode.FAILED_PRECONDITION


def test_the_current_plan_cannot_be_requested() -> None:
    with pytest.raises(InvalidArgument) as raised:
        subscription().ensure_not_on(plan("plan_starter", "starter"))

    assert "plan" in field_violations(raised.value)
    subscription().ensure_not_on(plan())


def test_syncing_with_the_provider_takes_its_state_and_period() -> None:
    sub = subscription()

    assert sub.synced(remote(), NOW) is True
    assert sub.current_period_start == PERIOD_END
    assert sub.synced(remote(), NOW) is False
    assert sub.synced(remote("canceled"), NOW) is True
    assert sub.state is SubscriptionState.CANCELED


def test_the_current_phase_is_the_plan_since_the_period_began() -> None:
    sub = subscription()

    assert sub.current_phase() == Phase(
        effective_at=sub.current_period_start, plan_id="plan_starter"
    )


def test_a_phase_is_serialised_in_rfc3339() -> None:
    phase = Phase(effective_at=PERIOD_END, plan_id="plan_team")

    assert phase.model_dump(mode="json") == {
        "effective_at": "2026-12-21T12:00:00+00:00",
        "plan_id": "plan_team",
    }


# --- changes ----------------------------------------------------------------------------------


def test_a_change_at_period_end_is_scheduled_for_the_period_end_without_proration() -> None:
    change = ScheduledChange.at_period_end("chg_1", subscription(), plan(), now=NOW)

    assert change.kind is ChangeKind.END_OF_PERIOD
    assert change.state is ChangeState.SCHEDULED
    assert change.effective_at == PERIOD_END
    assert change.proration_behavior == "none"
    assert change.from_plan_id == "plan_starter"
    assert change.phase == Phase(effective_at=PERIOD_END, plan_id="plan_team")
    assert not change.is_due(NOW)
    assert change.is_due(PERIOD_END)
    with pytest.raises(FailedPrecondition):
        change.ensure_due(NOW)


def test_an_immediate_change_is_claimed_by_its_request_at_once() -> None:
    change = ScheduledChange.immediate(
        "chg_1",
        subscription(),
        plan(),
        proration_behavior="create_prorations",
        lease=LEASE,
        now=NOW,
    )

    assert change.kind is ChangeKind.IMMEDIATE
    assert change.state is ChangeState.APPLYING
    assert (change.effective_at, change.claims, change.lease_until) == (NOW, 1, NOW + LEASE)
    assert change.proration_behavior == "create_prorations"


def test_every_claim_of_a_change_uses_one_provider_key() -> None:
    change = ScheduledChange.at_period_end("chg_1", subscription(), plan(), now=NOW)
    keys = set()
    for hours in (0, 1):
        change.claim(PERIOD_END + timedelta(hours=hours), LEASE)
        keys.add(change.provider_idempotency_key)

    assert change.claims == 2
    assert change.state is ChangeState.APPLYING
    assert change.lease_until == PERIOD_END + timedelta(hours=1) + LEASE
    assert keys == {"chg_1:apply"}


def test_an_applied_change_records_its_lag() -> None:
    change = ScheduledChange.at_period_end("chg_1", subscription(), plan(), now=NOW)
    change.claim(PERIOD_END, LEASE)
    change.applied(PERIOD_END + timedelta(seconds=4.25))

    assert change.state is ChangeState.APPLIED
    assert change.applied_at == PERIOD_END + timedelta(seconds=4.25)
    assert change.apply_lag_seconds == 4.25
    assert change.lease_until is None
    assert not change.state.is_pending


def test_a_change_is_skipped_or_canceled_with_its_reason() -> None:
    skipped = ScheduledChange.at_period_end("chg_1", subscription(), plan(), now=NOW)
    skipped.skip(ChangeReason.PROVIDER_REJECTED, NOW, "No such price")
    canceled = ScheduledChange.at_period_end("chg_2", subscription(), plan(), now=NOW)
    canceled.cancel(ChangeReason.REPLACED, NOW)

    assert (skipped.state, skipped.reason) == (
        ChangeState.SKIPPED,
        "provider_rejected: No such price",
    )
    assert (canceled.state, canceled.reason) == (ChangeState.CANCELED, "replaced")
    canceled.restore(NOW)
    assert (canceled.state, canceled.reason) == (ChangeState.SCHEDULED, None)


def test_a_skipped_change_names_the_state_of_its_subscription() -> None:
    assert ChangeReason.subscription_in(SubscriptionState.CANCELED) == "subscription_canceled"
    assert ChangeReason.subscription_in(SubscriptionState.ENDED) == "subscription_ended"
    assert ChangeReason.subscription_in(SubscriptionState.PAST_DUE) == "subscription_past_due"


@pytest.mark.parametrize("state", list(SubscriptionState))
def test_a_due_change_applies_until_the_subscription_ends_an_immediate_one_in_good_standing(
    state: SubscriptionState,
) -> None:
    later = ScheduledChange.at_period_end("chg_1", subscription(), plan(), now=NOW)
    now = ScheduledChange.immediate(
        "chg_2", subscription(), plan(), proration_behavior="none", lease=LEASE, now=NOW
    )

    assert later.applies_to(state) is not state.is_over
    assert now.applies_to(state) is state.accepts_plan_changes


def test_a_command_always_makes_the_same_change() -> None:
    assert change_id_for("cmd-1") == change_id_for("cmd-1")
    assert change_id_for("cmd-1") != change_id_for("cmd-2")
    assert change_id_for("cmd-1").startswith("chg_")


# --- beat's sweep -----------------------------------------------------------------------------


def test_beat_sweeps_for_due_changes_every_second_on_the_maintenance_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adapters.messaging.config import ENQUEUE_DUE_CHANGES, celery_config
    from worker.celery_app import create_celery_app
    from worker.settings import Settings

    clear_settings(monkeypatch)
    settings = Settings(redis_url="redis://127.0.0.1:1/0")
    sweep = celery_config(settings)["beat_schedule"]["apply-due-plan-changes"]
    app = create_celery_app(settings)

    assert (sweep["task"], sweep["schedule"]) == (ENQUEUE_DUE_CHANGES, 1.0)
    assert app.amqp.router.route({}, ENQUEUE_DUE_CHANGES)["queue"].name == "maintenance"
    assert app.amqp.router.route({}, "subscriptions.change_plan")["queue"].name == "subscriptions"
    assert (
        settings.proration_behavior,
        settings.scheduled_change_lease_seconds,
        settings.scheduled_changes_batch_size,
    ) == ("create_prorations", 900.0, 500)


def test_each_claim_of_a_change_is_one_apply_command() -> None:
    from application.handlers.subscriptions.due_changes import apply_command_for
    from domain.ports.repositories import Claim

    first = apply_command_for(Claim("chg_1", 1))

    assert first == apply_command_for(Claim("chg_1", 1))
    assert (first.command_id, first.change_id) == ("apply:chg_1:1", "chg_1")
    assert apply_command_for(Claim("chg_1", 2)).command_id == "apply:chg_1:2"
    assert first.TASK_NAME == "subscriptions.apply_scheduled_change"

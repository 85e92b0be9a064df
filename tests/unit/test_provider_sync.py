"""Stripe's truth flowing in, on in-memory ports: what a re-read subscription or customer
changes here, and what the reconciliation sweep picks."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from application.handlers.provider.reconcile import reconcile_with_stripe
from application.handlers.provider.sync import sync_stripe_object
from application.handlers.subscriptions.due_changes import claim_due_changes
from application.handlers.subscriptions.plan_changes import change_subscription_plan
from application.handlers.subscriptions.scheduled_changes import apply_change
from application.requests.sweeps import ClaimDueChanges, ReconcileWithStripe
from domain.errors import FailedPrecondition, GoneAtProvider, InvalidArgument
from domain.provider.sync import SyncStripeObject
from domain.subscriptions.change_commands import ApplyScheduledChange, ChangeSubscriptionPlan
from domain.subscriptions.change_states import ChangeReason, ChangeState
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import Subscription, SubscriptionState
from tests.support.fakes.application import FakeApplication, FakeBillingPolicy
from tests.support.fakes.data import Subscribed, subscribed
from tests.support.fakes.provider_requests import rejected

DAY = timedelta(days=1)


@pytest.fixture
def app() -> FakeApplication:
    return FakeApplication()


@pytest.fixture
def sub(app: FakeApplication) -> Subscribed:
    return subscribed(app)


def sync(app: FakeApplication, object_id: str, kind: Any = "subscription") -> dict[str, Any]:
    command = SyncStripeObject(
        command_id="stripe:evt_1", object_type=kind, object_id=object_id, event_id="evt_1"
    )
    return sync_stripe_object(command, app).model_dump(mode="json")


def stored(app: FakeApplication, sub: Subscribed) -> Subscription:
    found: Subscription = app.db.row("subscriptions", sub.subscription_id)
    return found


def event_types(app: FakeApplication) -> list[str]:
    return [row.type for row in sorted(app.db.rows("events"), key=lambda row: row.sequence)]


def test_a_renewal_at_stripe_moves_our_period_and_is_told_as_an_event(
    app: FakeApplication, sub: Subscribed
) -> None:
    before = stored(app, sub).current_period_end
    app.clock.advance(31 * DAY)

    synced = sync(app, sub.provider_id)

    assert synced["ours"] is True
    assert synced["drift"] == ["period"]
    assert stored(app, sub).current_period_start == before
    assert event_types(app) == ["subscription.synced"]


def test_a_price_changed_in_stripe_s_dashboard_moves_our_plan(
    app: FakeApplication, sub: Subscribed
) -> None:
    remote = app.provider.subscriptions[sub.provider_id]
    app.provider.subscriptions[sub.provider_id] = replace(remote, price_id="price_scale")

    synced = sync(app, sub.provider_id)

    assert synced["changes"]["plan_id"] == [sub.starter.id, sub.scale.id]
    assert stored(app, sub).plan_id == sub.scale.id


def test_a_schedule_attached_and_released_at_stripe_is_followed_and_counted_as_drift(
    app: FakeApplication, sub: Subscribed
) -> None:
    remote = app.provider.subscriptions[sub.provider_id]
    app.provider.subscriptions[sub.provider_id] = replace(remote, schedule_id="sub_sched_1")

    attached = sync(app, sub.provider_id)
    app.provider.subscriptions[sub.provider_id] = remote
    released = sync(app, sub.provider_id)

    assert attached["drift"] == released["drift"] == ["schedule"]
    assert attached["changes"] == {"provider_schedule_id": [None, "sub_sched_1"]}
    assert released["changes"] == {"provider_schedule_id": ["sub_sched_1", None]}
    assert stored(app, sub).provider_schedule_id is None


def test_a_price_that_is_none_of_our_plans_is_drift_and_keeps_the_plan(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.provider.add_price("price_custom")
    remote = app.provider.subscriptions[sub.provider_id]
    app.provider.subscriptions[sub.provider_id] = replace(remote, price_id="price_custom")

    synced = sync(app, sub.provider_id)

    assert "unknown_price" in synced["drift"]
    assert stored(app, sub).plan_id == sub.starter.id


def test_a_staged_change_keeps_the_current_plan_here_until_its_boundary(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(
        ChangeSubscriptionPlan(
            command_id="c1",
            org_id=sub.org_id,
            billing_account_id=sub.account_id,
            subscription_id=sub.subscription_id,
            plan="team",
        ),
        app,
    )
    app.clock.advance(stored(app, sub).current_period_end - app.clock.now() - timedelta(minutes=5))
    [claim] = claim_due_changes(ClaimDueChanges(10), app)
    applying = ApplyScheduledChange(command_id="apply:1", change_id=claim.change_id)
    assert apply_change(applying, app).state is ChangeState.STAGED

    synced = sync(app, sub.provider_id)

    assert "plan_id" not in synced["changes"]
    assert stored(app, sub).plan_id == sub.starter.id


def test_a_subscription_canceled_at_stripe_reads_canceled_and_skips_its_pending_change(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(
        ChangeSubscriptionPlan(
            command_id="c1",
            org_id=sub.org_id,
            billing_account_id=sub.account_id,
            subscription_id=sub.subscription_id,
            plan="team",
        ),
        app,
    )
    app.provider.cancel_subscription(sub.provider_id)

    sync(app, sub.provider_id)

    assert stored(app, sub).state is SubscriptionState.CANCELED
    [change] = app.db.rows("scheduled_changes")
    assert (change.state, change.reason) == (ChangeState.SKIPPED, "subscription_canceled")
    assert event_types(app)[-2:] == ["subscription.synced", "subscription.plan_change.skipped"]


def test_syncing_twice_changes_nothing_the_second_time(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.clock.advance(31 * DAY)
    sync(app, sub.provider_id)

    again = sync(app, sub.provider_id)

    assert (again["changes"], again["drift"]) == ({}, [])
    assert event_types(app) == ["subscription.synced"]


def test_a_subscription_gone_at_stripe_is_reported_missing_and_counted_as_read(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.provider.delete_subscription(sub.provider_id)

    synced = sync(app, sub.provider_id)

    assert synced["drift"] == ["missing"]
    assert stored(app, sub).synced_at == app.clock.now()
    assert stored(app, sub).state is SubscriptionState.ACTIVE  # reported, not decided here


def test_a_read_refused_for_another_reason_is_not_taken_for_a_subscription_gone_at_stripe(
    app: FakeApplication, sub: Subscribed
) -> None:
    read_before = stored(app, sub).synced_at
    refusal = rejected("plan", "Invalid expand: 'items.x'")
    app.provider.fail_next("get_subscription", refusal)

    with pytest.raises(InvalidArgument, match="Invalid expand") as raised:
        sync(app, sub.provider_id)

    assert not isinstance(raised.value, GoneAtProvider)
    assert stored(app, sub).synced_at == read_before  # not read: read again next time


def test_a_deleted_customer_marks_the_account_and_ends_its_subscriptions(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.provider.delete_customer("cus_seeded")

    synced = sync(app, "cus_seeded", "customer")

    assert synced["drift"] == ["customer_deleted"]
    account = app.db.row("billing_accounts", sub.account_id)
    assert account.customer_deleted_at == app.clock.now()
    assert account.state == "deleted"
    assert synced["changes"]["state"] == ["active", "deleted"]
    assert stored(app, sub).state is SubscriptionState.CANCELED
    assert "billing_account.customer_deleted" in event_types(app)


def test_an_object_that_is_not_ours_is_answered_as_such_without_a_read(
    app: FakeApplication, sub: Subscribed
) -> None:
    synced = sync(app, "sub_someone_else")

    assert synced["ours"] is False
    assert app.provider.calls_of("get_subscription") == []


def test_the_sweep_brings_in_line_what_stripe_lists_and_counts_what_it_corrected(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.provider.cancel_subscription(sub.provider_id)

    found = reconcile_with_stripe(ReconcileWithStripe(reads=10), app)

    assert found == {"status": 1}
    assert stored(app, sub).synced_at == app.clock.now()
    # Canceled: no longer swept.
    assert reconcile_with_stripe(ReconcileWithStripe(reads=10), app) == {}


# --- an upgrade that needs the customer's authentication ---------------------------------------


@pytest.fixture
def authenticating() -> tuple[FakeApplication, Subscribed]:
    """Immediate changes invoiced at once, for a customer whose bank asks for 3-D Secure."""
    app = FakeApplication(billing=FakeBillingPolicy(proration_behavior="always_invoice"))
    sub = subscribed(app)
    app.provider.require_authentication(sub.provider_id)
    return app, sub


def upgrade_now(
    app: FakeApplication,
    sub: Subscribed,
    command_id: str = "c1",
    *,
    plan: str = "team",
    immediate: bool = True,
) -> Any:
    return change_subscription_plan(
        ChangeSubscriptionPlan(
            command_id=command_id,
            org_id=sub.org_id,
            billing_account_id=sub.account_id,
            subscription_id=sub.subscription_id,
            plan=plan,
            immediate=immediate,
        ),
        app,
    )


def the_change(app: FakeApplication, answer: Any) -> ScheduledChange:
    found: ScheduledChange = app.db.row("scheduled_changes", answer.change["id"])
    return found


def test_an_upgrade_that_needs_authentication_is_held_at_stripe_and_answers_where_to_pay(
    authenticating: tuple[FakeApplication, Subscribed],
) -> None:
    app, sub = authenticating

    answer = upgrade_now(app, sub)

    assert answer.phase.plan_id == sub.starter.id  # not in effect until paid
    assert answer.change is not None
    assert answer.change["state"] == "awaiting_payment"
    assert answer.change["payment_url"]
    assert answer.change["payment_expires_at"]
    first, pending = (
        call for call in app.provider.calls if call.operation == "change_subscription_price"
    )
    assert first.arguments[-1] == "error_if_incomplete"
    assert pending.arguments[-1] == "pending_if_incomplete"
    assert pending.idempotency_key == f"{answer.change['id']}:pending"
    assert stored(app, sub).plan_id == sub.starter.id
    assert event_types(app)[-1] == "subscription.plan_change.awaiting_payment"
    assert upgrade_now(app, sub).change == answer.change  # a redelivery finds it as it is


def test_a_held_upgrade_takes_effect_when_the_customer_pays(
    authenticating: tuple[FakeApplication, Subscribed],
) -> None:
    app, sub = authenticating
    answer = upgrade_now(app, sub)
    app.provider.pay_pending_update(sub.provider_id)

    sync(app, sub.provider_id)

    assert stored(app, sub).plan_id == sub.team.id
    change = the_change(app, answer)
    assert change.state is ChangeState.APPLIED
    assert "subscription.plan_changed" in event_types(app)


def test_a_held_upgrade_lapses_when_stripe_expires_it_unpaid(
    authenticating: tuple[FakeApplication, Subscribed],
) -> None:
    app, sub = authenticating
    answer = upgrade_now(app, sub)
    app.provider.expire_pending_update(sub.provider_id)

    sync(app, sub.provider_id)

    assert stored(app, sub).plan_id == sub.starter.id
    change = the_change(app, answer)
    assert change.state is ChangeState.SKIPPED
    assert change.reason == ChangeReason.PAYMENT_NOT_COMPLETED.value
    assert event_types(app)[-1] == "subscription.plan_change.skipped"


def test_a_sync_while_the_customer_has_not_paid_leaves_the_held_upgrade_waiting(
    authenticating: tuple[FakeApplication, Subscribed],
) -> None:
    app, sub = authenticating
    answer = upgrade_now(app, sub)

    sync(app, sub.provider_id)

    change = the_change(app, answer)
    assert change.state is ChangeState.AWAITING_PAYMENT
    assert stored(app, sub).plan_id == sub.starter.id


@pytest.mark.parametrize("immediate", [True, False], ids=["now", "at period end"])
def test_no_other_change_is_made_while_an_upgrade_awaits_the_customer_s_payment(
    authenticating: tuple[FakeApplication, Subscribed], immediate: bool
) -> None:
    app, sub = authenticating
    upgrade_now(app, sub)

    with pytest.raises(FailedPrecondition) as raised:
        upgrade_now(app, sub, "c2", plan="scale", immediate=immediate)

    assert raised.value.details[0]["reason"] == "CHANGE_AWAITING_PAYMENT"

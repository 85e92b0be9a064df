"""The plan change handlers, on in-memory ports: every decision of a change request and of
applying a change."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from application.handlers.operations.sweeps import BULK_MESSAGE_PRIORITY, publish_due_changes
from application.handlers.subscriptions import due_changes
from application.handlers.subscriptions.due_changes import claim_due_changes
from application.handlers.subscriptions.plan_changes import change_subscription_plan
from application.handlers.subscriptions.previews import preview_plan_change
from application.handlers.subscriptions.scheduled_changes import apply_scheduled_change
from application.handlers.subscriptions.staged_withdrawals import finish_staged_withdrawal
from application.requests.sweeps import ClaimDueChanges, PublishDueChanges
from domain.errors import (
    FailedPrecondition,
    GoneAtProvider,
    InvalidArgument,
    NotFound,
    PaymentFailed,
    TransientError,
)
from domain.subscriptions.change_commands import (
    ApplyScheduledChange,
    ChangeSubscriptionPlan,
    FinishStagedWithdrawal,
)
from domain.subscriptions.change_previews import PreviewPlanChange
from domain.subscriptions.change_states import ChangeKind, ChangeReason, ChangeState
from domain.subscriptions.plans import PlanInterval
from domain.subscriptions.scheduled_changes import ScheduledChange, change_id_for
from domain.subscriptions.subscription import Subscription, SubscriptionState
from tests.support.fakes.application import FakeApplication, FakeBillingPolicy
from tests.support.fakes.data import Subscribed, a_plan, subscribed
from tests.support.fakes.database import DatabaseUnavailable
from tests.support.fakes.provider_requests import rejected

DAY = timedelta(days=1)
SECOND = timedelta(seconds=1)


@pytest.fixture
def app() -> FakeApplication:
    return FakeApplication()


@pytest.fixture
def sub(app: FakeApplication) -> Subscribed:
    return subscribed(app)


def request(sub: Subscribed, command_id: str = "c1", **fields: Any) -> ChangeSubscriptionPlan:
    values: dict[str, Any] = {
        "command_id": command_id,
        "org_id": sub.org_id,
        "billing_account_id": sub.account_id,
        "subscription_id": sub.subscription_id,
        **fields,
    }
    return ChangeSubscriptionPlan(**values)


def changes(app: FakeApplication, sub: Subscribed) -> list[ScheduledChange]:
    """The subscription's changes, newest first."""
    with app.unit_of_work() as uow:
        return uow.scheduled_changes.for_subscription(sub.subscription_id)


def subscription(app: FakeApplication, sub: Subscribed) -> Subscription:
    stored: Subscription = app.db.row("subscriptions", sub.subscription_id)
    return stored


def updates(app: FakeApplication, outcome: str | None = None) -> list[Any]:
    return app.provider.calls_of("change_subscription_price", outcome)


def apply(app: FakeApplication, change_id: str, command_id: str = "apply:1") -> dict[str, Any]:
    outcome = apply_scheduled_change(
        ApplyScheduledChange(command_id=command_id, change_id=change_id), app
    )
    return outcome.change


# --- now --------------------------------------------------------------------------------------


def test_an_immediate_change_reaches_the_provider_at_once_and_answers_the_new_phase(
    app: FakeApplication, sub: Subscribed
) -> None:
    changed = change_subscription_plan(request(sub, plan="team", immediate=True), app)

    assert (changed.phase.plan_id, changed.phase.effective_at) == (sub.team.id, app.clock.now())
    [update] = updates(app, "executed")
    [made] = changes(app, sub)
    assert update.idempotency_key == f"{made.id}:apply"
    # Prorated as of the change's own time; nothing invoiced now, so no payment to wait for.
    assert update.arguments[2:] == ("price_team", "create_prorations", app.clock.now(), None)
    assert (made.kind, made.state, made.id) == (
        ChangeKind.IMMEDIATE,
        ChangeState.APPLIED,
        change_id_for("c1"),
    )
    assert made.apply_lag_seconds == 0.0
    assert subscription(app, sub).plan_id == sub.team.id
    assert app.provider.subscriptions[sub.provider_id].price_id == "price_team"


def test_an_immediate_change_supersedes_the_pending_change(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, "c1", plan="scale"), app)
    app.clock.advance(SECOND)

    changed = change_subscription_plan(request(sub, "c2", plan="team", immediate=True), app)

    now, earlier = changes(app, sub)
    assert (earlier.state, earlier.reason) == (ChangeState.CANCELED, "superseded")
    assert now.state is ChangeState.APPLIED
    assert changed.canceled_changes == [earlier.id]
    assert subscription(app, sub).plan_id == sub.team.id


def test_an_immediate_change_the_provider_refuses_fails_and_the_pending_change_stands(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.provider.deactivate_price("price_scale")
    change_subscription_plan(request(sub, "c1", plan="team"), app)
    app.clock.advance(SECOND)

    with pytest.raises(InvalidArgument) as raised:
        change_subscription_plan(request(sub, "c2", plan="scale", immediate=True), app)

    assert "inactive" in raised.value.message
    refused, pending = changes(app, sub)
    assert refused.state is ChangeState.SKIPPED
    assert refused.reason is not None
    assert refused.reason.startswith("provider_rejected: ")
    assert (pending.state, pending.target_plan_id) == (ChangeState.SCHEDULED, sub.team.id)
    assert subscription(app, sub).plan_id == sub.starter.id


def test_a_redelivered_refused_change_is_refused_again_without_a_new_call(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.provider.deactivate_price("price_team")
    with pytest.raises(InvalidArgument):
        change_subscription_plan(request(sub, plan="team", immediate=True), app)
    calls = len(app.provider.calls)

    with pytest.raises(InvalidArgument, match="rejected"):
        change_subscription_plan(request(sub, plan="team", immediate=True), app)

    assert len(app.provider.calls) == calls


def test_transient_provider_failures_leave_the_change_applying_and_retries_use_one_key(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.provider.fail_next("change_subscription_price", TransientError("stripe: 503"), times=2)
    for _ in range(2):
        with pytest.raises(TransientError):
            change_subscription_plan(request(sub, plan="team", immediate=True), app)
        [pending] = changes(app, sub)
        assert pending.state is ChangeState.APPLYING
        assert pending.first_sent_at is not None

    change_subscription_plan(request(sub, plan="team", immediate=True), app)

    assert len(updates(app)) == 3
    assert len({call.idempotency_key for call in updates(app)}) == 1
    assert len(updates(app, "executed")) == 1
    [applied] = changes(app, sub)
    assert applied.state is ChangeState.APPLIED


def test_an_immediate_change_a_sweep_finished_announces_the_request_that_asked_for_it(
    app: FakeApplication, sub: Subscribed
) -> None:
    """The request's worker died mid-way (here: its call failed, and nothing retried it):
    once the change's lease runs out, beat's sweep claims it and its own command applies it.
    The event still names the request, which its sender waits for."""
    app.provider.fail_next("change_subscription_price", TransientError("stripe: 503"))
    with pytest.raises(TransientError):
        change_subscription_plan(request(sub, "c1", plan="team", immediate=True), app)
    app.clock.advance(FakeBillingPolicy().change_lease + timedelta(seconds=1))
    [claim] = claim_due_changes(ClaimDueChanges(10), app)

    apply(app, claim.change_id, command_id=f"apply:{claim.change_id}:{claim.number}")

    [changed] = [row for row in app.db.rows("events") if row.type == "subscription.plan_changed"]
    assert changed.document["command_id"] == "c1"


def test_a_change_sent_before_is_sent_again_under_its_key_though_our_row_turned_past_due(
    app: FakeApplication, sub: Subscribed
) -> None:
    """Its first write reached the provider, the answer was lost; meanwhile our row went
    past due. The retry asks the provider again under the key (a replay) and records what
    the provider did, instead of skipping a change the provider made."""
    app.provider.fail_next(
        "change_subscription_price", TransientError("stripe: dropped"), after_execution=True
    )
    with pytest.raises(TransientError):
        change_subscription_plan(request(sub, plan="team", immediate=True), app)
    stale = subscription(app, sub)
    stale.state = SubscriptionState.PAST_DUE
    app.db.seed(stale)

    change_subscription_plan(request(sub, plan="team", immediate=True), app)

    [applied] = changes(app, sub)
    assert applied.state is ChangeState.APPLIED
    assert subscription(app, sub).plan_id == sub.team.id
    assert len(updates(app, "executed")) == 1
    assert len({call.idempotency_key for call in updates(app)}) == 1


def test_a_subscription_canceled_at_the_provider_cannot_change_plan_now(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.provider.cancel_subscription(sub.provider_id)

    with pytest.raises(FailedPrecondition) as raised:
        change_subscription_plan(request(sub, plan="team", immediate=True), app)

    assert raised.value.details[0]["reason"] == "SUBSCRIPTION_NOT_CHANGEABLE"
    [skipped] = changes(app, sub)
    assert (skipped.state, skipped.reason) == (ChangeState.SKIPPED, "subscription_canceled")
    assert subscription(app, sub).state is SubscriptionState.CANCELED
    assert updates(app, "executed") == []


def test_a_change_being_applied_makes_a_new_request_wait_for_it(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.provider.fail_next("change_subscription_price", TransientError("stripe: 503"))
    with pytest.raises(TransientError):
        change_subscription_plan(request(sub, "c1", plan="team", immediate=True), app)

    with pytest.raises(TransientError, match="being applied"):
        change_subscription_plan(request(sub, "c2", plan="scale"), app)


# --- at the period's end ----------------------------------------------------------------------


def test_an_end_of_period_change_answers_the_period_end_and_leaves_the_provider_alone(
    app: FakeApplication, sub: Subscribed
) -> None:
    changed = change_subscription_plan(request(sub, plan="team"), app)

    period_end = app.provider.subscriptions[sub.provider_id].current_period_end
    assert (changed.phase.plan_id, changed.phase.effective_at) == (sub.team.id, period_end)
    [scheduled] = changes(app, sub)
    assert (scheduled.state, scheduled.kind) == (ChangeState.SCHEDULED, ChangeKind.END_OF_PERIOD)
    assert scheduled.proration_behavior == "none"
    assert updates(app) == []
    assert len(app.provider.calls_of("get_subscription")) == 1
    assert subscription(app, sub).plan_id == sub.starter.id


def test_an_end_of_period_change_takes_the_period_the_provider_has_now(
    app: FakeApplication, sub: Subscribed
) -> None:
    remote = app.provider.subscriptions[sub.provider_id]
    renewed = replace(
        remote,
        current_period_start=remote.current_period_end,
        current_period_end=remote.current_period_end + 30 * DAY,
    )
    app.provider.add_subscription(renewed)

    changed = change_subscription_plan(request(sub, plan="team"), app)

    assert changed.phase.effective_at == renewed.current_period_end
    assert subscription(app, sub).current_period_end == renewed.current_period_end


def test_a_new_end_of_period_request_replaces_the_pending_change(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, "c1", plan="team"), app)
    app.clock.advance(SECOND)

    second = change_subscription_plan(request(sub, "c2", plan="scale"), app)

    assert second.phase.plan_id == sub.scale.id
    newest, replaced = changes(app, sub)
    assert (replaced.state, replaced.reason) == (ChangeState.CANCELED, "replaced")
    assert (newest.state, newest.target_plan_id) == (ChangeState.SCHEDULED, sub.scale.id)
    assert second.canceled_changes == [replaced.id]


def test_a_redelivered_end_of_period_request_finds_its_change_again(
    app: FakeApplication, sub: Subscribed
) -> None:
    first = change_subscription_plan(request(sub, plan="team"), app)
    second = change_subscription_plan(request(sub, plan="team"), app)

    assert second == first
    assert len(changes(app, sub)) == 1


def test_a_subscription_canceled_at_the_provider_cannot_change_plan_at_period_end(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.provider.cancel_subscription(sub.provider_id)

    with pytest.raises(FailedPrecondition):
        change_subscription_plan(request(sub, plan="team"), app)

    assert subscription(app, sub).state is SubscriptionState.CANCELED  # kept, then refused
    assert changes(app, sub) == []


def test_canceling_upcoming_changes_answers_the_current_phase_and_may_be_repeated(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, "c1", plan="team"), app)
    calls = len(app.provider.calls)

    first = change_subscription_plan(request(sub, "c2", cancel_upcoming_changes=True), app)
    again = change_subscription_plan(request(sub, "c3", cancel_upcoming_changes=True), app)

    current = subscription(app, sub)
    assert (first.phase.plan_id, first.phase.effective_at) == (
        sub.starter.id,
        current.current_period_start,
    )
    [canceled] = changes(app, sub)
    assert (canceled.state, canceled.reason) == (ChangeState.CANCELED, "canceled_on_request")
    assert first.canceled_changes == [canceled.id]
    assert (again.phase, again.canceled_changes) == (first.phase, [])
    assert len(app.provider.calls) == calls  # never reaches the provider


# --- requests refused -------------------------------------------------------------------------


def test_an_unknown_plan_is_not_found(app: FakeApplication, sub: Subscribed) -> None:
    with pytest.raises(NotFound):
        change_subscription_plan(request(sub, plan="nope"), app)


def test_a_plan_is_found_by_its_id_as_well_as_its_name(
    app: FakeApplication, sub: Subscribed
) -> None:
    changed = change_subscription_plan(request(sub, plan=sub.team.id), app)

    assert changed.phase.plan_id == sub.team.id


def test_the_current_plan_is_an_invalid_argument(app: FakeApplication, sub: Subscribed) -> None:
    with pytest.raises(InvalidArgument):
        change_subscription_plan(request(sub, plan="starter", immediate=True), app)

    assert app.provider.calls == []


def test_a_plan_in_another_currency_is_an_invalid_argument(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.db.seed(a_plan("euro", "price_euro", currency="eur"))

    with pytest.raises(InvalidArgument, match="eur"):
        change_subscription_plan(request(sub, plan="euro", immediate=True), app)


@pytest.mark.parametrize("elsewhere", [{"org_id": "org_other"}, {"billing_account_id": "ba_other"}])
def test_a_subscription_not_under_the_org_and_billing_account_is_not_found(
    app: FakeApplication, sub: Subscribed, elsewhere: dict[str, str]
) -> None:
    with pytest.raises(NotFound):
        change_subscription_plan(request(sub, plan="team", **elsewhere), app)


# --- applying a due change --------------------------------------------------------------------


def test_a_period_end_change_is_made_at_the_provider_an_hour_ahead_and_takes_effect_at_the_end(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)
    boundary = scheduled.effective_at
    app.clock.advance(boundary - app.clock.now() - timedelta(hours=1) - SECOND)
    assert claim_due_changes(ClaimDueChanges(10), app) == []  # not before the lead time

    app.clock.advance(2 * SECOND)
    [claim] = claim_due_changes(ClaimDueChanges(10), app)
    staged = apply(app, claim.change_id)
    again = apply(app, claim.change_id, "apply:2")

    assert (claim.change_id, claim.number) == (scheduled.id, 1)
    assert staged["state"] == again["state"] == "staged"
    [update] = updates(app)
    assert update.idempotency_key == f"{scheduled.id}:apply"
    assert update.arguments[3:] == ("none", None, None)  # the renewal bills the new price
    assert app.provider.subscriptions[sub.provider_id].price_id == "price_team"
    assert subscription(app, sub).plan_id == sub.starter.id  # here, until the boundary

    # Staged: nothing more to claim before the boundary.
    assert publish_due_changes(PublishDueChanges(), app).published == 0
    assert subscription(app, sub).plan_id == sub.starter.id
    app.clock.advance(timedelta(hours=1))
    publish_due_changes(PublishDueChanges(), app)

    [applied] = changes(app, sub)
    assert applied.state is ChangeState.APPLIED
    assert applied.apply_lag_seconds == 1.0
    now = subscription(app, sub)
    assert now.plan_id == sub.team.id
    assert (now.current_period_start, now.current_period_end) == (
        boundary,
        boundary + 30 * DAY,
    )
    assert len(updates(app)) == 1  # taking effect calls nobody


def test_a_change_claimed_after_the_provider_renewed_is_corrected_from_the_new_period_at_once(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)
    app.clock.advance(31 * DAY)  # workers down across the boundary

    [claim] = claim_due_changes(ClaimDueChanges(10), app)
    applied = apply(app, claim.change_id)

    [update] = updates(app)
    assert update.idempotency_key == f"{scheduled.id}:apply-late"
    assert update.arguments[3:5] == ("always_invoice", scheduled.effective_at)
    assert applied["state"] == "applied"
    assert applied["apply_lag_seconds"] == (1 * DAY).total_seconds()  # the lag is visible
    assert subscription(app, sub).plan_id == sub.team.id


def test_a_change_follows_a_boundary_the_provider_moved_and_announces_the_new_time(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)
    extended = scheduled.effective_at + 14 * DAY
    app.provider.subscriptions[sub.provider_id] = replace(
        app.provider.subscriptions[sub.provider_id], current_period_end=extended
    )  # a trial extended at the provider
    app.clock.advance(scheduled.effective_at - app.clock.now() - timedelta(minutes=30))

    [claim] = claim_due_changes(ClaimDueChanges(10), app)
    moved = apply(app, claim.change_id)

    assert (moved["state"], moved["effective_at"]) == ("scheduled", extended.isoformat())
    assert updates(app) == []  # the provider is not touched before the new boundary
    last = max(app.db.rows("events"), key=lambda row: row.sequence).document
    assert last["type"] == "subscription.plan_change.scheduled"
    assert last["data"]["effective_at"] == extended.isoformat().replace("+00:00", "Z")


def test_a_change_falling_due_where_the_subscription_ends_is_skipped_before_the_boundary(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)
    app.provider.subscriptions[sub.provider_id] = replace(
        app.provider.subscriptions[sub.provider_id], cancel_at=scheduled.effective_at
    )
    app.clock.advance(scheduled.effective_at - app.clock.now() - timedelta(minutes=30))

    [claim] = claim_due_changes(ClaimDueChanges(10), app)
    skipped = apply(app, claim.change_id)

    assert (skipped["state"], skipped["reason"]) == ("skipped", "subscription_ends")
    assert updates(app) == []


def test_a_change_to_another_interval_is_applied_when_made_and_credits_the_unused_lead(
    app: FakeApplication, sub: Subscribed
) -> None:
    annual = a_plan("team-annual", "price_team_annual", now=app.clock.now())
    annual.interval = PlanInterval.YEAR
    app.db.seed(annual)
    app.provider.add_price("price_team_annual")
    change_subscription_plan(request(sub, plan="team-annual"), app)
    [scheduled] = changes(app, sub)
    app.clock.advance(scheduled.effective_at - app.clock.now() - timedelta(minutes=30))

    [claim] = claim_due_changes(ClaimDueChanges(10), app)
    applied = apply(app, claim.change_id)

    [update] = updates(app)
    assert update.arguments[3] == "create_prorations"
    assert applied["state"] == "applied"
    assert subscription(app, sub).plan_id == annual.id


def test_an_apply_command_for_a_change_not_yet_due_is_refused_and_sends_nothing(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)

    with pytest.raises(FailedPrecondition) as raised:
        apply(app, scheduled.id)

    assert raised.value.details[0]["reason"] == "CHANGE_NOT_DUE"
    [still] = changes(app, sub)
    assert still.state is ChangeState.SCHEDULED
    assert updates(app) == []


def test_a_due_change_published_without_a_claim_is_applied(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)
    app.clock.advance(31 * DAY)

    assert apply(app, scheduled.id)["state"] == "applied"


def test_a_due_change_of_a_subscription_canceled_at_the_provider_is_skipped(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)
    app.provider.cancel_subscription(sub.provider_id)
    app.clock.advance(31 * DAY)

    skipped = apply(app, scheduled.id)

    assert (skipped["state"], skipped["reason"]) == ("skipped", "subscription_canceled")
    assert subscription(app, sub).state is SubscriptionState.CANCELED
    # The boundary is read before anything is sent: nothing is sent.
    assert updates(app) == []


def test_a_due_change_of_a_subscription_known_to_be_over_is_skipped_without_a_call(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)
    ended = subscription(app, sub)
    ended.state = SubscriptionState.ENDED
    app.db.seed(ended)
    app.clock.advance(31 * DAY)
    calls = len(app.provider.calls)

    skipped = apply(app, scheduled.id)

    assert (skipped["state"], skipped["reason"]) == ("skipped", "subscription_ended")
    assert len(app.provider.calls) == calls


def test_a_due_change_the_provider_refuses_is_skipped_with_its_words(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)
    app.provider.deactivate_price("price_team")
    app.clock.advance(31 * DAY)

    with pytest.raises(InvalidArgument):
        apply(app, scheduled.id)

    [refused] = changes(app, sub)
    assert refused.state is ChangeState.SKIPPED
    assert refused.reason is not None
    assert "inactive" in refused.reason


def test_a_due_change_of_a_subscription_gone_at_the_provider_is_recorded_as_refused(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)
    app.provider.delete_subscription(sub.provider_id)
    app.clock.advance(31 * DAY)

    with pytest.raises(GoneAtProvider, match="No such subscription"):
        apply(app, scheduled.id)

    [refused] = changes(app, sub)
    assert refused.state is ChangeState.SKIPPED
    assert refused.reason is not None
    assert refused.reason.startswith("provider_rejected: ")


def test_a_due_change_whose_read_is_refused_for_another_reason_is_kept_not_skipped_as_gone(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)
    app.clock.advance(31 * DAY)
    # A refusal that says nothing of the subscription being gone (a bad request of ours).
    app.provider.fail_next("get_subscription", rejected("plan", "Invalid expand: 'items.x'"))

    with pytest.raises(InvalidArgument, match="Invalid expand") as raised:
        apply(app, scheduled.id)

    assert not isinstance(raised.value, GoneAtProvider)
    [kept] = changes(app, sub)
    assert kept.state is ChangeState.APPLYING  # claimed: applied again once its lease ends
    assert app.provider.calls_of("change_subscription_price") == []
    # The read answers again: the change goes through.
    assert apply(app, scheduled.id, command_id="apply:2")["state"] == "applied"


def test_a_change_first_sent_longer_ago_than_the_key_window_reads_the_provider_first(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)
    app.clock.advance(31 * DAY)
    # The update went through but its answer was lost, and the retry comes a day later.
    app.provider.fail_next(
        "change_subscription_price", TransientError("lost"), after_execution=True
    )
    with pytest.raises(TransientError):
        apply(app, scheduled.id)
    app.clock.advance(25 * timedelta(hours=1))

    applied = apply(app, scheduled.id, "apply:2")

    assert applied["state"] == "applied"
    assert len(updates(app)) == 1  # the read showed it went through: nothing sent again
    assert subscription(app, sub).plan_id == sub.team.id


def test_the_sweep_publishes_one_bulk_apply_command_per_due_change(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)
    app.clock.advance(31 * DAY)

    assert publish_due_changes(PublishDueChanges(), app).published == 1
    # Claimed: the next sweep leaves it.
    assert publish_due_changes(PublishDueChanges(), app).published == 0

    [message] = app.published.published
    assert message.command_id == f"apply:{scheduled.id}:1"
    assert (message.task_name, message.priority) == (
        ApplyScheduledChange.TASK_NAME,
        BULK_MESSAGE_PRIORITY,
    )


def test_a_sweep_out_of_time_after_a_full_chunk_asks_for_the_next_run_now(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.policy = replace(app.policy, due_changes_run_seconds=0.0)
    change_subscription_plan(request(sub, plan="team"), app)
    app.clock.advance(31 * DAY)

    first = publish_due_changes(PublishDueChanges(chunk_size=1), app)
    second = publish_due_changes(PublishDueChanges(chunk_size=1, claimed_before=1), app)

    assert (first.claimed, first.published, first.more) == (1, 1, True)
    assert (second.claimed, second.published, second.more) == (0, 0, False)  # nothing left
    assert len(app.published.published) == 1


def test_a_sweep_with_time_left_claims_chunk_after_chunk_until_nothing_is_due(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.policy = replace(app.policy, due_changes_run_seconds=60.0)
    change_subscription_plan(request(sub, plan="team"), app)
    app.clock.advance(31 * DAY)

    outcome = publish_due_changes(PublishDueChanges(chunk_size=1), app)

    assert (outcome.claimed, outcome.published, outcome.more) == (1, 1, False)


def test_the_runs_of_one_sweep_claim_no_more_than_its_batch_together(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.policy = replace(app.policy, due_changes_run_seconds=0.0, due_changes_batch_size=3)
    change_subscription_plan(request(sub, plan="team"), app)
    app.clock.advance(31 * DAY)

    spent = publish_due_changes(PublishDueChanges(chunk_size=1, claimed_before=3), app)
    last = publish_due_changes(PublishDueChanges(chunk_size=1, claimed_before=2), app)

    assert (spent.claimed, spent.more) == (0, False)  # the batch went to the earlier runs
    assert (last.claimed, last.more) == (1, False)  # its share taken: beat's next tick goes on


def test_a_claim_that_could_not_be_published_is_taken_by_the_next_sweep(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    app.clock.advance(31 * DAY)
    app.published.fail_next(ConnectionError("redis is down"))

    assert publish_due_changes(PublishDueChanges(), app).published == 0
    app.clock.advance(timedelta(seconds=1))
    assert publish_due_changes(PublishDueChanges(), app).published == 1

    [message] = app.published.published
    assert message.command_id.endswith(":2")  # claimed again, a command of its own


def test_claims_whose_batch_could_not_go_are_released_and_taken_by_the_next_sweep(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    app.clock.advance(31 * DAY)
    app.published.fail_next_batch(ConnectionError("redis went away"))

    assert publish_due_changes(PublishDueChanges(), app).published == 0
    assert app.published.published == []
    app.clock.advance(timedelta(seconds=1))
    assert publish_due_changes(PublishDueChanges(), app).published == 1

    [message] = app.published.published
    assert message.command_id.endswith(":2")


def test_claims_whose_commit_answer_was_lost_are_taken_back_by_the_same_sweep_not_after_the_lease(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)
    app.clock.advance(31 * DAY)
    app.db.lose_next_commit_answers(1)  # the claim went through; its answer did not

    [claim] = claim_due_changes(ClaimDueChanges(10), app)

    assert (claim.change_id, claim.number) == (scheduled.id, 1)  # its own, not a second one
    assert claim_due_changes(ClaimDueChanges(10), app) == []


def test_a_sweep_whose_claim_did_not_commit_claims_again_once_the_database_writes(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)
    app.clock.advance(31 * DAY)
    app.db.fail_next_commits(2)

    [claim] = claim_due_changes(ClaimDueChanges(10), app)

    assert (claim.change_id, claim.number) == (scheduled.id, 1)


def test_a_sweep_that_cannot_claim_within_its_patience_gives_up_and_claims_nothing(
    app: FakeApplication, sub: Subscribed, monkeypatch: pytest.MonkeyPatch
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    app.clock.advance(31 * DAY)
    monkeypatch.setattr(due_changes, "CLAIM_PATIENCE_SECONDS", 0.3)
    app.db.fail_next_commits(100)

    with pytest.raises(DatabaseUnavailable):
        claim_due_changes(ClaimDueChanges(10), app)


# --- the provider's truth, payments and previews -----------------------------------------------


@pytest.fixture
def invoicing_app() -> FakeApplication:
    """Immediate changes invoiced at once, as a payment is then collected."""
    return FakeApplication(billing=FakeBillingPolicy(proration_behavior="always_invoice"))


def test_an_immediate_change_whose_invoice_is_declined_makes_nothing_and_says_so(
    invoicing_app: FakeApplication,
) -> None:
    sub = subscribed(invoicing_app)
    invoicing_app.provider.decline_payments(sub.provider_id)

    with pytest.raises(PaymentFailed) as raised:
        change_subscription_plan(request(sub, plan="team", immediate=True), invoicing_app)

    assert raised.value.details[0]["reason"] == "PAYMENT_FAILED"
    [update] = updates(invoicing_app)
    assert update.arguments[3:] == (
        "always_invoice",
        invoicing_app.clock.now(),
        "error_if_incomplete",
    )
    [skipped] = changes(invoicing_app, sub)
    assert skipped.state is ChangeState.SKIPPED
    assert (skipped.reason or "").startswith("payment_failed: ")
    # Stripe's price and ours agree: both still the old plan.
    assert invoicing_app.provider.subscriptions[sub.provider_id].price_id == "price_starter"
    assert subscription(invoicing_app, sub).plan_id == sub.starter.id


def test_a_change_the_provider_made_is_applied_whatever_the_subscriptions_status(
    app: FakeApplication, sub: Subscribed
) -> None:
    change_subscription_plan(request(sub, plan="team"), app)
    [scheduled] = changes(app, sub)
    app.provider.decline_payments(sub.provider_id)
    app.clock.advance(31 * DAY)  # late: the correction is invoiced now, and declined

    applied = apply(app, scheduled.id)

    assert applied["state"] == "applied"
    now = subscription(app, sub)
    assert (now.plan_id, now.state) == (sub.team.id, SubscriptionState.PAST_DUE)
    assert app.provider.subscriptions[sub.provider_id].price_id == "price_team"


@pytest.mark.parametrize("immediate", [False, True], ids=["at period end", "now"])
def test_a_subscription_stored_past_due_that_the_provider_shows_active_accepts_a_change(
    app: FakeApplication, sub: Subscribed, immediate: bool
) -> None:
    stale = subscription(app, sub)
    stale.state = SubscriptionState.PAST_DUE  # the customer paid since
    app.db.seed(stale)

    changed = change_subscription_plan(request(sub, plan="team", immediate=immediate), app)

    assert changed.phase.plan_id == sub.team.id
    assert subscription(app, sub).state is SubscriptionState.ACTIVE


def staged(app: FakeApplication, sub: Subscribed, before_boundary: timedelta) -> ScheduledChange:
    change_subscription_plan(request(sub, "c1", plan="team"), app)
    [scheduled] = changes(app, sub)
    app.clock.advance(scheduled.effective_at - app.clock.now() - timedelta(minutes=30))
    [claim] = claim_due_changes(ClaimDueChanges(10), app)
    apply(app, claim.change_id)
    app.clock.advance(timedelta(minutes=30) - before_boundary)
    [change] = changes(app, sub)
    assert change.state is ChangeState.STAGED
    return change


@pytest.mark.parametrize(
    "attempt",
    [
        {"plan": "scale"},
        {"cancel_upcoming_changes": True},
        {"plan": "scale", "immediate": True},
    ],
    ids=["replaced", "canceled", "superseded"],
)
def test_a_staged_change_is_withdrawn_at_the_provider_without_proration_before_the_guard(
    app: FakeApplication, sub: Subscribed, attempt: dict[str, Any]
) -> None:
    change = staged(app, sub, timedelta(minutes=30))

    answer = change_subscription_plan(request(sub, "c2", **attempt), app)

    assert change.id in answer.canceled_changes
    [withdrawn] = [u for u in updates(app) if u.idempotency_key == f"{change.id}:withdraw"]
    assert withdrawn.arguments[2:4] == ("price_starter", "none")
    assert app.provider.subscriptions[sub.provider_id].price_id != "price_team"
    [old] = [c for c in changes(app, sub) if c.id == change.id]
    assert old.state is ChangeState.CANCELED


def test_a_staged_change_is_not_withdrawn_in_the_last_seconds_before_its_boundary(
    app: FakeApplication, sub: Subscribed
) -> None:
    guard = FakeBillingPolicy().staged_change_guard
    staged(app, sub, guard / 2)

    for attempt in (
        request(sub, "c2", plan="scale"),
        request(sub, "c3", cancel_upcoming_changes=True),
        request(sub, "c4", plan="scale", immediate=True),
    ):
        with pytest.raises(FailedPrecondition) as raised:
            change_subscription_plan(attempt, app)
        assert raised.value.details[0]["reason"] == "CHANGE_ALREADY_STAGED"
        assert "withdrawable_until" in raised.value.details[0]["metadata"]
    [still] = changes(app, sub)
    assert still.state is ChangeState.STAGED


def test_a_withdrawal_given_up_after_its_write_reached_the_provider_is_finished_not_applied(
    app: FakeApplication, sub: Subscribed
) -> None:
    """Seed 2014: the cancel's write reached the provider, its answer was lost, and the
    request gave up (its retries spent). Taking effect here would put our row on the staged
    plan while the provider holds the old price: beat finishes the withdrawal instead."""
    change = staged(app, sub, timedelta(minutes=30))
    app.provider.fail_next(
        "change_subscription_price", TransientError("stripe: dropped"), after_execution=True
    )
    with pytest.raises(TransientError):
        change_subscription_plan(request(sub, "c2", cancel_upcoming_changes=True), app)
    assert app.provider.subscriptions[sub.provider_id].price_id == "price_starter"
    app.clock.advance(timedelta(minutes=31))  # past the boundary, and the withdrawal's lease

    publish_due_changes(PublishDueChanges(), app)

    [held] = changes(app, sub)
    assert held.state is ChangeState.STAGED  # not taken effect
    assert subscription(app, sub).plan_id == sub.starter.id
    [message] = app.published.published
    assert (message.task_name, message.priority) == (
        FinishStagedWithdrawal.TASK_NAME,
        BULK_MESSAGE_PRIORITY,
    )
    finish = FinishStagedWithdrawal(command_id=message.command_id, change_id=change.id)

    outcome = finish_staged_withdrawal(finish, app)

    assert outcome.change["state"] == "canceled"
    assert outcome.change["reason"] == ChangeReason.WITHDRAWAL_FINISHED.value
    withdrawals = [u for u in updates(app) if u.idempotency_key == f"{change.id}:withdraw"]
    assert len(withdrawals) == 2  # the lost answer, then its replay
    assert len([u for u in withdrawals if u in updates(app, "executed")]) == 1
    assert subscription(app, sub).plan_id == sub.starter.id
    # Finished: nothing more to finish, and a repeated command changes nothing.
    publish_due_changes(PublishDueChanges(), app)
    assert len(app.published.published) == 1
    assert finish_staged_withdrawal(finish, app).change["state"] == "canceled"
    assert len(updates(app)) == len(withdrawals) + 1  # and the staging write


def test_a_withdrawal_under_way_is_neither_applied_nor_finished_before_its_lease_runs_out(
    app: FakeApplication, sub: Subscribed
) -> None:
    change = staged(app, sub, timedelta(minutes=30))
    app.provider.fail_next("change_subscription_price", TransientError("stripe: 503"))
    with pytest.raises(TransientError):
        change_subscription_plan(request(sub, "c2", cancel_upcoming_changes=True), app)
    app.clock.advance(timedelta(minutes=14))

    publish_due_changes(PublishDueChanges(), app)

    assert app.published.published == []
    [held] = changes(app, sub)
    assert held.id == change.id
    assert held.is_withdrawing


def test_a_preview_answers_the_provider_s_proration_at_a_whole_second_and_changes_nothing(
    invoicing_app: FakeApplication,
) -> None:
    sub = subscribed(invoicing_app)
    invoicing_app.clock.advance(10 * DAY + timedelta(microseconds=500))

    preview = preview_plan_change(
        PreviewPlanChange(
            command_id="p1",
            org_id=sub.org_id,
            billing_account_id=sub.account_id,
            subscription_id=sub.subscription_id,
            plan="team",
        ),
        invoicing_app,
    )

    assert preview.proration_date == invoicing_app.clock.now().replace(microsecond=0)
    assert (preview.billed, preview.currency) == ("now", "usd")
    assert [line["amount"] for line in preview.lines] == [-667, 667]  # 20 of 30 days of 1000
    assert changes(invoicing_app, sub) == []
    assert updates(invoicing_app) == []


def test_an_immediate_change_prorated_as_of_a_time_outside_the_period_names_the_field(
    app: FakeApplication, sub: Subscribed
) -> None:
    future = app.clock.now() + DAY

    with pytest.raises(InvalidArgument) as raised:
        change_subscription_plan(
            request(sub, plan="team", immediate=True, proration_date=future), app
        )

    assert raised.value.details[0]["fieldViolations"][0]["field"] == "proration_date"
    assert updates(app) == []


def test_a_declined_immediate_change_leaves_the_period_end_change_it_superseded_standing(
    invoicing_app: FakeApplication,
) -> None:
    sub = subscribed(invoicing_app)
    change_subscription_plan(request(sub, "c1", plan="team"), invoicing_app)
    invoicing_app.provider.decline_payments(sub.provider_id)

    with pytest.raises(PaymentFailed):
        change_subscription_plan(request(sub, "c2", plan="scale", immediate=True), invoicing_app)

    states = {change.target_plan_id: change.state for change in changes(invoicing_app, sub)}
    assert states == {sub.scale.id: ChangeState.SKIPPED, sub.team.id: ChangeState.SCHEDULED}


def preview(app: FakeApplication, sub: Subscribed, plan: str, command_id: str = "p1") -> Any:
    return preview_plan_change(
        PreviewPlanChange(
            command_id=command_id,
            org_id=sub.org_id,
            billing_account_id=sub.account_id,
            subscription_id=sub.subscription_id,
            plan=plan,
        ),
        app,
    )


def test_a_change_naming_the_time_its_preview_answered_is_prorated_and_effective_then(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.clock.advance(10 * DAY + timedelta(microseconds=500))
    previewed = preview(app, sub, "team")
    app.clock.advance(timedelta(minutes=4))

    changed = change_subscription_plan(
        request(sub, plan="team", immediate=True, proration_date=previewed.proration_date), app
    )

    assert changed.phase.effective_at == previewed.proration_date
    [update] = updates(app, "executed")
    assert update.arguments[4] == previewed.proration_date
    [made] = changes(app, sub)
    assert made.apply_lag_seconds == 240.0


def test_a_proration_date_no_recent_preview_of_the_same_change_answered_is_refused(
    app: FakeApplication, sub: Subscribed
) -> None:
    period_start = subscription(app, sub).current_period_start
    app.clock.advance(20 * DAY)
    of_another_plan = preview(app, sub, "scale", "p1")
    of_this_plan = preview(app, sub, "team", "p2")
    app.clock.advance(timedelta(minutes=6))

    for when in (period_start, of_another_plan.proration_date, of_this_plan.proration_date):
        with pytest.raises(InvalidArgument) as raised:
            change_subscription_plan(
                request(sub, plan="team", immediate=True, proration_date=when), app
            )
        assert raised.value.details[0]["fieldViolations"][0]["field"] == "proration_date"
    assert updates(app) == []
    assert changes(app, sub) == []


def test_a_subscriptions_expired_previews_are_forgotten_with_its_next_preview(
    app: FakeApplication, sub: Subscribed
) -> None:
    preview(app, sub, "team", "p1")
    app.clock.advance(timedelta(minutes=6))
    latest = preview(app, sub, "scale", "p2")

    assert [row.proration_date for row in app.db.rows("change_previews")] == [latest.proration_date]


def test_an_upgrade_is_invoiced_at_once_and_made_only_if_paid_with_default_settings(
    app: FakeApplication, sub: Subscribed
) -> None:
    app.db.seed(replace(sub.team, amount=sub.starter.amount * 3))

    change_subscription_plan(request(sub, plan="team", immediate=True), app)

    [update] = updates(app, "executed")
    assert update.arguments[3:] == ("always_invoice", app.clock.now(), "error_if_incomplete")
    [made] = changes(app, sub)
    assert made.proration_behavior == "always_invoice"

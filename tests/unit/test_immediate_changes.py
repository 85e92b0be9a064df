"""How an immediate change is billed (an upgrade paid when granted) and which proration dates
it may name (only a recent preview's of the same change): the domain's rules."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest

from domain.errors import InvalidArgument
from domain.subscriptions.change_previews import PREVIEW_VALIDITY, IssuedPreview, ensure_previewed
from domain.subscriptions.immediate_changes import charges_at_once, immediate_proration
from domain.subscriptions.plans import Plan, PlanInterval
from domain.subscriptions.proration import ProrationBehavior
from domain.subscriptions.subscription import Subscription, SubscriptionState
from tests.support.errors import field_violations
from tests.support.fakes.data import a_plan

NOW = datetime(2026, 12, 20, 10, 0, 0, tzinfo=UTC)
STARTER = replace(a_plan("starter", "price_starter"), amount=900)
TEAM = replace(a_plan("team", "price_team"), amount=2900)
TEAM_ANNUAL = replace(a_plan("annual", "price_annual"), amount=29000, interval=PlanInterval.YEAR)


@pytest.mark.parametrize(
    ("configured", "current", "target", "billed"),
    [
        ("create_prorations", STARTER, TEAM, "always_invoice"),  # an upgrade: paid now
        ("create_prorations", TEAM, STARTER, "create_prorations"),  # a downgrade: a credit
        ("create_prorations", TEAM, TEAM_ANNUAL, "always_invoice"),  # Stripe bills a year now
        ("create_prorations", TEAM_ANNUAL, STARTER, "always_invoice"),
        ("create_prorations", None, STARTER, "always_invoice"),  # unknown: the safe side
        ("always_invoice", TEAM, STARTER, "always_invoice"),
        ("none", STARTER, TEAM, "none"),  # the operator bills nothing for the period
    ],
)
def test_an_upgrade_is_invoiced_at_once_and_a_downgrade_follows_the_setting(
    configured: ProrationBehavior, current: Plan | None, target: Plan, billed: str
) -> None:
    assert immediate_proration(configured, current, target) == billed


def test_a_plan_at_the_same_price_is_no_upgrade() -> None:
    assert not charges_at_once(TEAM, replace(TEAM, id="plan_team2"))


def preview_at(moment: datetime, plan_id: str = "plan_starter") -> IssuedPreview:
    return IssuedPreview.of("sub_1", "plan_team", plan_id, moment, moment)


def test_a_preview_is_found_by_the_second_it_answered_whatever_the_offset_it_is_written_in() -> (
    None
):
    answered = preview_at(NOW)
    in_paris = NOW.astimezone(timezone(timedelta(hours=1)))

    assert IssuedPreview.id_for("sub_1", "plan_team", "plan_starter", in_paris) == answered.id
    assert IssuedPreview.id_for("sub_1", "plan_team", "plan_scale", NOW) != answered.id
    assert IssuedPreview.id_for("sub_1", "plan_scale", "plan_starter", NOW) != answered.id
    assert IssuedPreview.id_for("sub_2", "plan_team", "plan_starter", NOW) != answered.id
    assert (
        IssuedPreview.id_for("sub_1", "plan_team", "plan_starter", NOW - timedelta(seconds=1))
        != answered.id
    )


def names(preview: IssuedPreview | None, now: datetime) -> None:
    subscription = Subscription(
        id="sub_1",
        billing_account_id="ba_1",
        plan_id="plan_team",
        state=SubscriptionState.ACTIVE,
        provider="fake",
        provider_id="sub_remote_1",
        current_period_start=NOW - timedelta(days=20),
        current_period_end=NOW + timedelta(days=10),
        created_at=NOW - timedelta(days=20),
        updated_at=NOW - timedelta(days=20),
    )
    ensure_previewed(subscription, "plan_starter", NOW, preview, now)


def test_a_proration_date_a_preview_answered_is_honoured_until_the_preview_expires() -> None:
    names(preview_at(NOW), NOW + PREVIEW_VALIDITY)


@pytest.mark.parametrize(
    ("preview", "after", "said"),
    [
        (None, timedelta(seconds=1), "no preview"),
        (preview_at(NOW), PREVIEW_VALIDITY + timedelta(seconds=1), "expired"),
    ],
    ids=["never previewed", "expired"],
)
def test_a_proration_date_no_live_preview_answered_is_refused_naming_the_field(
    preview: IssuedPreview | None, after: timedelta, said: str
) -> None:
    with pytest.raises(InvalidArgument) as raised:
        names(preview, NOW + after)

    assert said in raised.value.message
    assert "preview the change" in field_violations(raised.value)["proration_date"]

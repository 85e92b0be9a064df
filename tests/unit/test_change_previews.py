"""What a preview promises (its proration date, for five minutes, for the one change it
previewed) and what a change naming a proration date is told when no preview promised it:
the domain's rules, and the words the caller reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from domain.billing.currencies import minimum_charge
from domain.errors import ERROR_DOMAIN, ERROR_INFO, Aborted, InvalidArgument
from domain.subscriptions.change_previews import (
    PREVIEW_VALIDITY,
    IssuedPreview,
    ensure_in_current_period,
    ensure_previewed,
    settlement_of,
)
from domain.subscriptions.subscription import Subscription, SubscriptionState
from tests.support.errors import field_violations

NOW = datetime(2026, 12, 20, 10, 0, 0, tzinfo=UTC)
PERIOD_START = NOW - timedelta(days=20)
PERIOD_END = NOW + timedelta(days=10)


def test_a_preview_prorates_at_any_moment_of_the_current_period_its_bounds_included() -> None:
    for moment in (PERIOD_START, NOW, PERIOD_END):
        ensure_in_current_period("sub_1", PERIOD_START, PERIOD_END, moment)


@pytest.mark.parametrize(
    "moment",
    [PERIOD_START - timedelta(seconds=1), PERIOD_END + timedelta(seconds=1)],
    ids=["before its start", "past its end"],
)
def test_a_preview_outside_the_current_period_is_aborted_as_a_period_rolling_over(
    moment: datetime,
) -> None:
    with pytest.raises(Aborted) as raised:
        ensure_in_current_period("sub_1", PERIOD_START, PERIOD_END, moment)

    assert raised.value.message == (
        "subscription 'sub_1' is between billing periods at the provider (its period ends "
        "2026-12-30T10:00:00+00:00); ask for the preview again in a few seconds"
    )
    assert raised.value.details == [
        {
            "@type": ERROR_INFO,
            "reason": "BILLING_PERIOD_ROLLING_OVER",
            "domain": ERROR_DOMAIN,
            "metadata": {"subscription_id": "sub_1", "period_end": "2026-12-30T10:00:00+00:00"},
        }
    ]


def test_an_issued_preview_keeps_what_it_previewed_and_expires_five_minutes_after_its_time() -> (
    None
):
    answered_at = NOW - timedelta(seconds=30)
    preview = IssuedPreview.of("sub_1", "plan_team", "plan_starter", answered_at, NOW)

    assert preview.id == IssuedPreview.id_for("sub_1", "plan_team", "plan_starter", answered_at)
    assert preview.id.startswith("prv_")
    assert len(preview.id) == len("prv_") + 32
    assert (preview.subscription_id, preview.from_plan_id, preview.plan_id) == (
        "sub_1",
        "plan_team",
        "plan_starter",
    )
    assert (preview.proration_date, preview.created_at) == (answered_at, NOW)
    assert preview.expires_at() == answered_at + timedelta(minutes=5)


def test_a_preview_is_found_whatever_fraction_of_its_second_the_change_names() -> None:
    whole = IssuedPreview.id_for("sub_1", "plan_team", "plan_starter", NOW)

    assert (
        IssuedPreview.id_for(
            "sub_1", "plan_team", "plan_starter", NOW + timedelta(microseconds=999_999)
        )
        == whole
    )


def subscription() -> Subscription:
    return Subscription(
        id="sub_1",
        billing_account_id="ba_1",
        plan_id="plan_team",
        state=SubscriptionState.ACTIVE,
        provider="fake",
        provider_id="sub_remote_1",
        current_period_start=PERIOD_START,
        current_period_end=PERIOD_END,
        created_at=PERIOD_START,
        updated_at=PERIOD_START,
    )


def test_a_change_naming_a_time_no_preview_answered_is_told_to_preview_or_leave_it_out() -> None:
    with pytest.raises(InvalidArgument) as raised:
        ensure_previewed(subscription(), "plan_starter", NOW, None, NOW + timedelta(seconds=1))

    assert raised.value.message == (
        "no preview of the change of subscription 'sub_1' from plan 'plan_team' to "
        "'plan_starter' answered the proration date 2026-12-20T10:00:00+00:00"
    )
    assert field_violations(raised.value) == {
        "proration_date": "must be the proration_date a preview of this same change answered "
        "(within the last 5 minutes); preview the change, or leave proration_date out to "
        "prorate as of now"
    }


def test_a_change_naming_an_expired_previews_time_is_told_when_it_expired() -> None:
    preview = IssuedPreview.of("sub_1", "plan_team", "plan_starter", NOW, NOW)
    later = NOW + PREVIEW_VALIDITY + timedelta(seconds=1)

    with pytest.raises(InvalidArgument) as raised:
        ensure_previewed(subscription(), "plan_starter", NOW, preview, later)

    assert raised.value.message == (
        "the preview of the change of subscription 'sub_1' from plan 'plan_team' to "
        "'plan_starter' at 2026-12-20T10:00:00+00:00 expired at 2026-12-20T10:05:00+00:00"
    )
    assert field_violations(raised.value) == {
        "proration_date": "comes from a preview older than 5 minutes; preview the change "
        "again, or leave proration_date out to prorate as of now"
    }


def test_a_change_naming_its_previews_time_is_taken_up_to_the_last_moment_of_the_preview() -> None:
    preview = IssuedPreview.of("sub_1", "plan_team", "plan_starter", NOW, NOW)

    ensure_previewed(subscription(), "plan_starter", NOW, preview, NOW + PREVIEW_VALIDITY)


# --- what the change charges now ---------------------------------------------------------------


def test_an_amount_billed_now_at_or_over_the_minimum_charge_is_charged_whole() -> None:
    assert settlement_of(50, "usd", billed_now=True) == (50, 0)
    assert settlement_of(1999, "eur", billed_now=True) == (1999, 0)


def test_an_amount_billed_now_below_the_currencys_minimum_is_carried_to_the_balance() -> None:
    assert settlement_of(49, "usd", billed_now=True) == (0, 49)
    assert settlement_of(40, "usd", billed_now=True) == (0, 40)
    assert settlement_of(40, "gbp", billed_now=True) == (40, 0)  # over 0.30 GBP
    assert settlement_of(49, "jpy", billed_now=True) == (0, 49)  # whole yen, under 50
    assert settlement_of(17_499, "HUF", billed_now=True) == (0, 17_499)


def test_lines_left_for_the_next_invoice_or_nothing_due_charge_and_carry_nothing() -> None:
    assert settlement_of(20, "usd", billed_now=False) == (0, 0)
    assert settlement_of(5000, "usd", billed_now=False) == (0, 0)
    assert settlement_of(0, "usd", billed_now=True) == (0, 0)
    assert settlement_of(-300, "usd", billed_now=True) == (0, 0)


def test_where_the_minimum_follows_the_days_rate_the_charge_is_not_known() -> None:
    assert minimum_charge("idr") is None
    assert settlement_of(4000, "idr", billed_now=True) == (None, 0)

"""The sweep's share of the rate budget, and when a due change must be read before it is
sent again."""

from __future__ import annotations

from datetime import timedelta

import pytest

from domain.provider.rate_budget import CallKind, RateLimited, sweep_quota
from domain.subscriptions.scheduled_changes import ScheduledChange
from tests.unit.test_subscriptions import NOW, plan, subscription

WINDOW = timedelta(hours=23)


def change_at_period_end() -> ScheduledChange:
    return ScheduledChange.at_period_end("chg_1", subscription(), plan(), now=NOW)


@pytest.mark.parametrize(
    ("rate", "horizon", "in_flight", "batch", "quota"),
    [
        (25, 10, 0, 500, 250),  # what 25 calls a second apply in ten seconds
        (25, 10, 200, 500, 50),  # less what is claimed and not applied yet
        (25, 10, 300, 500, 0),  # never negative
        (100, 10, 0, 500, 500),  # never more than a batch
        (12.5, 10, 0, 500, 125),  # a rate slowed by 429s claims less
    ],
)
def test_a_sweep_claims_what_the_budget_can_apply_within_its_horizon(
    rate: float, horizon: float, in_flight: int, batch: int, quota: int
) -> None:
    assert (
        sweep_quota(
            rate_per_second=rate, horizon_seconds=horizon, in_flight=in_flight, batch_size=batch
        )
        == quota
    )


def test_a_sweep_whose_changes_each_take_several_calls_claims_fewer_of_them() -> None:
    quota = sweep_quota(
        rate_per_second=25, horizon_seconds=10, in_flight=0, batch_size=500, calls_per_change=2
    )

    assert quota == 125


def test_a_call_the_budget_has_no_token_for_says_which_budget_and_how_long_to_wait() -> None:
    refused = RateLimited(CallKind.WRITE, 1.234)

    assert str(refused) == "stripe write budget: next token in 1.23s"
    assert (refused.kind, refused.wait_seconds) == (CallKind.WRITE, 1.234)


def test_a_change_never_sent_is_sent_blind() -> None:
    change = change_at_period_end()

    assert not change.outcome_may_be_forgotten(NOW + timedelta(days=40), WINDOW)


def test_a_change_sent_within_the_key_window_is_sent_again_blind() -> None:
    change = change_at_period_end()
    change.about_to_send(NOW)

    assert not change.outcome_may_be_forgotten(NOW + timedelta(hours=22), WINDOW)


def test_a_change_first_sent_longer_ago_than_the_key_window_is_read_first() -> None:
    change = change_at_period_end()
    change.about_to_send(NOW)
    change.about_to_send(NOW + timedelta(hours=20))  # the first send is what counts

    assert change.outcome_may_be_forgotten(NOW + timedelta(hours=23), WINDOW)
    assert change.first_sent_at == NOW

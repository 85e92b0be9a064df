"""The words and ids of each subscription finding (``domain/drift/subscriptions.py``): an
operator acts on what a finding says, so each is checked whole, not by a fragment."""

from __future__ import annotations

from datetime import timedelta

import pytest

from domain.billing.accounts import BillingAccountState
from domain.drift.report import (
    DriftKind,
    Finding,
    PriceTerms,
    RemoteSubscription,
    SubscriptionRecord,
)
from tests.support.fakes.clock import T0
from tests.support.fakes.data import a_plan
from tests.unit.test_drift import STARTER, account, customer, drift, listed, remote, row

DESCRIBED_SUB_A = "Stripe subscription sub_a (active) of customer cus_1 has no row here"


def orphan_finding(why: str, action: str, **ids: str | None) -> Finding:
    return Finding(
        DriftKind.ORPHAN_SUBSCRIPTION,
        f"{DESCRIBED_SUB_A}: {why}",
        action,
        billing_account_id=ids.get("billing_account_id", "ba_1"),
        customer_ids=("cus_1",),
        subscription_id=ids.get("subscription_id", "sub_a"),
        provider_subscription_id="sub_a",
    )


def test_a_missing_subscription_says_which_row_stripe_lost_and_what_to_do() -> None:
    [finding] = drift(rows=[row(remote("sub_gone"))])

    assert finding == Finding(
        DriftKind.MISSING_SUBSCRIPTION,
        "subscription sub_1 (active) is linked to Stripe subscription sub_gone, which Stripe "
        "does not have",
        "find out what happened to it at Stripe (dashboard: Developers > Events); if the "
        "customer is still meant to be billed, subscribe the account again",
        billing_account_id="ba_1",
        subscription_id="sub_1",
        provider_subscription_id="sub_gone",
    )


def test_rows_are_checked_in_id_order_and_every_one_past_a_missing_one() -> None:
    rows = [row(remote("sub_gone_2"), "sub_2"), row(remote("sub_gone_1"), "sub_1")]

    findings = drift(rows=rows)

    assert [finding.subscription_id for finding in findings] == ["sub_1", "sub_2"]


@pytest.mark.parametrize(
    ("orphan", "expected"),
    [
        (
            listed(remote("sub_a"), subscription_id=None),
            orphan_finding(
                "its metadata names no subscription of ours",
                "if nobody meant it, cancel it at Stripe; else record it by hand",
                subscription_id=None,
            ),
        ),
        (
            listed(remote("sub_a"), subscription_id="sub_a", billing_account_id="ba_2"),
            orphan_finding(
                "its metadata names billing account ba_2 of None, its customer is billing "
                "account ba_1's",
                "find out which account it belongs to; cancel it at Stripe if it is nobody's",
            ),
        ),
        (
            listed(remote("sub_a"), subscription_id="sub_a", org_id="org_2"),
            orphan_finding(
                "its metadata names billing account None of org_2, its customer is billing "
                "account ba_1's",
                "find out which account it belongs to; cancel it at Stripe if it is nobody's",
            ),
        ),
        (
            listed(remote("sub_a", price_id="price_other"), subscription_id="sub_a"),
            orphan_finding(
                "its price price_other is none of our plans'",
                "change it to one of our plans' prices at Stripe, then adopt it; or cancel it",
            ),
        ),
    ],
    ids=["names no subscription", "another account", "another org", "another price"],
)
def test_an_orphan_that_needs_a_person_says_why_and_what_to_do(
    orphan: RemoteSubscription, expected: Finding
) -> None:
    [finding] = drift(
        accounts=[account(customer_id="cus_1")], customers=[customer("cus_1")], remotes=[orphan]
    )

    assert finding == expected


def test_an_orphan_naming_our_metadata_account_and_org_is_adopted() -> None:
    orphan = listed(
        remote("sub_a"), subscription_id="sub_a", billing_account_id="ba_1", org_id="org_1"
    )

    [finding] = drift(
        accounts=[account(customer_id="cus_1")], customers=[customer("cus_1")], remotes=[orphan]
    )

    assert finding.adoptable


def test_an_orphan_naming_a_subscription_of_ours_linked_elsewhere_says_which_to_keep() -> None:
    kept = remote("sub_kept")

    findings = drift(
        accounts=[account(customer_id="cus_1")],
        customers=[customer("cus_1")],
        rows=[row(kept, "sub_taken")],
        remotes=[listed(remote("sub_a"), subscription_id="sub_taken"), listed(kept)],
    )

    assert findings == [
        orphan_finding(
            "it names our subscription sub_taken, which is linked to sub_kept",
            "one of the two bills the customer twice: cancel the one that should not bill at "
            "Stripe (our row stays on sub_kept)",
            subscription_id="sub_taken",
        )
    ]


def test_two_orphans_naming_one_subscription_say_to_keep_one_of_them() -> None:
    orphans = [listed(remote("sub_a"), minutes=1), listed(remote("sub_b"), minutes=2)]

    first, _ = drift(
        accounts=[account(customer_id="cus_1")], customers=[customer("cus_1")], remotes=orphans
    )

    assert first == orphan_finding(
        "2 Stripe subscriptions name subscription sub_1",
        "cancel all but one at Stripe, then adopt that one (`stripe drift --adopt`)",
        subscription_id="sub_1",
    )


def test_an_orphan_of_a_customer_linked_to_no_account_says_to_link_it_first() -> None:
    [finding] = drift(remotes=[listed(remote("sub_a"), subscription_id="sub_a")])

    assert finding == orphan_finding(
        "its customer is not linked to any billing account of ours",
        "link the customer first (an orphan_customer, adopted), or cancel it at Stripe",
        billing_account_id=None,
    )


def test_an_orphan_of_a_deleted_account_says_to_cancel_it_if_it_bills() -> None:
    deleted = account(customer_id="cus_1", state=BillingAccountState.DELETED)

    [finding] = drift(
        accounts=[deleted], remotes=[listed(remote("sub_a"), subscription_id="sub_a")]
    )

    assert finding == orphan_finding(
        "its billing account ba_1 is deleted", "cancel it at Stripe if it bills"
    )


def test_an_orphan_shows_the_status_stripe_gives_it() -> None:
    orphan = listed(remote("sub_a", status="past_due"), subscription_id=None)

    [finding] = drift(remotes=[orphan])

    assert finding.description.startswith(
        "Stripe subscription sub_a (past_due) of customer cus_1 has no row here: "
    )


def test_an_adoptable_orphan_says_what_it_will_be_recorded_as() -> None:
    orphan = listed(remote("sub_s9"), subscription_id="sub_9")
    unnamed = listed(remote("sub_s8"), subscription_id="not an id")

    invalid_id, adoptable = drift(  # sub_s8 first: the same creation time, then by id
        accounts=[account(customer_id="cus_1")],
        customers=[customer("cus_1")],
        remotes=[orphan, unnamed],
    )

    assert adoptable == Finding(
        DriftKind.ORPHAN_SUBSCRIPTION,
        "Stripe subscription sub_s9 (active) of customer cus_1 has no row here: a creation of "
        "subscription sub_9 stopped after Stripe made it",
        "adopt: record it as subscription sub_9 of billing account ba_1 on plan starter",
        billing_account_id="ba_1",
        customer_ids=("cus_1",),
        subscription_id="sub_9",
        provider_subscription_id="sub_s9",
        adoption=SubscriptionRecord("sub_9", "ba_1", STARTER.id, orphan),
    )
    assert invalid_id.action == (
        "adopt: record it as subscription a new id (its metadata's is not a valid id) of "
        "billing account ba_1 on plan starter"
    )


def test_a_plan_mismatch_shows_both_prices_and_what_to_do() -> None:
    [finding] = drift(rows=[row(remote())], remotes=[listed(remote(price_id="price_team"))])

    assert finding == Finding(
        DriftKind.PLAN_MISMATCH,
        "subscription sub_1 (sub_s1): on plan starter here at 10.00 USD/month (price_starter), "
        "Stripe bills 10.00 USD/30 days (price_team) (plan team's price)",
        "find out who changed the price at Stripe; change it back there, or change the "
        "subscription's plan here to the one Stripe bills",
        billing_account_id="ba_1",
        subscription_id="sub_1",
        provider_subscription_id="sub_s1",
        stripe_bills=PriceTerms("price_team", 1000, "usd", "day", 30),
        we_bill=PriceTerms.of_plan(STARTER),
    )


def test_what_stripe_says_its_price_bills_wins_over_our_plan_of_that_price() -> None:
    there = remote(price_id="price_team", unit_amount=3100, currency="eur")

    [finding] = drift(rows=[row(remote())], remotes=[listed(there)])

    assert finding.stripe_bills == PriceTerms("price_team", 3100, "eur", "day", 30)


def test_a_row_on_a_plan_we_do_not_have_is_a_plan_mismatch_at_a_price_we_do_not_know() -> None:
    legacy = row(remote(), plan=a_plan("legacy", "price_legacy"))

    [finding] = drift(rows=[legacy], remotes=[listed(remote())])

    assert finding.kind is DriftKind.PLAN_MISMATCH
    assert finding.description == (
        "subscription sub_1 (sub_s1): on plan plan_legacy here at a price we do not know, "
        "Stripe bills 10.00 USD/30 days (price_starter) (plan starter's price)"
    )
    assert finding.we_bill is None


def test_a_period_mismatch_shows_both_periods_and_what_to_do() -> None:
    moved = remote(start=T0 + timedelta(days=45), anchor=T0 + timedelta(days=45))

    [finding] = drift(rows=[row(remote())], remotes=[listed(moved)])

    assert finding == Finding(
        DriftKind.PERIOD_MISMATCH,
        f"subscription sub_1 (sub_s1): period {T0.isoformat()} → "
        f"{(T0 + timedelta(days=30)).isoformat()} here, Stripe's is "
        f"{(T0 + timedelta(days=45)).isoformat()} → {(T0 + timedelta(days=75)).isoformat()} "
        "on another billing cycle",
        "find out who moved the billing cycle at Stripe (anchor reset, trial change); plan "
        "changes at the period's end follow Stripe's period",
        billing_account_id="ba_1",
        subscription_id="sub_1",
        provider_subscription_id="sub_s1",
    )


def test_a_stripe_period_starting_inside_ours_is_a_period_mismatch_not_a_renewal() -> None:
    moved = remote(start=T0 + timedelta(days=15), anchor=T0 + timedelta(days=15))

    [finding] = drift(rows=[row(remote())], remotes=[listed(moved)])

    assert finding.kind is DriftKind.PERIOD_MISMATCH


def test_a_state_mismatch_shows_both_states_and_what_to_do() -> None:
    [finding] = drift(rows=[row(remote())], remotes=[listed(remote(status="past_due"))])

    assert finding == Finding(
        DriftKind.STATE_MISMATCH,
        "subscription sub_1 (sub_s1): active here, past_due at Stripe",
        "Stripe's state is the one that bills: check the customer's invoices and payments at "
        "Stripe; a plan change reads Stripe's state and corrects the row",
        billing_account_id="ba_1",
        subscription_id="sub_1",
        provider_subscription_id="sub_s1",
    )


def test_a_row_past_due_here_and_active_at_stripe_is_a_state_mismatch() -> None:
    [finding] = drift(rows=[row(remote(status="past_due"))], remotes=[listed(remote())])

    assert finding.description == "subscription sub_1 (sub_s1): past_due here, active at Stripe"


def test_a_renewal_the_row_has_not_seen_still_shows_a_state_stripe_changed_since() -> None:
    renewed = remote(status="past_due", start=T0 + timedelta(days=60), anchor=T0)

    [finding] = drift(rows=[row(remote())], remotes=[listed(renewed)])

    assert finding.kind is DriftKind.STATE_MISMATCH

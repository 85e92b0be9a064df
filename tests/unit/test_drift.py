"""The drift report's rules (``domain/drift/rules.py``): what differs between Stripe and the
database, what can be adopted safely, and what is not drift at all."""

from __future__ import annotations

from datetime import datetime, timedelta

from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount, BillingAccountState
from domain.drift.report import (
    CustomerLink,
    DriftKind,
    Finding,
    OurSide,
    PriceTerms,
    ProviderSide,
    RemoteCustomer,
    RemoteSubscription,
    SubscriptionRecord,
    existing_subscription,
    oldest_customer,
)
from domain.drift.rules import find_drift
from domain.subscriptions.plans import Plan
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import ProviderSubscription, Subscription, SubscriptionState
from tests.support.fakes.clock import T0
from tests.support.fakes.data import a_plan, an_organization

STARTER = a_plan("starter", "price_starter")
TEAM = a_plan("team", "price_team")
PLANS = [STARTER, TEAM]


def account(
    account_id: str = "ba_1",
    *,
    customer_id: str | None = None,
    state: BillingAccountState | None = None,
    offline: bool = False,
) -> BillingAccount:
    opened = BillingAccount.open(
        account_id,
        an_organization(),
        BillingDetails(name="Acme", email="billing@acme.example"),
        offline=offline,
        default_currency="usd",
        now=T0,
    )
    if customer_id is not None:
        opened.registered("stripe", customer_id, T0)
    if state is not None:
        opened.state = state
    return opened


def customer(
    customer_id: str, account_id: str | None = "ba_1", *, minutes: int = 0
) -> RemoteCustomer:
    metadata = {"billing_account_id": account_id, "org_id": "org_1"} if account_id else {}
    return RemoteCustomer(customer_id, T0 + timedelta(minutes=minutes), metadata)


def remote(
    provider_id: str = "sub_s1",
    *,
    price_id: str = "price_starter",
    status: str = "active",
    start: datetime = T0,
    end: datetime | None = None,
    anchor: datetime | None = None,
    unit_amount: int | None = None,
    currency: str | None = None,
) -> ProviderSubscription:
    return ProviderSubscription(
        id=provider_id,
        status=status,
        item_id=f"si_{provider_id}",
        price_id=price_id,
        current_period_start=start,
        current_period_end=end or start + timedelta(days=30),
        billing_cycle_anchor=anchor or start,
        interval="day",
        interval_count=30,
        unit_amount=unit_amount,
        currency=currency,
    )


def listed(
    subscription: ProviderSubscription,
    customer_id: str = "cus_1",
    *,
    subscription_id: str | None = "sub_1",
    minutes: int = 0,
    **metadata: str,
) -> RemoteSubscription:
    values = {"subscription_id": subscription_id} if subscription_id else {}
    return RemoteSubscription(
        subscription, customer_id, T0 + timedelta(minutes=minutes), {**values, **metadata}
    )


def row(
    provider: ProviderSubscription, subscription_id: str = "sub_1", plan: Plan = STARTER
) -> Subscription:
    return Subscription.started(subscription_id, "ba_1", plan, "stripe", provider, T0)


def drift(
    *,
    accounts: list[BillingAccount] | None = None,
    customers: list[RemoteCustomer] | None = None,
    rows: list[Subscription] | None = None,
    remotes: list[RemoteSubscription] | None = None,
    pending: list[ScheduledChange] | None = None,
) -> list[Finding]:
    ours = OurSide(accounts or [], rows or [], PLANS, pending or [])
    return find_drift(ours, ProviderSide(customers or [], remotes or []))


def kinds(findings: list[Finding]) -> list[DriftKind]:
    return [finding.kind for finding in findings]


# --- customers --------------------------------------------------------------------------------


def test_an_account_linked_to_the_one_customer_naming_it_is_no_drift() -> None:
    assert drift(accounts=[account(customer_id="cus_1")], customers=[customer("cus_1")]) == []


def test_a_customer_naming_an_account_we_do_not_have_is_an_orphan_that_needs_a_person() -> None:
    [finding] = drift(customers=[customer("cus_1", "ba_gone")])

    assert finding.kind is DriftKind.ORPHAN_CUSTOMER
    assert finding.ids == ("ba_gone", "cus_1")
    assert not finding.adoptable
    assert "delete it at Stripe" in finding.action


def test_the_one_customer_naming_a_pending_account_without_one_is_adopted_by_linking_them() -> None:
    [finding] = drift(accounts=[account()], customers=[customer("cus_1")])

    assert finding.kind is DriftKind.ORPHAN_CUSTOMER
    assert finding.adoption == CustomerLink("ba_1", "cus_1")
    assert "registration stopped after Stripe made it" in finding.description


def test_the_one_customer_naming_an_offline_account_is_adoptable_too() -> None:
    [finding] = drift(accounts=[account(offline=True)], customers=[customer("cus_1")])

    assert finding.adoption == CustomerLink("ba_1", "cus_1")


def test_a_customer_naming_a_disabled_account_without_one_needs_a_person() -> None:
    disabled = account(state=BillingAccountState.DISABLED)

    [finding] = drift(accounts=[disabled], customers=[customer("cus_1")])

    assert (finding.kind, finding.adoptable) == (DriftKind.ORPHAN_CUSTOMER, False)


def test_a_customer_naming_an_account_linked_to_another_customer_is_a_mismatch() -> None:
    [finding] = drift(
        accounts=[account(customer_id="cus_linked")],
        customers=[customer("cus_linked", account_id=None), customer("cus_other")],
    )

    assert finding.kind is DriftKind.CUSTOMER_MISMATCH
    assert finding.customer_ids == ("cus_other", "cus_linked")
    assert not finding.adoptable
    assert finding.action.startswith("keep cus_linked")


def test_a_customer_linked_to_one_account_but_naming_another_is_a_mismatch() -> None:
    [finding] = drift(
        accounts=[account("ba_1", customer_id="cus_1"), account("ba_2")],
        customers=[customer("cus_1", "ba_2")],
    )

    assert finding.kind is DriftKind.CUSTOMER_MISMATCH
    assert finding.billing_account_id == "ba_1"
    assert "names billing account ba_2" in finding.description


def test_several_customers_naming_one_account_are_duplicates_never_adopted() -> None:
    [finding] = drift(
        accounts=[account()],
        customers=[customer("cus_b", minutes=5), customer("cus_a", minutes=1)],
    )

    assert finding.kind is DriftKind.DUPLICATE_CUSTOMERS
    assert finding.customer_ids == ("cus_a", "cus_b")  # oldest first
    assert not finding.adoptable
    assert finding.action.startswith("keep cus_a (the oldest")


def test_duplicates_say_to_keep_the_linked_customer_when_the_account_has_one() -> None:
    [finding] = drift(
        accounts=[account(customer_id="cus_b")],
        customers=[customer("cus_b", minutes=5), customer("cus_a", minutes=1)],
    )

    assert finding.action.startswith("keep cus_b (the one the account is linked to")


def test_an_accounts_customer_stripe_does_not_have_is_missing() -> None:
    [finding] = drift(accounts=[account(customer_id="cus_deleted")])

    assert finding.kind is DriftKind.MISSING_CUSTOMER
    assert finding.ids == ("ba_1", "cus_deleted")
    assert not finding.adoptable


def test_a_disabled_accounts_customer_may_be_gone() -> None:
    closed = account(customer_id="cus_deleted", state=BillingAccountState.DISABLED)

    assert drift(accounts=[closed]) == []


def test_a_customer_without_our_metadata_that_nobody_is_linked_to_is_not_ours() -> None:
    assert drift(customers=[customer("cus_someone_elses", account_id=None)]) == []


# --- subscriptions ----------------------------------------------------------------------------


def test_a_row_and_its_stripe_subscription_that_agree_are_no_drift() -> None:
    provider = remote()

    assert drift(rows=[row(provider)], remotes=[listed(provider)]) == []


def test_a_row_whose_stripe_subscription_is_gone_is_missing() -> None:
    [finding] = drift(rows=[row(remote("sub_gone"))])

    assert finding.kind is DriftKind.MISSING_SUBSCRIPTION
    assert finding.ids == ("ba_1", "sub_1", "sub_gone")
    assert not finding.adoptable


def test_an_orphan_naming_our_id_of_a_linked_customer_on_our_price_is_recorded() -> None:
    orphan = listed(remote("sub_s9"), subscription_id="sub_9", billing_account_id="ba_1")

    [finding] = drift(
        accounts=[account(customer_id="cus_1")], customers=[customer("cus_1")], remotes=[orphan]
    )

    assert finding.kind is DriftKind.ORPHAN_SUBSCRIPTION
    assert finding.adoption == SubscriptionRecord("sub_9", "ba_1", STARTER.id, orphan)
    assert finding.ids == ("ba_1", "cus_1", "sub_9", "sub_s9")
    assert "plan starter" in finding.action


def test_an_orphan_whose_metadata_id_is_not_an_id_is_recorded_under_a_new_one() -> None:
    orphan = listed(remote("sub_s9"), subscription_id="not an id")

    [finding] = drift(
        accounts=[account(customer_id="cus_1")], customers=[customer("cus_1")], remotes=[orphan]
    )

    assert isinstance(finding.adoption, SubscriptionRecord)
    assert finding.adoption.subscription_id is None
    assert "a new id" in finding.action


def test_an_orphan_that_cannot_be_adopted_safely_says_why() -> None:
    linked = [account(customer_id="cus_1"), account("ba_2", customer_id="cus_2")]
    kept = remote("sub_kept")
    cases = {
        "names no subscription of ours": listed(remote("sub_a"), subscription_id=None),
        "it names our subscription sub_taken, which is linked to sub_kept": listed(
            remote("sub_b"), subscription_id="sub_taken"
        ),
        "its customer is not linked": listed(remote("sub_c"), "cus_x", subscription_id="sub_c"),
        "its metadata names billing account ba_2": listed(
            remote("sub_d"), subscription_id="sub_d", billing_account_id="ba_2"
        ),
        "its price price_other is none of our plans'": listed(
            remote("sub_e", price_id="price_other"), subscription_id="sub_e"
        ),
    }

    findings = drift(
        accounts=linked,
        customers=[customer("cus_1"), customer("cus_2", "ba_2")],
        rows=[row(kept, "sub_taken")],
        remotes=[*cases.values(), listed(kept, subscription_id="sub_taken")],
    )

    assert kinds(findings) == [DriftKind.ORPHAN_SUBSCRIPTION] * len(cases)
    by_id = {finding.provider_subscription_id: finding for finding in findings}
    for why, orphan in cases.items():
        finding = by_id[orphan.id]
        assert not finding.adoptable, why
        assert why in finding.description, (why, finding.description)


def test_two_orphans_naming_one_subscription_are_not_adopted() -> None:
    orphans = [listed(remote("sub_a"), minutes=1), listed(remote("sub_b"), minutes=2)]

    findings = drift(
        accounts=[account(customer_id="cus_1")], customers=[customer("cus_1")], remotes=orphans
    )

    assert [finding.adoptable for finding in findings] == [False, False]
    assert "2 Stripe subscriptions name subscription sub_1" in findings[0].description


def test_an_orphan_of_a_disabled_account_is_not_adopted() -> None:
    closed = account(customer_id="cus_1", state=BillingAccountState.DISABLED)

    [finding] = drift(accounts=[closed], remotes=[listed(remote("sub_a"))])

    assert not finding.adoptable
    assert "disabled" in finding.description


def test_stripe_billing_another_price_than_the_plans_is_a_plan_mismatch() -> None:
    here = row(remote())
    there = remote(price_id="price_team")

    [finding] = drift(rows=[here], remotes=[listed(there)])

    assert finding.kind is DriftKind.PLAN_MISMATCH
    assert "(price_team) (plan team's price)" in finding.description
    assert finding.we_bill == PriceTerms.of_plan(STARTER)
    assert finding.stripe_bills is not None
    assert (finding.stripe_bills.price_id, finding.stripe_bills.amount) == (
        "price_team",
        TEAM.amount,
    )
    assert not finding.adoptable


def test_a_dashboard_price_mismatch_shows_what_stripe_bills_against_what_we_think() -> None:
    here = row(remote())
    there = remote(price_id="price_dashboard", unit_amount=1500, currency="usd")

    [finding] = drift(rows=[here], remotes=[listed(there)])

    assert finding.kind is DriftKind.PLAN_MISMATCH
    view = finding.to_view()
    assert view["stripe_bills"]["price_id"] == "price_dashboard"
    assert (view["stripe_bills"]["amount"], view["stripe_bills"]["currency"]) == (1500, "usd")
    assert (view["we_bill"]["price_id"], view["we_bill"]["amount"]) == (
        "price_starter",
        STARTER.amount,
    )
    assert "Stripe bills 15.00 USD/" in finding.description
    assert "(none of our plans' price)" in finding.description


def test_a_price_that_is_the_target_of_the_pending_change_is_in_flight_not_drift() -> None:
    here = row(remote())
    staged = ScheduledChange.at_period_end("chg_1", here, TEAM, now=T0)

    assert (
        drift(rows=[here], remotes=[listed(remote(price_id="price_team"))], pending=[staged]) == []
    )


def test_a_renewal_the_row_has_not_seen_is_behind_not_drift() -> None:
    here = row(remote())
    renewed = remote(start=T0 + timedelta(days=60), anchor=T0)

    assert drift(rows=[here], remotes=[listed(renewed)]) == []


def test_a_trial_that_ended_since_is_behind_not_drift() -> None:
    trial = remote(status="trialing", end=T0 + timedelta(days=7))
    paid = remote(start=T0 + timedelta(days=7), anchor=T0 + timedelta(days=7))

    assert drift(rows=[row(trial)], remotes=[listed(paid)]) == []


def test_a_period_on_another_billing_cycle_is_a_period_mismatch() -> None:
    here = row(remote())
    moved = remote(start=T0 + timedelta(days=45), anchor=T0 + timedelta(days=45))

    [finding] = drift(rows=[here], remotes=[listed(moved)])

    assert finding.kind is DriftKind.PERIOD_MISMATCH
    assert not finding.adoptable


def test_another_state_at_stripe_is_a_state_mismatch() -> None:
    here = row(remote())

    [finding] = drift(rows=[here], remotes=[listed(remote(status="past_due"))])

    assert finding.kind is DriftKind.STATE_MISMATCH
    assert "active here, past_due at Stripe" in finding.description
    assert here.state is SubscriptionState.ACTIVE


def test_a_finding_shows_its_kind_ids_description_and_whether_it_can_be_adopted() -> None:
    [finding] = drift(accounts=[account()], customers=[customer("cus_1")])

    assert finding.to_view() == {
        "kind": "orphan_customer",
        "billing_account_id": "ba_1",
        "customer_ids": ["cus_1"],
        "subscription_id": None,
        "provider_subscription_id": None,
        "description": finding.description,
        "adoptable": True,
        "action": "adopt: register billing account ba_1 with customer cus_1",
        "stripe_bills": None,
        "we_bill": None,
    }


# --- what registration and creation take ------------------------------------------------------


def test_a_registration_takes_the_oldest_of_several_customers_then_the_smallest_id() -> None:
    customers = [
        customer("cus_c", minutes=2),
        customer("cus_b", minutes=1),
        customer("cus_a", minutes=1),
    ]

    assert oldest_customer(customers) == customers[2]
    assert oldest_customer([]) is None


def test_a_retried_creation_takes_the_live_subscription_naming_it_before_an_ended_one() -> None:
    ended = listed(remote("sub_old", status="canceled"), minutes=1)
    live = listed(remote("sub_new"), minutes=5)
    other = listed(remote("sub_other"), subscription_id="sub_2")

    assert existing_subscription([other, ended, live], "sub_1") == live
    assert existing_subscription([other, ended], "sub_1") == ended
    assert existing_subscription([other], "sub_1") is None

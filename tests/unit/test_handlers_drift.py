"""The drift report and its adoptions (``application/handlers/drift/report.py``), on in-memory
ports."""

from __future__ import annotations

from datetime import timedelta

import pytest

from application.handlers.drift.report import (
    ADOPTED,
    NEEDS_A_PERSON,
    adopt_findings,
    drift_report,
    link_customer,
)
from application.requests.operator_requests import AdoptFindings, ReportDrift
from domain.billing.account_details import Address, BillingDetails
from domain.billing.accounts import BillingAccount, BillingAccountState, ProviderCustomer
from domain.drift.report import CustomerLink, DriftKind
from domain.errors import FailedPrecondition
from domain.subscriptions.subscription import ProviderSubscription, Subscription, SubscriptionTerms
from tests.support.fakes.application import FakeApplication
from tests.support.fakes.data import a_plan, an_organization, stored_account

DETAILS = BillingDetails(name="Acme", email="billing@acme.example")


@pytest.fixture
def app() -> FakeApplication:
    app = FakeApplication()
    starter = a_plan("starter", "price_starter")
    app.provider.add_price("price_starter")
    app.db.seed(an_organization("org_1"), starter)
    return app


def pending_account(app: FakeApplication, account_id: str = "ba_1") -> BillingAccount:
    account = BillingAccount.open(
        account_id,
        an_organization("org_1"),
        DETAILS,
        offline=False,
        default_currency="usd",
        now=app.clock.now(),
    )
    app.db.seed(account)
    return account


def linked_account(app: FakeApplication, account_id: str = "ba_1") -> tuple[BillingAccount, str]:
    account = pending_account(app, account_id)
    customer_id = app.provider.add_customer(account.provider_customer())
    account.registered("fake", customer_id, app.clock.now())
    app.db.seed(account)
    return account, customer_id


def made_at_stripe_only(app: FakeApplication, account: BillingAccount) -> str:
    """The customer a registration made before it died (the account never heard of it)."""
    return app.provider.add_customer(account.provider_customer())


def event_types(app: FakeApplication) -> list[str]:
    return [row.type for row in app.db.rows("events")]


def orphan_subscription(
    app: FakeApplication, customer_id: str, subscription_id: str = "sub_9"
) -> ProviderSubscription:
    """A subscription a creation made at Stripe before it died (no row was written)."""
    return app.provider.create_subscription(
        customer_id,
        "price_starter",
        SubscriptionTerms(),
        metadata={
            "org_id": "org_1",
            "billing_account_id": "ba_1",
            "subscription_id": subscription_id,
        },
        idempotency_key=f"{subscription_id}:create-subscription",
    )


def test_a_report_reads_every_customer_and_subscription_and_changes_nothing(
    app: FakeApplication,
) -> None:
    account = pending_account(app)
    made_at_stripe_only(app, account)
    commits = app.db.commits

    [finding] = drift_report(ReportDrift(), app)

    assert finding.kind is DriftKind.ORPHAN_CUSTOMER
    assert len(app.provider.calls_of("customer_pages")) == 1
    assert len(app.provider.calls_of("subscription_pages")) == 1
    assert app.db.commits == commits
    assert stored_account(app).state is BillingAccountState.PENDING


def test_adopting_the_customer_of_a_pending_account_registers_it_once_through_the_outbox(
    app: FakeApplication,
) -> None:
    customer_id = made_at_stripe_only(app, pending_account(app))

    [adoption] = adopt_findings(AdoptFindings(drift_report(ReportDrift(), app)), app)

    assert (adoption.adopted, adoption.outcome) == (True, ADOPTED)
    account = stored_account(app)
    assert (account.state, account.provider, account.provider_id) == (
        BillingAccountState.ACTIVE,
        "fake",
        customer_id,
    )
    assert account.registration_key is None
    assert event_types(app) == ["billing_account.registered"]
    assert drift_report(ReportDrift(), app) == []
    assert app.provider.calls_of("create_customer") == []


def test_several_customers_naming_a_pending_account_need_a_person_and_link_nothing(
    app: FakeApplication,
) -> None:
    account = pending_account(app)
    made_at_stripe_only(app, account)
    app.clock.advance(timedelta(minutes=1))
    made_at_stripe_only(app, account)

    [adoption] = adopt_findings(AdoptFindings(drift_report(ReportDrift(), app)), app)

    assert adoption.finding.kind is DriftKind.DUPLICATE_CUSTOMERS
    assert (adoption.adopted, adoption.outcome) == (False, NEEDS_A_PERSON)
    assert stored_account(app).provider_id is None
    assert event_types(app) == []


def test_an_account_linked_meanwhile_is_not_adopted_again(app: FakeApplication) -> None:
    account = pending_account(app)
    orphan = made_at_stripe_only(app, account)
    report = drift_report(ReportDrift(), app)
    account.registered("fake", "cus_registered_meanwhile", app.clock.now())
    app.db.seed(account)

    [adoption] = adopt_findings(AdoptFindings(report), app)

    assert not adoption.adopted
    assert adoption.outcome.startswith("not adopted: billing account 'ba_1' is linked to")
    assert stored_account(app).provider_id == "cus_registered_meanwhile"
    assert orphan != "cus_registered_meanwhile"
    assert event_types(app) == []


def test_linking_the_customer_an_account_already_has_changes_nothing(app: FakeApplication) -> None:
    account, customer_id = linked_account(app)
    commits = app.db.commits

    assert link_customer(CustomerLink(account.id, customer_id), app).provider_id == customer_id
    assert app.db.commits == commits


def test_a_disabled_account_is_not_linked(app: FakeApplication) -> None:
    account = pending_account(app)
    account.state = BillingAccountState.DISABLED
    app.db.seed(account)

    with pytest.raises(FailedPrecondition) as raised:
        link_customer(CustomerLink(account.id, "cus_1"), app)

    assert raised.value.details[0]["reason"] == "BILLING_ACCOUNT_DISABLED"


def test_a_customer_linked_to_another_account_is_not_linked_twice(app: FakeApplication) -> None:
    _, taken = linked_account(app, "ba_other")
    pending_account(app, "ba_1")

    with pytest.raises(FailedPrecondition) as raised:
        link_customer(CustomerLink("ba_1", taken), app)

    assert "linked to another billing account" in raised.value.message
    assert stored_account(app).provider_id is None


def test_adopting_an_orphan_subscription_records_it_under_the_id_its_metadata_names(
    app: FakeApplication,
) -> None:
    _, customer_id = linked_account(app)
    remote = orphan_subscription(app, customer_id)

    [adoption] = adopt_findings(AdoptFindings(drift_report(ReportDrift(), app)), app)

    assert adoption.adopted
    row = app.db.row("subscriptions", "sub_9")
    assert (row.provider_id, row.plan_id, row.billing_account_id) == (
        remote.id,
        "plan_starter",
        "ba_1",
    )
    assert (row.current_period_end, row.provider_item_id) == (
        remote.current_period_end,
        remote.item_id,
    )
    assert drift_report(ReportDrift(), app) == []


def test_an_orphan_subscription_of_a_customer_adopted_in_the_same_run_waits_for_the_next(
    app: FakeApplication,
) -> None:
    customer_id = made_at_stripe_only(app, pending_account(app))
    orphan_subscription(app, customer_id)

    first = adopt_findings(AdoptFindings(drift_report(ReportDrift(), app)), app)
    second = adopt_findings(AdoptFindings(drift_report(ReportDrift(), app)), app)

    assert [(a.finding.kind, a.adopted) for a in first] == [
        (DriftKind.ORPHAN_CUSTOMER, True),
        (DriftKind.ORPHAN_SUBSCRIPTION, False),
    ]
    assert [(a.finding.kind, a.adopted) for a in second] == [(DriftKind.ORPHAN_SUBSCRIPTION, True)]
    assert drift_report(ReportDrift(), app) == []


def test_an_orphan_subscription_whose_id_was_taken_meanwhile_is_not_adopted(
    app: FakeApplication,
) -> None:
    _, customer_id = linked_account(app)
    orphan_subscription(app, customer_id)
    report = drift_report(ReportDrift(), app)
    elsewhere = ProviderSubscription(
        "sub_elsewhere", "active", "si_x", "price_starter", app.clock.now(), app.clock.now()
    )
    app.db.seed(
        Subscription.started(
            "sub_9", "ba_1", a_plan("starter", "price_starter"), "fake", elsewhere, app.clock.now()
        )
    )

    [adoption] = adopt_findings(AdoptFindings(report), app)

    assert not adoption.adopted
    assert adoption.outcome == "not adopted: subscription 'sub_9' exists, linked to sub_elsewhere"
    assert app.db.row("subscriptions", "sub_9").provider_id == "sub_elsewhere"


def test_a_missing_stripe_subscription_needs_a_person(app: FakeApplication) -> None:
    _, customer_id = linked_account(app)
    remote = orphan_subscription(app, customer_id)
    adopt_findings(AdoptFindings(drift_report(ReportDrift(), app)), app)
    app.provider.delete_subscription(remote.id)

    [adoption] = adopt_findings(AdoptFindings(drift_report(ReportDrift(), app)), app)

    assert adoption.finding.kind is DriftKind.MISSING_SUBSCRIPTION
    assert adoption.outcome == NEEDS_A_PERSON
    assert app.db.row("subscriptions", "sub_9") is not None


def test_a_customer_deleted_at_stripe_is_missing(app: FakeApplication) -> None:
    _, customer_id = linked_account(app)
    app.provider.delete_customer(customer_id)

    assert [finding.kind for finding in drift_report(ReportDrift(), app)] == [
        DriftKind.MISSING_CUSTOMER
    ]


def test_a_report_reads_stripe_s_lists_a_page_per_call_and_finds_the_same(
    app: FakeApplication,
) -> None:
    account = pending_account(app)
    made_at_stripe_only(app, account)
    for number in range(4):
        app.provider.add_customer(
            ProviderCustomer(
                billing_account_id=f"ba_other_{number}",
                org_id="org_other",
                name="Other",
                email="other@example.com",
                phone="",
                address=Address(),
                tax_ids=(),
                metadata={"billing_account_id": f"ba_other_{number}"},
            )
        )
    whole = drift_report(ReportDrift(), app)
    app.provider.page_size = 2

    paged = drift_report(ReportDrift(), app)

    assert paged == whole
    assert len(whole) == 5
    assert len(app.provider.calls_of("customer_pages")) == 1 + 3  # 5 customers, 2 a page

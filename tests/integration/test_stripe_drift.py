"""Drift between Stripe and the database on real parts: the Stripe emulator (a process, through
the real SDK) and SQLite and PostgreSQL. ``billing-worker stripe drift`` runs as an operator
runs it (a process of its own); what a crash leaves behind is made at the emulator directly,
as the crashed process left it."""

from __future__ import annotations

import pytest

from adapters.clock import SystemClock
from adapters.provider.stripe_adapter import StripeBillingProvider
from application.handlers.drift.report import drift_report
from application.requests.operator_requests import (
    ReportDrift,
)
from domain.drift.report import DriftKind
from domain.errors import TransientError
from domain.provider.rate_budget import BudgetUsage, CallKind, Priority
from domain.rules import new_id
from domain.subscriptions.scheduled_changes import ScheduledChange
from domain.subscriptions.subscription import SubscriptionState, SubscriptionTerms
from tests.support.drift_world import DRIFT_FOUND, World, off_plan, resync
from tests.support.emulator import EMULATOR_KEY, EmulatorProcess
from tests.support.records import services_on

# --- customers --------------------------------------------------------------------------------


def test_a_customer_whose_account_never_heard_of_it_is_listed_adopted_and_then_gone(
    world: World,
) -> None:
    account = world.pending_account()
    customer_id = world.customer_at_stripe(account)

    listed = world.drift("--json")
    adopted = world.drift("--adopt", "--json")
    again = world.drift()

    assert listed.status == DRIFT_FOUND, listed.stderr
    [finding] = listed.findings()
    assert (finding["kind"], finding["billing_account_id"], finding["customer_ids"]) == (
        "orphan_customer",
        account.id,
        [customer_id],
    )
    assert finding["adoptable"] is True
    assert adopted.status == 0, adopted.stderr
    assert [found["outcome"] for found in adopted.findings()] == ["adopted"]
    linked = world.account(account.id)
    assert (linked.state.value, linked.provider, linked.provider_id) == (
        "active",
        "stripe",
        customer_id,
    )
    assert world.event_types() == ["billing_account.registered"]
    assert (again.status, again.stdout) == (0, "no drift found\n")
    assert again.stderr == ""


def test_duplicate_customers_are_reported_and_not_adopted(world: World) -> None:
    account = world.pending_account()
    first = world.customer_at_stripe(account)
    world.admin.advance_clock(60)
    second = world.customer_at_stripe(account)

    adopted = world.drift("--adopt", "--json")

    assert adopted.status == DRIFT_FOUND
    [finding] = adopted.findings()
    assert finding["kind"] == "duplicate_customers"
    assert finding["customer_ids"] == [first, second]
    assert finding["outcome"] == "needs a person"
    assert finding["action"].startswith(f"keep {first} (the oldest")
    assert world.account(account.id).provider_id is None
    assert world.event_types() == []


def test_the_table_has_a_header_row_and_a_line_of_what_to_do_under_each_finding(
    world: World,
) -> None:
    account = world.pending_account()
    customer_id = world.customer_at_stripe(account)

    shown = world.drift()

    assert shown.status == DRIFT_FOUND
    header, line, todo, summary = shown.stdout.splitlines()
    assert header.split() == ["KIND", "ADOPTABLE", "IDS", "DESCRIPTION"]
    assert line.split()[:4] == ["orphan_customer", "yes", account.id, customer_id]
    assert (
        todo.strip()
        == f"→ adopt: register billing account {account.id} with customer {customer_id}"
    )
    assert summary == "1 found: 1 adoptable (run with --adopt), 0 need a person"


# --- subscriptions ----------------------------------------------------------------------------


def test_an_orphan_stripe_subscription_is_reported_and_adopted_under_the_id_it_names(
    world: World,
) -> None:
    account = world.registered_account()
    plan = world.plan("starter")
    assert account.provider_id is not None
    assert plan.provider_price_id is not None
    made = world.sdk.v1.subscriptions.create(
        params={
            "customer": account.provider_id,
            "items": [{"price": plan.provider_price_id}],
            "collection_method": "send_invoice",
            "days_until_due": 30,
            "metadata": {
                "org_id": account.org_id,
                "billing_account_id": account.id,
                "subscription_id": "sub_lost_row",
            },
        }
    )

    listed = world.drift("--json")
    adopted = world.drift("--adopt")
    again = world.drift()

    assert listed.status == DRIFT_FOUND
    [finding] = listed.findings()
    assert finding["kind"] == "orphan_subscription"
    assert finding["provider_subscription_id"] == made.id
    assert finding["subscription_id"] == "sub_lost_row"
    assert finding["adoptable"] is True
    assert adopted.status == 0, adopted.stdout + adopted.stderr
    recorded = world.subscription("sub_lost_row")
    assert recorded is not None
    assert (recorded.provider_id, recorded.plan_id, recorded.state) == (
        made.id,
        plan.id,
        SubscriptionState.ACTIVE,
    )
    assert (again.status, again.stdout) == (0, "no drift found\n")


def test_a_stripe_subscription_that_is_not_ours_is_reported_for_a_person(world: World) -> None:
    account = world.registered_account()
    plan = world.plan("starter")
    made = world.sdk.v1.subscriptions.create(
        params={
            "customer": str(account.provider_id),
            "items": [{"price": str(plan.provider_price_id)}],
            "collection_method": "send_invoice",
            "days_until_due": 30,
        }
    )

    adopted = world.drift("--adopt", "--json")

    assert adopted.status == DRIFT_FOUND
    [finding] = adopted.findings()
    assert (finding["kind"], finding["provider_subscription_id"]) == (
        "orphan_subscription",
        made.id,
    )
    assert finding["outcome"] == "needs a person"
    assert "names no subscription of ours" in finding["description"]


def test_a_row_whose_stripe_subscription_is_gone_is_reported(world: World) -> None:
    account = world.registered_account()
    plan = world.plan("starter")
    subscription = world.subscribe(account, plan)
    with world.services.unit_of_work() as uow:
        subscription.provider_id = "sub_deleted_at_stripe"
        uow.subscriptions.save(subscription)
        uow.commit()
    orphan = world.stripe_subscriptions(str(account.provider_id))[0].id

    findings = world.drift("--json").findings()

    assert sorted((found["kind"], found["provider_subscription_id"]) for found in findings) == [
        ("missing_subscription", "sub_deleted_at_stripe"),
        ("orphan_subscription", orphan),
    ]


def test_a_price_changed_at_stripe_behind_our_back_is_a_plan_mismatch(world: World) -> None:
    account = world.registered_account()
    starter, team = world.plan("starter"), world.plan("team", 2900)
    subscription = world.subscribe(account, starter)
    world.sdk.v1.subscriptions.update(
        subscription.provider_id,
        params={
            "items": [
                {"id": str(subscription.provider_item_id), "price": str(team.provider_price_id)}
            ],
            "proration_behavior": "none",
        },
    )

    done = world.drift("--adopt", "--json")

    assert done.status == DRIFT_FOUND
    [finding] = done.findings()
    assert (finding["kind"], finding["subscription_id"]) == ("plan_mismatch", subscription.id)
    assert (
        f"Stripe bills 29.00 USD/month ({team.provider_price_id}) (plan {team.name}'s price)"
        in (finding["description"])
    )
    assert finding["outcome"] == "needs a person"


def test_a_billing_cycle_moved_and_a_cancellation_at_stripe_are_period_and_state_mismatches(
    world: World,
) -> None:
    account = world.registered_account()
    starter = world.plan("starter")
    moved, canceled = world.subscribe(account, starter), world.subscribe(account, starter)
    world.admin.advance_clock(10 * 86_400)
    world.sdk.v1.subscriptions.update(
        moved.provider_id,
        params={"billing_cycle_anchor": {"type": "now"}, "proration_behavior": "none"},
    )
    world.sdk.v1.subscriptions.cancel(canceled.provider_id)

    findings = world.drift("--json").findings()

    assert sorted((found["kind"], found["subscription_id"]) for found in findings) == sorted(
        [("period_mismatch", moved.id), ("state_mismatch", canceled.id)]
    )


def test_a_renewal_at_stripe_the_row_has_not_seen_is_no_drift(world: World) -> None:
    account = world.registered_account()
    # Invoices due in a year: the renewals' invoices are not overdue (past_due) yet.
    world.subscribe(account, world.plan("starter"), terms=SubscriptionTerms(days_until_due=365))
    world.admin.advance_clock(70 * 86_400)

    done = world.drift()

    assert (done.status, done.stdout) == (0, "no drift found\n"), done.stdout


# --- a creation retried under the same id -----------------------------------------------------


def test_a_creation_whose_answer_was_lost_and_key_forgotten_makes_one_stripe_subscription(
    world: World,
) -> None:
    account = world.registered_account()
    plan = world.plan("starter")
    world.admin.add_fault("drop", "POST /v1/subscriptions", after_execution=True, count=1)
    with pytest.raises(TransientError):
        world.subscribe(account, plan, subscription_id="sub_retried")
    assert world.subscription("sub_retried") is None
    [made] = world.stripe_subscriptions(str(account.provider_id))

    world.admin.advance_clock(25 * 3600)  # Stripe forgot the idempotency key
    subscription = world.subscribe(account, plan, subscription_id="sub_retried")

    assert [s.id for s in world.stripe_subscriptions(str(account.provider_id))] == [made.id]
    assert subscription.provider_id == made.id
    stored = world.subscription("sub_retried")
    assert stored is not None
    assert stored.provider_id == made.id
    creations = [r for r in world.admin.requests("/v1/subscriptions", "POST") if not r.replayed]
    assert len(creations) == 1


def test_a_creation_retried_within_the_key_window_is_one_stripe_subscription_too(
    world: World,
) -> None:
    account = world.registered_account()
    plan = world.plan("starter")
    world.admin.add_fault("drop", "POST /v1/subscriptions", after_execution=True, count=1)
    with pytest.raises(TransientError):
        world.subscribe(account, plan, subscription_id="sub_soon")

    world.subscribe(account, plan, subscription_id="sub_soon")

    assert len(world.stripe_subscriptions(str(account.provider_id))) == 1
    assert world.drift().status == 0


def test_a_registration_with_two_customers_takes_the_oldest(world: World) -> None:
    account = world.pending_account()
    oldest = world.customer_at_stripe(account)
    world.admin.advance_clock(60)
    world.customer_at_stripe(account)
    provider = world.services.billing_provider()

    assert provider.find_customer(account.id) == oldest


# --- what the report costs ---------------------------------------------------------------------


class RecordingBudget:
    """A rate budget that never waits and keeps what each call asked for."""

    enabled = True

    def __init__(self) -> None:
        self.calls: list[tuple[CallKind, Priority]] = []

    def acquire(self, kind: CallKind, priority: Priority) -> float:
        self.calls.append((kind, priority))
        return 0.0

    def rate_limited(self, kind: CallKind, retry_after: float | None) -> None:
        return None

    def effective_rate(self, kind: CallKind) -> float:
        return 25.0

    def usage(self) -> BudgetUsage:
        return BudgetUsage(account="", mode="test", burst=0, max_wait_seconds=0.0, kinds={})


def test_the_report_reads_stripe_at_bulk_priority_on_the_shared_budget(
    world: World, emulator: EmulatorProcess
) -> None:
    budget = RecordingBudget()
    provider = StripeBillingProvider(EMULATOR_KEY, api_base=emulator.url, budget=budget)
    world.customer_at_stripe(world.pending_account())

    [finding] = drift_report(ReportDrift(), services_on(world.sessions, provider=provider))

    assert finding.kind is DriftKind.ORPHAN_CUSTOMER
    assert budget.calls == [(CallKind.READ, Priority.BULK)] * 2


# --- money: what Stripe bills against what we think (issue 29) ---------------------------------


def test_a_dashboard_price_is_shown_with_its_amount_counted_by_the_gauge_and_its_renewal_caught(
    world: World,
) -> None:
    account = world.registered_account()
    starter = world.plan("starter", 900)
    subscription = world.subscribe(account, starter, terms=SubscriptionTerms(days_until_due=365))
    dashboard = world.sdk.v1.prices.create(
        params={
            "currency": "usd",
            "unit_amount": 1500,
            "recurring": {"interval": "month"},
            "product": str(starter.provider_product_id),
        }
    )
    world.sdk.v1.subscriptions.update(  # someone, in Stripe's dashboard
        subscription.provider_id,
        params={
            "items": [{"id": str(subscription.provider_item_id), "price": str(dashboard.id)}],
            "proration_behavior": "none",
        },
    )
    assert off_plan(world) == {"unknown_price": 0, "other_plan": 0}  # not read yet

    resync(world, subscription.provider_id)  # a webhook, the sweep or `stripe sync`
    counted = off_plan(world)
    resync(world, subscription.provider_id)  # every sweep reads it again: still one
    again = off_plan(world)
    world.admin.advance_clock(31 * 86_400)  # the renewal bills Stripe's price
    findings = {found["kind"]: found for found in world.drift("--json").findings()}
    ids_only = world.drift("--json", "--skip-invoices").findings()

    assert counted == again == {"unknown_price": 1, "other_plan": 0}
    renewals = world.sdk.v1.invoices.list(
        params={"subscription": subscription.provider_id, "limit": 10}
    ).data
    [renewal] = [invoice for invoice in renewals if invoice.billing_reason == "subscription_cycle"]
    assert [line.amount for line in renewal.lines.data] == [1500]  # what the customer pays
    assert sorted(findings) == ["plan_mismatch", "renewal_mismatch"]
    mismatch = findings["plan_mismatch"]
    assert mismatch["stripe_bills"] == {
        "price_id": dashboard.id,
        "amount": 1500,
        "currency": "usd",
        "interval": "month",
        "interval_count": 1,
    }
    assert (mismatch["we_bill"]["price_id"], mismatch["we_bill"]["amount"]) == (
        starter.provider_price_id,
        900,
    )
    assert "Stripe bills 15.00 USD/month" in mismatch["description"]
    assert "9.00 USD/month" in mismatch["description"]
    caught = findings["renewal_mismatch"]
    assert (caught["subscription_id"], caught["stripe_bills"]["amount"]) == (subscription.id, 1500)
    assert caught["we_bill"]["amount"] == 900
    assert [found["kind"] for found in ids_only] == ["plan_mismatch"]

    world.sdk.v1.subscriptions.update(  # put right at Stripe
        subscription.provider_id,
        params={
            "items": [
                {"id": str(subscription.provider_item_id), "price": str(starter.provider_price_id)}
            ],
            "proration_behavior": "none",
        },
    )
    resync(world, subscription.provider_id)
    assert off_plan(world) == {"unknown_price": 0, "other_plan": 0}


def test_a_renewal_billed_at_the_old_price_while_our_row_says_the_new_plan_is_caught(
    world: World,
) -> None:
    """Row 1's record: team→starter recorded at the boundary, the write reached Stripe after
    it renewed at team's price. The price at Stripe is starter's now: ids agree, money not."""
    account = world.registered_account()
    starter, team = world.plan("starter", 900), world.plan("team", 2900)
    subscription = world.subscribe(account, team, terms=SubscriptionTerms(days_until_due=365))
    boundary = subscription.current_period_end
    world.admin.advance_clock(int(boundary.timestamp()) - world.admin.now() + 60)
    late_write = world.services.billing_provider().change_subscription_price(
        subscription.provider_id,
        str(subscription.provider_item_id),
        str(starter.provider_price_id),
        proration_behavior="none",
        idempotency_key=f"{subscription.id}:late",
    )
    now = SystemClock().now()
    with world.services.unit_of_work() as uow:
        row = uow.subscriptions.get(subscription.id, for_update=True)
        assert row is not None
        change = ScheduledChange.at_period_end(new_id("chg"), row, starter, now=now)
        change.applied(now)
        row.entered_period(
            starter.id, late_write.current_period_start, late_write.current_period_end, now
        )
        row.billed_price_id = late_write.price_id
        uow.scheduled_changes.add(change)
        uow.subscriptions.save(row)
        uow.commit()

    findings = world.drift("--json").findings()
    ids_only = world.drift("--json", "--skip-invoices")

    invoices = world.sdk.v1.invoices.list(params={"subscription": subscription.provider_id}).data
    [renewal] = [invoice for invoice in invoices if invoice.billing_reason == "subscription_cycle"]
    assert [line.amount for line in renewal.lines.data] == [2900]
    assert late_write.current_period_start == boundary
    assert (ids_only.status, ids_only.findings()) == (0, [])  # the ids agree
    [caught] = findings
    assert (caught["kind"], caught["subscription_id"]) == ("renewal_mismatch", subscription.id)
    assert (caught["stripe_bills"]["amount"], caught["stripe_bills"]["price_id"]) == (
        2900,
        team.provider_price_id,
    )
    assert (caught["we_bill"]["amount"], caught["we_bill"]["price_id"]) == (
        900,
        starter.provider_price_id,
    )
    assert f"plan {starter.name} (9.00 USD/month" in caught["description"]

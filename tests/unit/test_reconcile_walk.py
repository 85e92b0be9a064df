"""Beat's reconciliation sweep walks Stripe's lists a page per call (issue 46): its place kept
between runs, a new pass after the list's end, its budget counted in calls, only the rows that
differ brought in line, and a row Stripe no longer lists read alone after a completed pass.
On the fakes; the same walk over the emulator through the SDK is in
``tests/integration/test_reconcile_walk.py``."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import pytest

from application.handlers.provider.reconcile import reconcile_with_stripe
from application.requests.sweeps import ReconcileWithStripe
from domain.billing.discounts import ProviderDiscount
from domain.provider.pages import ProviderWalk, WalkedList
from domain.subscriptions.subscription import Subscription, SubscriptionState
from tests.support.fakes.application import FakeApplication
from tests.support.fakes.data import Subscribed, subscribed
from tests.support.fakes.provider_requests import rejected

SECOND = timedelta(seconds=1)


@pytest.fixture
def app() -> FakeApplication:
    app = FakeApplication()
    app.provider.page_size = 2
    return app


@pytest.fixture
def sub(app: FakeApplication) -> Subscribed:
    return subscribed(app)


def more_subscriptions(app: FakeApplication, sub: Subscribed, count: int) -> list[str]:
    """``count`` more subscriptions of the account, on both sides, each made a second after
    the one before (Stripe lists the newest first); their provider ids, oldest first."""
    first = app.provider.subscriptions[sub.provider_id]
    made = []
    for number in range(2, count + 2):
        app.clock.advance(SECOND)
        remote = replace(first, id=f"sub_remote_{number}", item_id=f"si_{number}")
        app.provider.add_subscription(remote, customer_id="cus_seeded")
        app.db.seed(
            Subscription.started(
                f"sub_{number}", sub.account_id, sub.starter, "fake", remote, app.clock.now()
            )
        )
        made.append(remote.id)
    return made


def sweep(app: FakeApplication, reads: int) -> dict[str, int]:
    return reconcile_with_stripe(ReconcileWithStripe(reads=reads), app)


def walk(app: FakeApplication, listed: WalkedList) -> ProviderWalk:
    found: ProviderWalk = app.db.row("provider_walks", listed)
    return found


def pages_read(app: FakeApplication) -> list[str | None]:
    """The cursor each page of subscriptions was read after, in order."""
    return [call.arguments[0] for call in app.provider.calls_of("subscription_pages")]


def stored(app: FakeApplication, subscription_id: str) -> Subscription:
    found: Subscription = app.db.row("subscriptions", subscription_id)
    return found


def test_a_run_reads_pages_of_subscriptions_and_the_next_run_resumes_after_the_last_one(
    app: FakeApplication, sub: Subscribed
) -> None:
    newest_first = [*reversed(more_subscriptions(app, sub, 6)), sub.provider_id]  # 7

    sweep(app, reads=3)  # one page of customers, two of subscriptions
    assert pages_read(app) == [None, newest_first[1]]
    assert walk(app, WalkedList.SUBSCRIPTIONS).after == newest_first[3]

    sweep(app, reads=3)

    assert pages_read(app) == [None, newest_first[1], newest_first[3], newest_first[5]]


def test_the_walk_stops_at_the_end_of_the_list_and_starts_a_new_pass_next_run(
    app: FakeApplication, sub: Subscribed
) -> None:
    more_subscriptions(app, sub, 2)  # 3: two pages

    sweep(app, reads=10)
    ended = walk(app, WalkedList.SUBSCRIPTIONS)
    sweep(app, reads=10)

    assert len(pages_read(app)) == 4  # two per run: a run stops at the pass's end
    assert pages_read(app)[2] is None  # the second run started over
    assert ended.after is None
    assert ended.completed_pass_started_at == app.clock.now()


def test_the_budget_counts_calls_to_stripe_not_objects(
    app: FakeApplication, sub: Subscribed
) -> None:
    more_subscriptions(app, sub, 19)  # 20 subscriptions, 10 pages of 2

    sweep(app, reads=5)

    assert len(app.provider.calls_of("customer_pages")) == 1
    assert len(app.provider.calls_of("subscription_pages")) == 4  # 8 subscriptions read
    assert app.provider.calls_of("get_subscription") == []


def test_a_subscription_that_differs_is_brought_in_line_from_its_listed_copy_and_counted(
    app: FakeApplication, sub: Subscribed
) -> None:
    others = more_subscriptions(app, sub, 3)
    app.provider.cancel_subscription(others[0])
    app.clock.advance(SECOND)

    found = sweep(app, reads=10)

    assert found == {"status": 1}
    assert stored(app, "sub_2").state is SubscriptionState.CANCELED
    assert app.provider.calls_of("get_subscription") == []  # the listed copy was enough
    # The rows equal to Stripe's are recorded as read by the page too.
    assert {stored(app, f"sub_{n}").synced_at for n in (1, 3, 4)} == {app.clock.now()}
    assert [row.type for row in app.db.rows("events")] == ["subscription.synced"]


def test_a_row_stripe_no_longer_lists_is_read_alone_after_the_pass_and_found_missing(
    app: FakeApplication, sub: Subscribed
) -> None:
    more_subscriptions(app, sub, 2)
    sweep(app, reads=10)  # a first pass reads every row
    app.provider.delete_subscription("sub_remote_2")
    app.clock.advance(SECOND)

    first = sweep(app, reads=10)  # the pass that does not show it, then its read alone
    again = sweep(app, reads=10)

    assert first == {"missing": 1}
    assert [call.arguments for call in app.provider.calls_of("get_subscription")] == [
        ("sub_remote_2",)
    ]
    assert again == {}  # read since: not read alone again until a pass misses it again
    assert stored(app, "sub_2").state is SubscriptionState.ACTIVE  # reported, not decided


def test_an_unlisted_row_whose_read_is_refused_is_not_missing_and_is_read_again(
    app: FakeApplication, sub: Subscribed
) -> None:
    sweep(app, reads=10)
    read_by_the_pass = stored(app, sub.subscription_id).synced_at
    app.provider.delete_subscription(sub.provider_id)
    app.clock.advance(SECOND)
    app.provider.fail_next("get_subscription", rejected("plan", "Invalid expand: 'items.x'"))

    refused = sweep(app, reads=10)

    assert refused == {}
    assert stored(app, sub.subscription_id).synced_at == read_by_the_pass
    assert sweep(app, reads=10) == {"missing": 1}


def test_a_customer_deleted_at_stripe_is_found_by_the_read_after_the_pass_that_missed_it(
    app: FakeApplication, sub: Subscribed
) -> None:
    sweep(app, reads=10)
    app.provider.delete_customer("cus_seeded")
    app.clock.advance(SECOND)

    found = sweep(app, reads=10)

    assert found == {"customer_deleted": 1, "status": 1}
    assert app.db.row("billing_accounts", sub.account_id).state == "deleted"


def test_a_walk_whose_cursor_is_gone_at_stripe_starts_a_new_pass(
    app: FakeApplication, sub: Subscribed
) -> None:
    more_subscriptions(app, sub, 4)  # 5: three pages
    sweep(app, reads=2)  # one page of subscriptions
    cursor = walk(app, WalkedList.SUBSCRIPTIONS).after
    assert cursor is not None
    app.provider.delete_subscription(cursor)

    sweep(app, reads=2)
    sweep(app, reads=2)

    assert pages_read(app) == [None, cursor, None]


def test_a_discount_put_on_at_stripe_is_kept_on_the_row_by_the_walk_without_a_read(
    app: FakeApplication, sub: Subscribed
) -> None:
    others = more_subscriptions(app, sub, 2)
    listed = app.provider.subscriptions[others[0]]
    app.provider.subscriptions[others[0]] = replace(
        listed, discounts=(ProviderDiscount("di_1", "GOODWILL", percent_off=Decimal(25)),)
    )
    app.clock.advance(SECOND)

    sweep(app, reads=10)

    assert stored(app, "sub_2").billed_discount == "25 % off (coupon GOODWILL)"
    assert app.provider.calls_of("get_subscription") == []  # the listed copy was enough

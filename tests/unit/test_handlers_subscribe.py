"""Subscribing an account (``application/handlers/subscriptions/subscribe.py``), on in-memory
ports: a retried creation takes the subscription an earlier attempt made at the provider, never
a second."""

from __future__ import annotations

from datetime import timedelta

import pytest

from application.handlers.subscriptions.subscribe import create_subscription
from application.requests.operator_requests import CreateSubscription
from domain.billing.account_details import BillingDetails
from domain.billing.accounts import BillingAccount
from domain.errors import FailedPrecondition, TransientError
from domain.subscriptions.subscription import Subscription, SubscriptionTerms
from tests.support.fakes.application import FakeApplication
from tests.support.fakes.data import a_plan, an_organization


@pytest.fixture
def app() -> FakeApplication:
    app = FakeApplication()
    now = app.clock.now()
    org = an_organization("org_1")
    account = BillingAccount.open(
        "ba_1",
        org,
        BillingDetails(name="Acme", email="billing@acme.example"),
        offline=True,
        default_currency="usd",
        now=now,
    )
    customer_id = app.provider.create_customer(account.provider_customer(), idempotency_key="k")
    account.registered("fake", customer_id, now)
    for name in ("starter", "team"):
        app.provider.add_price(f"price_{name}")
    app.db.seed(org, account, a_plan("starter", "price_starter"), a_plan("team", "price_team"))
    return app


def subscribe(app: FakeApplication, subscription_id: str | None = "sub_1") -> Subscription:
    return create_subscription(
        CreateSubscription(
            org_id="org_1",
            billing_account_id="ba_1",
            plan_ref="starter",
            subscription_id=subscription_id,
        ),
        app,
    )


def lost_answer() -> TransientError:
    return TransientError("stripe create subscription: connection failed")


def test_a_retried_creation_takes_the_subscription_the_first_attempt_made(
    app: FakeApplication,
) -> None:
    app.provider.fail_next("create_subscription", lost_answer(), after_execution=True)
    with pytest.raises(TransientError):
        subscribe(app)
    assert app.db.rows("subscriptions") == []
    [made] = app.provider.subscriptions

    app.clock.advance(timedelta(hours=25))  # the provider forgot the idempotency key
    subscription = subscribe(app)

    assert list(app.provider.subscriptions) == [made]
    assert subscription.provider_id == made
    assert app.db.row("subscriptions", "sub_1").provider_id == made
    assert len(app.provider.calls_of("create_subscription")) == 1
    assert len(app.provider.calls_of("find_subscription")) == 2


def test_a_creation_under_a_new_id_does_not_look_for_an_earlier_attempt(
    app: FakeApplication,
) -> None:
    subscription = subscribe(app, subscription_id=None)

    assert app.provider.calls_of("find_subscription") == []
    assert list(app.provider.subscriptions) == [subscription.provider_id]


def test_a_subscription_found_on_another_price_is_left_to_a_person(app: FakeApplication) -> None:
    app.provider.fail_next("create_subscription", lost_answer(), after_execution=True)
    with pytest.raises(TransientError):
        subscribe(app)
    [made] = app.provider.subscriptions
    app.provider.change_subscription_price(
        made, f"si_{made.removeprefix('sub_')}", "price_team",
        proration_behavior="none", idempotency_key="by-hand",
    )  # fmt: skip

    with pytest.raises(FailedPrecondition) as raised:
        subscribe(app)

    assert raised.value.details[0]["reason"] == "PROVIDER_SUBSCRIPTION_EXISTS"
    assert "billing-worker stripe drift" in raised.value.message
    assert list(app.provider.subscriptions) == [made]
    assert app.db.rows("subscriptions") == []


def test_a_subscription_recorded_meanwhile_by_an_adoption_is_the_one_returned(
    app: FakeApplication,
) -> None:
    def adopted_meanwhile() -> None:
        [made] = app.provider.subscriptions.values()
        with app.unit_of_work() as uow:
            plan = uow.plans.get("plan_starter")
            assert plan is not None
            uow.subscriptions.add(
                Subscription.started("sub_1", "ba_1", plan, "fake", made, app.clock.now())
            )
            uow.commit()

    app.db.before_next_commit(adopted_meanwhile)

    subscription = subscribe(app)

    assert subscription.provider_id == app.db.row("subscriptions", "sub_1").provider_id
    assert len(app.provider.subscriptions) == 1


def test_a_creation_with_terms_sends_them_and_our_ids_as_metadata(app: FakeApplication) -> None:
    create_subscription(
        CreateSubscription(
            org_id="org_1",
            billing_account_id="ba_1",
            plan_ref="starter",
            subscription_id="sub_1",
            terms=SubscriptionTerms(trial_days=7),
        ),
        app,
    )

    [call] = app.provider.calls_of("create_subscription")
    assert call.arguments[3] == {
        "org_id": "org_1",
        "billing_account_id": "ba_1",
        "subscription_id": "sub_1",
    }

"""The Stripe adapter over real HTTP, through the real SDK, against the Stripe emulator."""

from __future__ import annotations

import logging
import threading
import time
import uuid

import pytest

from adapters.provider.stripe_adapter import StripeBillingProvider, build_provider
from adapters.provider.stripe_requests import STRIPE_API_VERSION
from domain.billing.account_details import Address, TaxEntry
from domain.billing.accounts import ProviderCustomer
from domain.errors import (
    FailedPrecondition,
    GoneAtProvider,
    Internal,
    InvalidArgument,
    TransientError,
    Unavailable,
)
from domain.subscriptions.plans import ProviderPlan
from domain.subscriptions.subscription import SubscriptionTerms
from stripe_emulator import EmulatorAdmin
from tests.emulator.support import sdk_client
from tests.support.emulator import EmulatorProcess


def customer(account_id: str | None = None, tax_id: str = "GB123456789") -> ProviderCustomer:
    account_id = account_id or f"ba_{uuid.uuid4().hex}"
    return ProviderCustomer(
        billing_account_id=account_id,
        org_id="org_1",
        name="Acme",
        email="billing@acme.example",
        phone="+442079460958",
        address=Address(line1="1 High Street", city="London", country="GB"),
        tax_ids=(TaxEntry(type="gb_vat", id=tax_id),),
        metadata={"org_id": "org_1", "billing_account_id": account_id},
    )


def test_one_idempotency_key_makes_one_customer(
    provider: StripeBillingProvider, admin: EmulatorAdmin
) -> None:
    first = provider.create_customer(customer("ba_1"), idempotency_key="ba_1:create")
    again = provider.create_customer(customer("ba_1"), idempotency_key="ba_1:create")

    assert first == again
    executed = [r for r in admin.requests("/v1/customers", "POST") if not r.replayed]
    assert len(executed) == 1


def test_every_request_carries_the_pinned_api_version(
    provider: StripeBillingProvider, admin: EmulatorAdmin
) -> None:
    customer_id = provider.create_customer(customer("ba_v"), idempotency_key="ba_v:create")
    provider.find_customer("ba_v")
    price = provider.create_plan_price(
        ProviderPlan("plan_v", "v", "V", 900, "usd", "month"), idempotency_key="plan_v:k"
    )
    created = provider.create_subscription(
        customer_id,
        price.price_id,
        SubscriptionTerms(),
        metadata={"subscription_id": "sub_v"},
        idempotency_key="sub_v:create",
    )
    provider.get_subscription(created.id)

    sent = admin.requests()
    assert len(sent) == 5
    assert {request.stripe_version for request in sent} == {STRIPE_API_VERSION}


def test_a_customer_is_found_by_its_billing_account(provider: StripeBillingProvider) -> None:
    created = provider.create_customer(customer("ba_found"), idempotency_key="k-found")

    assert provider.find_customer("ba_found") == created
    assert provider.find_customer("ba_missing") is None


def test_an_invalid_tax_id_is_an_invalid_argument_on_the_commands_field(
    provider: StripeBillingProvider,
) -> None:
    with pytest.raises(InvalidArgument) as error:
        provider.create_customer(customer(tax_id="GB1"), idempotency_key="k-bad-tax")

    violation = error.value.details[0]["fieldViolations"][0]
    assert violation["field"] == "account.tax_data[0].id"
    assert "gb_vat" in violation["description"]


def test_a_subscription_stripe_does_not_hold_is_gone_at_the_provider(
    provider: StripeBillingProvider,
) -> None:
    with pytest.raises(GoneAtProvider) as read:
        provider.get_subscription("sub_missing000000000000")
    with pytest.raises(GoneAtProvider) as written:
        provider.change_subscription_price(
            "sub_missing000000000000",
            "si_missing00000000000000",
            "price_missing00000000000",
            proration_behavior="none",
            idempotency_key="k-gone",
        )

    for gone in (read.value, written.value):
        info = gone.details[1]["metadata"]
        assert (info["stripe_code"], info["status"], info["param"]) == (
            "resource_missing",
            "404",
            "id",
        )
        assert "No such subscription" in gone.message


def test_a_missing_object_named_by_a_parameter_is_refused_not_gone(
    provider: StripeBillingProvider,
) -> None:
    # Stripe answers 404 resource_missing here too, naming the parameter: the request is
    # wrong, the object it addresses is not gone.
    with pytest.raises(InvalidArgument) as refused:
        provider.create_subscription(
            "cus_missing000000000000",
            "price_missing00000000000",
            SubscriptionTerms(),
            metadata={"subscription_id": "sub_param"},
            idempotency_key="k-param",
        )

    assert not isinstance(refused.value, GoneAtProvider)
    info = refused.value.details[1]["metadata"]
    assert (info["stripe_code"], info["param"]) == ("resource_missing", "customer")


@pytest.mark.parametrize(
    ("kind", "options"),
    [
        ("api_error", {}),
        ("service_unavailable", {}),
        ("lock_timeout", {}),
        ("rate_limit", {}),
        ("drop", {}),
        ("hang", {"hang_seconds": 10}),
    ],
)
def test_transient_failures_are_transient_errors(
    provider: StripeBillingProvider, admin: EmulatorAdmin, kind: str, options: dict[str, float]
) -> None:
    admin.add_fault(kind, "POST /v1/customers", count=1, **options)  # type: ignore[arg-type]

    with pytest.raises(TransientError):
        provider.create_customer(customer(), idempotency_key=f"k-{kind}")


def test_retry_after_reaches_the_retry_policy(
    provider: StripeBillingProvider, admin: EmulatorAdmin
) -> None:
    admin.add_fault("rate_limit", "POST /v1/customers", count=1, retry_after=3)

    with pytest.raises(TransientError) as error:
        provider.create_customer(customer(), idempotency_key="k-retry-after")

    assert error.value.retry_after == 3.0


def test_a_request_stripe_is_still_running_under_the_key_is_waited_for_not_failed(
    provider: StripeBillingProvider, admin: EmulatorAdmin
) -> None:
    """A delivery that died left its request running at Stripe (slow, here): the next
    delivery, under the same key, is answered 409 ``idempotency_key_in_use`` until it ends,
    then gets its answer, replayed. One customer, and no failure."""
    admin.add_fault("latency", "POST /v1/customers", count=1, latency_ms=2000)
    answers: list[str] = []
    first = threading.Thread(
        target=lambda: answers.append(
            provider.create_customer(customer("ba_slow"), idempotency_key="k-slow")
        )
    )
    first.start()
    time.sleep(0.5)  # the first request is inside Stripe, its key in use

    again = provider.create_customer(customer("ba_slow"), idempotency_key="k-slow")
    first.join()

    assert answers == [again]
    sent = admin.requests("/v1/customers", "POST")
    assert [request.status for request in sent].count(409) >= 1
    assert len([request for request in sent if request.status == 200 and not request.replayed]) == 1


def test_a_failure_stripe_stored_under_the_key_is_not_retried(
    provider: StripeBillingProvider, admin: EmulatorAdmin
) -> None:
    admin.add_fault("api_error", "POST /v1/customers", count=1, after_execution=True)

    with pytest.raises(Unavailable):
        provider.create_customer(customer(), idempotency_key="k-stored-500")


def test_a_wrong_api_key_is_an_internal_error(emulator: EmulatorProcess) -> None:
    wrong = StripeBillingProvider("sk_test_wrong", api_base=emulator.url, timeout=5)

    with pytest.raises(Internal):
        wrong.create_customer(customer(), idempotency_key="k-wrong-key")


def test_without_a_key_online_registration_is_a_failed_precondition() -> None:
    with pytest.raises(FailedPrecondition, match="offline"):
        build_provider(None, None, 5)


def test_every_page_of_customers_is_listed(
    provider: StripeBillingProvider, admin: EmulatorAdmin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(provider, "page_size", 2)
    created = [
        provider.create_customer(customer(f"ba_page_{n}"), idempotency_key=f"k-page-{n}")
        for n in range(5)
    ]

    listed = provider.list_customers()

    assert sorted(found.id for found in listed) == sorted(created)
    assert {found.billing_account_id for found in listed} == {f"ba_page_{n}" for n in range(5)}
    pages = [r for r in admin.requests("/v1/customers", "GET") if r.path == "/v1/customers"]
    assert len(pages) == 3


def test_every_page_of_a_search_is_read_and_the_oldest_customer_taken_with_a_warning(
    provider: StripeBillingProvider,
    admin: EmulatorAdmin,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(provider, "page_size", 1)
    made = []
    for n in range(3):
        made.append(provider.create_customer(customer("ba_dup"), idempotency_key=f"k-dup-{n}"))
        admin.advance_clock(60)

    with caplog.at_level(logging.WARNING, logger="adapters.provider.stripe_customers"):
        found = provider.find_customer("ba_dup")

    assert found == made[0]
    assert len(admin.requests("/v1/customers/search", "GET")) == 3
    [warning] = caplog.records
    assert warning.getMessage() == (
        f"3 Stripe customers name billing account ba_dup; registration takes the oldest, "
        f"{made[0]} (`billing-worker stripe drift` lists the others)"
    )


def test_every_page_of_subscriptions_is_listed_whatever_their_status(
    provider: StripeBillingProvider, admin: EmulatorAdmin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(provider, "page_size", 2)
    customer_id = provider.create_customer(customer("ba_subs"), idempotency_key="k-subs")
    price = provider.create_plan_price(
        ProviderPlan("plan_l", "l", "L", 900, "usd", "month"), idempotency_key="plan_l:k"
    )
    made = [
        provider.create_subscription(
            customer_id,
            price.price_id,
            SubscriptionTerms(),
            metadata={"subscription_id": f"sub_l{n}", "billing_account_id": "ba_subs"},
            idempotency_key=f"sub_l{n}:create",
        )
        for n in range(3)
    ]
    sdk_client(admin.base_url).v1.subscriptions.cancel(made[0].id)

    listed = provider.list_subscriptions()

    assert sorted(remote.id for remote in listed) == sorted(sub.id for sub in made)
    by_id = {remote.id: remote for remote in listed}
    assert by_id[made[0].id].subscription.status == "canceled"
    assert by_id[made[1].id].customer_id == customer_id
    assert by_id[made[1].id].subscription_id == "sub_l1"
    assert by_id[made[1].id].subscription == made[1]
    assert provider.list_subscriptions("cus_someone_else") == []
    assert provider.find_subscription(customer_id, "sub_l2") == made[2]
    assert provider.find_subscription(customer_id, "sub_l9") is None

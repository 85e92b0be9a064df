""":class:`FakeBillingProvider` mirrors Stripe as the adapter (``adapters/provider/stripe_*.py``)
sees it: one object per idempotency key (a repeated key replays the first answer, a refusal
included; the same key with other parameters or for another operation is an ``Internal`` error,
Stripe's ``IdempotencyError``), keys forgotten after 24 hours on the fake clock, customers
searchable by their billing account, and failures scripted per operation
(:class:`~tests.support.fakes.provider_requests.RecordedRequests`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from domain.billing.accounts import ProviderCustomer
from domain.drift.report import (
    RemoteCustomer,
    RemoteSubscription,
    existing_subscription,
    oldest_customer,
)
from domain.errors import PaymentActionRequired, PaymentFailed, error_info
from domain.operations.console import InvoiceView
from domain.provider.pages import ListedPage
from domain.provider.sync import ProviderCustomerState, RegisteredEndpoint
from domain.subscriptions.change_previews import ChangePreview, PreviewLine
from domain.subscriptions.plans import ProviderPlan, ProviderPrice
from domain.subscriptions.proration import PaymentBehavior, ProrationBehavior
from domain.subscriptions.renewals import BilledInvoice
from domain.subscriptions.subscription import ProviderSubscription, SubscriptionTerms
from tests.support.fakes.clock import T0, FakeClock
from tests.support.fakes.provider_requests import RecordedRequests, gone, rejected


class _Listed(Protocol):
    @property
    def id(self) -> str: ...


L = TypeVar("L", bound=_Listed)


PENDING_UPDATE_LIFETIME = timedelta(hours=23)
"""Stripe drops a pending update unpaid 23 hours after it was made (or at the period's end)."""


class FakeBillingProvider(RecordedRequests):
    """An in-memory Stripe (``domain.ports.provider.BillingProvider``)."""

    page_size = 100
    """Objects per page of :meth:`customer_pages` and :meth:`subscription_pages` (Stripe's
    most; fewer in the tests that walk many pages)."""

    def __init__(self, clock: FakeClock, *, name: str = "fake") -> None:
        super().__init__(clock)
        self._name = name
        self.customers: dict[str, ProviderCustomer] = {}
        self.prices: dict[str, ProviderPlan] = {}
        self.inactive_prices: set[str] = set()
        self.subscriptions: dict[str, ProviderSubscription] = {}
        self._ids = itertools.count(1)
        self.declining: set[str] = set()
        self.authenticating: set[str] = set()
        self.deleted_customers: set[str] = set()
        self.webhook_endpoints: dict[str, tuple[str, tuple[str, ...]]] = {}
        """Endpoint id → its URL and event types."""
        self.customers_created: dict[str, datetime] = {}
        self.subscription_owners: dict[str, _Owner] = {}
        self.invoices: dict[str, list[InvoiceView]] = {}
        self.upcoming: dict[str, InvoiceView] = {}
        """Provider subscription id → its next invoice."""
        self.billed_invoices: dict[str, list[BilledInvoice]] = {}
        """By provider subscription id, newest first: what the money check reads."""
        """Provider subscription id → its invoices, newest first."""

    @property
    def name(self) -> str:
        return self._name

    # -- for the tests ----------------------------------------------------------------------

    def add_price(self, price_id: str, *, currency: str = "usd", amount: int = 1000) -> None:
        self.prices[price_id] = ProviderPlan(
            price_id, price_id, price_id, amount, currency, "month"
        )

    def deactivate_price(self, price_id: str) -> None:
        self.inactive_prices.add(price_id)

    def add_subscription(
        self,
        subscription: ProviderSubscription,
        *,
        customer_id: str = "",
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self.subscriptions[subscription.id] = subscription
        self.subscription_owners[subscription.id] = _Owner(
            customer_id, dict(metadata or {}), self._clock.now()
        )

    def cancel_subscription(self, provider_id: str) -> None:
        self._replace(provider_id, status="canceled")

    def renew(self, provider_id: str) -> ProviderSubscription:
        """The provider's period ends: the next one starts, on the item's price."""
        current = self._existing(provider_id)
        length = current.current_period_end - current.current_period_start
        return self._replace(
            provider_id,
            current_period_start=current.current_period_end,
            current_period_end=current.current_period_end + length,
        )

    def decline_payments(self, provider_id: str) -> None:
        """Invoices of this subscription's changes are never paid from now on."""
        self.declining.add(provider_id)

    def require_authentication(self, provider_id: str) -> None:
        """Invoices of this subscription's changes need the customer's authentication from
        now on (Stripe's ``pm_card_authenticationRequired``)."""
        self.authenticating.add(provider_id)

    def pay_pending_update(self, provider_id: str) -> ProviderSubscription:
        """The customer paid the invoice of the update held: it applies."""
        held = self._existing(provider_id)
        assert held.pending_price_id is not None
        return self._replace(
            provider_id,
            price_id=held.pending_price_id,
            pending_price_id=None,
            pending_expires_at=None,
            payment_url=None,
        )

    def expire_pending_update(self, provider_id: str) -> ProviderSubscription:
        """The update held lapsed unpaid."""
        return self._replace(
            provider_id, pending_price_id=None, pending_expires_at=None, payment_url=None
        )

    def delete_subscription(self, provider_id: str) -> None:
        del self.subscriptions[provider_id]

    # -- the port ---------------------------------------------------------------------------

    def create_customer(self, customer: ProviderCustomer, *, idempotency_key: str) -> str:
        def create() -> str:
            customer_id = f"cus_{next(self._ids)}"
            self.customers[customer_id] = customer
            self.customers_created[customer_id] = self._clock.now()
            return customer_id

        result: str = self._call("create_customer", idempotency_key, (customer,), create)
        return result

    def find_customer(self, billing_account_id: str) -> str | None:
        def search() -> str | None:
            # Every customer naming the account is seen; the oldest is taken (as Stripe's).
            naming = [
                customer
                for customer in self._listed_customers()
                if customer.billing_account_id == billing_account_id
            ]
            chosen = oldest_customer(naming)
            return chosen.id if chosen is not None else None

        found: str | None = self._call("find_customer", None, (billing_account_id,), search)
        return found

    def get_customer(self, customer_id: str) -> ProviderCustomerState:
        def read() -> ProviderCustomerState:
            if customer_id in self.deleted_customers:
                return ProviderCustomerState(customer_id, deleted=True, billing_account_id=None)
            customer = self.customers.get(customer_id)
            if customer is None:
                raise gone("account", f"No such customer: '{customer_id}'")
            return ProviderCustomerState(
                customer_id, deleted=False, billing_account_id=customer.billing_account_id
            )

        found: ProviderCustomerState = self._call("get_customer", None, (customer_id,), read)
        return found

    def delete_customer(self, customer_id: str) -> None:
        """Deleted at the provider (its subscriptions are canceled, as Stripe does)."""
        self.customers.pop(customer_id, None)
        self.deleted_customers.add(customer_id)
        for subscription_id, owner in self.subscription_owners.items():
            if owner.customer_id == customer_id and subscription_id in self.subscriptions:
                self._replace(subscription_id, status="canceled")

    def register_webhook_endpoint(
        self, url: str, event_types: Sequence[str], known_ids: set[str]
    ) -> RegisteredEndpoint:
        def register() -> RegisteredEndpoint:
            existing = [id_ for id_, (at, _) in self.webhook_endpoints.items() if at == url]
            known = [id_ for id_ in existing if id_ in known_ids]
            if known:
                self.webhook_endpoints[known[0]] = (url, tuple(event_types))
                return RegisteredEndpoint(known[0], None)
            endpoint_id = f"we_{next(self._ids)}"
            self.webhook_endpoints[endpoint_id] = (url, tuple(event_types))
            for old in existing:
                del self.webhook_endpoints[old]
            return RegisteredEndpoint(endpoint_id, f"whsec_{endpoint_id}", tuple(existing))

        arguments = (url, tuple(event_types), frozenset(known_ids))
        registered: RegisteredEndpoint = self._call(
            "register_webhook_endpoint", None, arguments, register
        )
        return registered

    def create_plan_price(self, plan: ProviderPlan, *, idempotency_key: str) -> ProviderPrice:
        def create() -> ProviderPrice:
            number = next(self._ids)
            price = ProviderPrice(product_id=f"prod_{number}", price_id=f"price_{number}")
            self.prices[price.price_id] = plan
            return price

        price: ProviderPrice = self._call("create_plan_price", idempotency_key, (plan,), create)
        return price

    def create_subscription(
        self,
        customer_id: str,
        price_id: str,
        terms: SubscriptionTerms,
        *,
        metadata: dict[str, str],
        idempotency_key: str,
    ) -> ProviderSubscription:
        def create() -> ProviderSubscription:
            if customer_id not in self.customers:
                raise rejected("customer", f"No such customer: '{customer_id}'")
            self._ensure_price(price_id)
            number = next(self._ids)
            start = self._clock.now()
            subscription = ProviderSubscription(
                id=f"sub_{number}",
                status="trialing" if terms.trial_days else "active",
                item_id=f"si_{number}",
                price_id=price_id,
                current_period_start=start,
                current_period_end=start + timedelta(days=30),
            )
            self.subscriptions[subscription.id] = subscription
            self.subscription_owners[subscription.id] = _Owner(customer_id, dict(metadata), start)
            return subscription

        arguments = (customer_id, price_id, terms, dict(metadata))
        created: ProviderSubscription = self._call(
            "create_subscription", idempotency_key, arguments, create
        )
        return created

    def get_subscription(self, provider_id: str) -> ProviderSubscription:
        def read() -> ProviderSubscription:
            return self._existing(provider_id)

        found: ProviderSubscription = self._call("get_subscription", None, (provider_id,), read)
        return found

    def change_subscription_price(
        self,
        provider_id: str,
        item_id: str,
        price_id: str,
        *,
        proration_behavior: ProrationBehavior,
        idempotency_key: str,
        proration_date: datetime | None = None,
        payment_behavior: PaymentBehavior | None = None,
    ) -> ProviderSubscription:
        def change() -> ProviderSubscription:
            current = self._existing(provider_id)
            if current.status == "canceled":
                raise rejected(
                    "plan", "A canceled subscription can only update its cancellation_details."
                )
            if current.item_id != item_id:
                raise rejected("plan", f"No such subscription item: '{item_id}'")
            self._ensure_price(price_id)
            invoiced_now = proration_behavior == "always_invoice"
            if invoiced_now and provider_id in self.authenticating:
                if payment_behavior == "error_if_incomplete":
                    raise PaymentActionRequired(
                        "the customer must authenticate the payment of the change's invoice",
                        details=[error_info("PAYMENT_ACTION_REQUIRED")],
                    )
                if payment_behavior == "pending_if_incomplete":
                    return self._replace(
                        provider_id,
                        pending_price_id=price_id,
                        pending_expires_at=self._clock.now() + PENDING_UPDATE_LIFETIME,
                        payment_url=f"https://invoice.stripe.test/{idempotency_key}",
                    )
            if invoiced_now and provider_id in self.declining:
                if payment_behavior == "error_if_incomplete":
                    raise PaymentFailed(
                        "the billing provider could not collect the change's invoice: "
                        "Your card was declined.",
                        details=[error_info("PAYMENT_FAILED", decline_code="generic_decline")],
                    )
                return self._replace(provider_id, price_id=price_id, status="past_due")
            return self._replace(provider_id, price_id=price_id)

        arguments = (
            provider_id,
            item_id,
            price_id,
            proration_behavior,
            proration_date,
            payment_behavior,
        )
        changed: ProviderSubscription = self._call(
            "change_subscription_price", idempotency_key, arguments, change
        )
        return changed

    def preview_change(
        self,
        provider_id: str,
        item_id: str,
        price_id: str,
        *,
        proration_behavior: ProrationBehavior,
        proration_date: datetime,
    ) -> ChangePreview:
        def preview() -> ChangePreview:
            current = self._existing(provider_id, named_by_a_parameter=True)
            self._ensure_price(price_id)
            start, end = current.current_period_start, current.current_period_end
            share = (end - proration_date) / (end - start)
            old, new = self.prices[current.price_id], self.prices[price_id]
            lines = (
                PreviewLine(
                    f"Unused time on {old.title}", -round(old.amount * share), True,
                    proration_date, end, old.plan_id,
                ),
                PreviewLine(
                    f"Remaining time on {new.title}", round(new.amount * share), True,
                    proration_date, end, new.plan_id,
                ),
            )  # fmt: skip
            total = sum(line.amount for line in lines)
            return ChangePreview(new.currency, max(total, 0), total, total, lines)

        arguments = (provider_id, item_id, price_id, proration_behavior, proration_date)
        previewed: ChangePreview = self._call("preview_change", None, arguments, preview)
        return previewed

    # -- inside -----------------------------------------------------------------------------

    def _existing(
        self, provider_id: str, *, named_by_a_parameter: bool = False
    ) -> ProviderSubscription:
        """The subscription ``provider_id``; missing, it is gone when the request addresses it
        (a read, an update), and refused like any parameter when a parameter names it (the
        invoice preview's ``subscription``), as Stripe answers."""
        found = self.subscriptions.get(provider_id)
        if found is None:
            missing = rejected if named_by_a_parameter else gone
            raise missing("plan", f"No such subscription: '{provider_id}'")
        return self._renewed(found)

    def _renewed(self, found: ProviderSubscription) -> ProviderSubscription:
        """The subscription as the provider has it now: its periods roll over with the clock
        (periods of one length), and it ends at ``cancel_at``."""
        now = self._clock.now()
        if found.state.is_over or found.current_period_end > now:
            return found
        start, end = found.current_period_start, found.current_period_end
        while end <= now and (found.cancel_at is None or end < found.cancel_at):
            start, end = end, end + (end - start)
        ended = found.cancel_at is not None and found.cancel_at <= now
        return self._replace(
            found.id,
            current_period_start=start,
            current_period_end=end,
            status="canceled"
            if ended
            else ("active" if found.status == "trialing" else found.status),
        )

    def _ensure_price(self, price_id: str) -> None:
        if price_id not in self.prices:
            raise rejected("plan", f"No such price: '{price_id}'")
        if price_id in self.inactive_prices:
            raise rejected("plan", f"The price specified is inactive: '{price_id}'")

    def _replace(self, provider_id: str, **changes: Any) -> ProviderSubscription:
        current = self.subscriptions.get(provider_id)
        if current is None:
            raise gone("plan", f"No such subscription: '{provider_id}'")
        values = {**current.__dict__, **changes}
        updated = ProviderSubscription(**values)
        self.subscriptions[provider_id] = updated
        return updated

    # -- drift (issue 21): the provider's lists ---------------------------------------------

    def list_customers(self) -> list[RemoteCustomer]:
        listed: list[RemoteCustomer] = self._call(
            "list_customers", None, (), self._listed_customers
        )
        return listed

    def list_subscriptions(self, customer_id: str | None = None) -> list[RemoteSubscription]:
        def listed() -> list[RemoteSubscription]:
            return self._listed_subscriptions(customer_id)

        found: list[RemoteSubscription] = self._call(
            "list_subscriptions", None, (customer_id,), listed
        )
        return found

    def customer_pages(self, after: str | None = None) -> Iterator[ListedPage[RemoteCustomer]]:
        return self._pages("customer_pages", self._listed_customers, after)

    def subscription_pages(
        self, after: str | None = None
    ) -> Iterator[ListedPage[RemoteSubscription]]:
        return self._pages("subscription_pages", lambda: self._listed_subscriptions(None), after)

    def _pages(
        self, operation: str, listed: Callable[[], list[L]], after: str | None
    ) -> Iterator[ListedPage[L]]:
        """The list a page per call (each one recorded as a call of ``operation``), from the
        page after ``after``; a cursor not in the list is gone, as Stripe answers it."""
        while True:

            def page(after: str | None = after) -> ListedPage[L]:
                everything = listed()
                ids = [listed_object.id for listed_object in everything]
                if after is not None and after not in ids:
                    raise gone("starting_after", f"No such object: '{after}'")
                window = everything[ids.index(after) + 1 :] if after is not None else everything
                objects = tuple(window[: self.page_size])
                return ListedPage(
                    objects, objects[-1].id if objects else None, len(window) > self.page_size
                )

            found: ListedPage[L] = self._call(operation, None, (after,), page)
            yield found
            if not found.has_more:
                return
            after = found.after

    def find_subscription(
        self, customer_id: str, subscription_id: str
    ) -> ProviderSubscription | None:
        def find() -> ProviderSubscription | None:
            found = existing_subscription(self._listed_subscriptions(customer_id), subscription_id)
            return found.subscription if found is not None else None

        arguments = (customer_id, subscription_id)
        result: ProviderSubscription | None = self._call("find_subscription", None, arguments, find)
        return result

    def list_invoices(self, provider_subscription_id: str, limit: int) -> list[InvoiceView]:
        found: list[InvoiceView] = self._call(
            "list_invoices",
            None,
            (provider_subscription_id, limit),
            lambda: list(self.invoices.get(provider_subscription_id, []))[:limit],
        )
        return found

    def upcoming_invoice(self, provider_subscription_id: str) -> InvoiceView:
        found: InvoiceView = self._call(
            "upcoming_invoice",
            None,
            (provider_subscription_id,),
            lambda: self.upcoming[provider_subscription_id],
        )
        return found

    def list_billed_invoices(
        self, provider_subscription_id: str, limit: int
    ) -> list[BilledInvoice]:
        found: list[BilledInvoice] = self._call(
            "list_billed_invoices",
            None,
            (provider_subscription_id, limit),
            lambda: list(self.billed_invoices.get(provider_subscription_id, []))[:limit],
        )
        return found

    def add_customer(self, customer: ProviderCustomer, *, created: datetime | None = None) -> str:
        """A customer made at the provider directly (by another attempt, or by hand)."""
        customer_id = f"cus_{next(self._ids)}"
        self.customers[customer_id] = customer
        self.customers_created[customer_id] = created or self._clock.now()
        return customer_id

    def _listed_customers(self) -> list[RemoteCustomer]:
        """Newest first, as Stripe lists them."""
        listed = [
            RemoteCustomer(
                customer_id,
                self.customers_created.get(customer_id, T0),
                dict(customer.metadata),
            )
            for customer_id, customer in self.customers.items()
        ]
        return sorted(listed, key=lambda customer: customer.created, reverse=True)

    def _listed_subscriptions(self, customer_id: str | None) -> list[RemoteSubscription]:
        listed = []
        for provider_id in self.subscriptions:
            owner = self.subscription_owners.get(provider_id, _Owner("", {}, T0))
            if customer_id is None or owner.customer_id == customer_id:
                listed.append(
                    RemoteSubscription(
                        self._existing(provider_id),
                        owner.customer_id,
                        owner.created,
                        dict(owner.metadata),
                    )
                )
        return sorted(listed, key=lambda remote: remote.created, reverse=True)


@dataclass(frozen=True)
class _Owner:
    """What the fake keeps of a subscription beside our view of it."""

    customer_id: str
    metadata: dict[str, str]
    created: datetime

"""Ports of the billing provider (Stripe): the calls the handlers make to it, and the billing
settings they make them with, as Protocols.

The handlers never see the provider's SDK: what it answers comes back as domain values and its
failures as domain errors, so that the runner tells what is worth retrying without knowing
who the provider is. The adapter in ``worker/`` implements the provider
(``adapters/provider/stripe_adapter.py``, one module per family of operations), the handlers are
given it recorded (``application/provider_calls.py``, one rule per method), and the settings
implement the policy (``worker/bootstrap.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from domain.billing.accounts import ProviderCustomer
from domain.drift.report import RemoteCustomer, RemoteSubscription
from domain.operations.console import InvoiceView
from domain.provider.pages import ListedPage
from domain.provider.sync import ProviderCustomerState, RegisteredEndpoint
from domain.subscriptions.change_previews import ChangePreview
from domain.subscriptions.plans import ProviderPlan, ProviderPrice
from domain.subscriptions.proration import PaymentBehavior, ProrationBehavior
from domain.subscriptions.renewals import BilledInvoice
from domain.subscriptions.subscription import ProviderSubscription, SubscriptionTerms


class BillingProvider(Protocol):
    """The external billing provider (Stripe).

    Failures are raised as domain errors: :class:`domain.errors.TransientError` for what is
    worth retrying (connection errors, 429, 5xx, lock timeouts), a
    :class:`domain.errors.CommandError` for what is not (a 4xx: the request itself is wrong).
    An object a request addresses that the provider does not hold (a read or a write of a
    subscription deleted there) is :class:`domain.errors.GoneAtProvider`; every other refusal
    is a plain :class:`domain.errors.InvalidArgument`.
    """

    @property
    def name(self) -> str: ...

    def create_customer(self, customer: ProviderCustomer, *, idempotency_key: str) -> str:
        """Create the customer; returns the provider's id. One customer per key."""
        ...

    def find_customer(self, billing_account_id: str) -> str | None:
        """The id of a customer created earlier for this billing account, if any."""
        ...

    def get_customer(self, customer_id: str) -> ProviderCustomerState:
        """The customer as the provider holds it (deleted ones too)."""
        ...

    def register_webhook_endpoint(
        self, url: str, event_types: Sequence[str], known_ids: set[str]
    ) -> RegisteredEndpoint:
        """Create our webhook endpoint for ``url`` (at the pinned API version, for
        ``event_types``), or update the one there is among ``known_ids`` (whose secrets we
        keep); an endpoint of that URL whose secret we do not know is replaced."""
        ...

    def create_plan_price(self, plan: ProviderPlan, *, idempotency_key: str) -> ProviderPrice:
        """Create the plan's product and its recurring price (one of each per key)."""
        ...

    def create_subscription(
        self,
        customer_id: str,
        price_id: str,
        terms: SubscriptionTerms,
        *,
        metadata: dict[str, str],
        idempotency_key: str,
    ) -> ProviderSubscription:
        """Subscribe the customer to the price (one subscription per key)."""
        ...

    def get_subscription(self, provider_id: str) -> ProviderSubscription: ...

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
        """Replace the price of the subscription's item (the item and its id stay),
        prorated as of ``proration_date`` (default: when the provider receives it).
        ``payment_behavior`` ``error_if_incomplete`` makes nothing if the invoice the change
        creates cannot be paid: :class:`domain.errors.PaymentFailed` is raised."""
        ...

    def preview_change(
        self,
        provider_id: str,
        item_id: str,
        price_id: str,
        *,
        proration_behavior: ProrationBehavior,
        proration_date: datetime,
    ) -> ChangePreview:
        """What replacing the item's price at ``proration_date`` would invoice (changes
        nothing)."""
        ...

    # What the provider has, read in lists (they see every write at once; search lags).

    def list_customers(self) -> list[RemoteCustomer]:
        """Every customer the provider has (deleted ones are gone), page after page."""
        ...

    def list_subscriptions(self, customer_id: str | None = None) -> list[RemoteSubscription]:
        """Every subscription whatever its status (canceled ones included), of one customer
        if ``customer_id`` is given, page after page."""
        ...

    def customer_pages(self, after: str | None = None) -> Iterator[ListedPage[RemoteCustomer]]:
        """The customers :meth:`list_customers` lists, a page at a time, from the page after
        the customer ``after`` (``None``: from the first). Each page is one read, made when
        the iterator is advanced: a caller holds one page at a time and stops when it likes.
        A cursor the provider no longer has (a customer deleted since) is refused
        (a :class:`domain.errors.CommandError`)."""
        ...

    def subscription_pages(
        self, after: str | None = None
    ) -> Iterator[ListedPage[RemoteSubscription]]:
        """The subscriptions :meth:`list_subscriptions` lists (whatever their status), a page
        at a time, from the page after the subscription ``after`` (``None``: from the
        first); one read per page, made when the iterator is advanced."""
        ...

    def find_subscription(
        self, customer_id: str, subscription_id: str
    ) -> ProviderSubscription | None:
        """The customer's subscription an earlier attempt to create our ``subscription_id``
        made (its metadata names it), whatever its status; a live one before one that is
        over, then the oldest (:func:`domain.drift.report.existing_subscription`)."""
        ...

    def list_invoices(self, provider_subscription_id: str, limit: int) -> list[InvoiceView]:
        """Up to ``limit`` of the subscription's invoices, newest first (one read)."""
        ...

    def upcoming_invoice(self, provider_subscription_id: str) -> InvoiceView:
        """The subscription's next invoice as the provider would make it now (its renewal,
        with what is pending), with its lines; nothing changes (one read)."""
        ...

    def list_billed_invoices(
        self, provider_subscription_id: str, limit: int
    ) -> list[BilledInvoice]:
        """Up to ``limit`` of the subscription's invoices with their lines, newest first (one
        read): what the money check of the drift report compares with our plans."""
        ...


class BillingPolicy(Protocol):
    @property
    def default_currency(self) -> str: ...

    @property
    def provider_idempotency_window(self) -> timedelta:
        """How long the provider remembers an idempotency key (Stripe: 24 hours), less a
        safety margin; a registration older than this searches before creating."""
        ...

    @property
    def proration_behavior(self) -> ProrationBehavior:
        """How an immediate plan change is prorated (changes at a period end never are)."""
        ...

    @property
    def period_end_lead(self) -> timedelta:
        """How long before its boundary a change at the period's end is made at the provider
        (so that the renewal bills the new price); longer than a period-end burst takes."""
        ...

    @property
    def staged_change_guard(self) -> timedelta:
        """How long before its boundary a change staged at the provider can no longer be
        withdrawn (a cancel, a replacement, an immediate change): the withdrawal must reach
        the provider before it renews."""
        ...

    @property
    def change_lease(self) -> timedelta:
        """How long a claimed plan change is left to its worker before a sweep takes it
        again (a worker killed mid-change)."""
        ...

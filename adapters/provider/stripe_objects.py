"""Stripe's objects read into our values: a subscription, a customer, an invoice, a change's
preview. Reading them needs no SDK, so it lives apart from the adapter's operations
(``adapters/provider/stripe_customers.py`` and its siblings), which call Stripe and hand its
objects here.

The protocols name just the fields read, as the SDK types them: mypy checks the SDK's objects
the adapter passes against them, so the SDK's types (those of the pinned API version) still
vouch for every field read here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Protocol

from domain.billing.discounts import ProviderDiscount
from domain.drift.report import RemoteCustomer, RemoteSubscription
from domain.errors import Internal, error_info
from domain.operations.console import InvoiceLineView, InvoiceView
from domain.subscriptions.change_previews import ChangePreview, PreviewLine
from domain.subscriptions.renewals import BilledInvoice
from domain.subscriptions.subscription import ProviderSubscription


class _Metadata(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


class _Identified(Protocol):
    @property
    def id(self) -> str: ...


class StripeCustomer(Protocol):
    """What is read of a ``stripe.Customer``."""

    @property
    def id(self) -> str: ...
    @property
    def created(self) -> int: ...
    @property
    def metadata(self) -> _Metadata | None: ...


class _LinePeriod(Protocol):
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


class _LineItemDetails(Protocol):
    @property
    def proration(self) -> bool: ...


class _LineParent(Protocol):
    @property
    def subscription_item_details(self) -> _LineItemDetails | None: ...


class _LinePriceDetails(Protocol):
    @property
    def price(self) -> str | _Identified: ...


class _LinePricing(Protocol):
    @property
    def price_details(self) -> _LinePriceDetails | None: ...


class _DiscountAmount(Protocol):
    @property
    def amount(self) -> int: ...


class _InvoiceLine(Protocol):
    @property
    def description(self) -> str | None: ...
    @property
    def amount(self) -> int: ...
    @property
    def parent(self) -> _LineParent | None: ...
    @property
    def pricing(self) -> _LinePricing | None: ...
    @property
    def period(self) -> _LinePeriod: ...
    @property
    def discount_amounts(self) -> Sequence[_DiscountAmount] | None: ...


class _InvoiceLines(Protocol):
    @property
    def data(self) -> Sequence[_InvoiceLine]: ...


class StripeInvoice(Protocol):
    """What is read of a ``stripe.Invoice`` (a preview's)."""

    @property
    def currency(self) -> str: ...
    @property
    def amount_due(self) -> int: ...
    @property
    def subtotal(self) -> int: ...
    @property
    def total(self) -> int: ...
    @property
    def lines(self) -> _InvoiceLines: ...
    @property
    def total_discount_amounts(self) -> Sequence[_DiscountAmount] | None: ...
    @property
    def starting_balance(self) -> int | None: ...
    def to_dict(self) -> dict[str, Any]: ...


def customer_of(customer: StripeCustomer) -> RemoteCustomer:
    metadata = customer.metadata
    return RemoteCustomer(
        id=str(customer.id),
        created=_time(customer.created),
        metadata={str(k): str(v) for k, v in (metadata.to_dict() if metadata else {}).items()},
    )


# A list's page, and a subscription read, made or changed, is read from its JSON
# (``adapters/provider/stripe_requests.py``), not from the SDK's objects, which cost twenty
# times what a page may and as much as the rest of a due change's run: the readers below take
# their fields by key (``customer_of_document`` the same as ``customer_of``, which the provider
# contract, ``tests/integration/test_billing_provider_contract.py``, holds to one answer).


def customer_of_document(document: Mapping[str, Any]) -> RemoteCustomer:
    """A listed customer, from its JSON."""
    return RemoteCustomer(
        id=str(document["id"]),
        created=_time(int(document["created"])),
        metadata=_metadata_of(document.get("metadata")),
    )


def listed_subscription_of_document(document: Mapping[str, Any]) -> RemoteSubscription:
    """A listed subscription, from its JSON."""
    customer = document["customer"]
    return RemoteSubscription(
        subscription=subscription_of_document(document),
        customer_id=str(customer if isinstance(customer, str) else customer["id"]),
        created=_time(int(document["created"])),
        metadata=_metadata_of(document.get("metadata")),
    )


def subscription_of_document(document: Mapping[str, Any]) -> ProviderSubscription:
    """Our view of a subscription of one item, from its JSON. API 2026-10-28.endive keeps the
    current period on the items, not on the subscription."""
    items = document["items"]["data"]
    if not items:
        raise Internal(
            f"stripe subscription {document['id']} has no items",
            details=[error_info("PROVIDER_SUBSCRIPTION_WITHOUT_ITEMS", id=document["id"])],
        )
    item = items[0]
    price = item["price"]
    recurring = price.get("recurring")
    cancel_at = document.get("cancel_at")
    return ProviderSubscription(
        id=str(document["id"]),
        status=str(document["status"]),
        item_id=str(item["id"]),
        price_id=str(price["id"]),
        current_period_start=_time(int(item["current_period_start"])),
        current_period_end=_time(int(item["current_period_end"])),
        billing_cycle_anchor=_time(int(document["billing_cycle_anchor"])),
        interval=str(recurring["interval"]) if recurring else "month",
        interval_count=int(recurring["interval_count"]) if recurring else 1,
        cancel_at=_time(int(cancel_at)) if cancel_at else None,
        unit_amount=_optional_int(price.get("unit_amount")),
        currency=_optional_text(price.get("currency")),
        schedule_id=_id_of(document.get("schedule")),
        discounts=tuple(discount_of(discount) for discount in document.get("discounts") or ()),
        **_pending_update_of(document),
    )


def discount_of(discount: Any) -> ProviderDiscount:
    """A discount from a subscription's ``discounts``: an id, or the object when expanded
    (its coupon's terms when ``source.coupon`` was expanded too, as the adapter asks:
    :data:`adapters.provider.stripe_subscriptions.DISCOUNTS`)."""
    if not isinstance(discount, Mapping):
        return ProviderDiscount(id=str(discount))
    source = discount.get("source")
    coupon = source.get("coupon") if isinstance(source, Mapping) else None
    end = discount.get("end")
    found = ProviderDiscount(
        id=str(discount["id"]),
        coupon_id=coupon if isinstance(coupon, str) else None,
        ends_at=_time(int(end)) if isinstance(end, int) else None,
    )
    if not isinstance(coupon, Mapping):
        return found
    percent_off = coupon.get("percent_off")
    return replace(
        found,
        coupon_id=str(coupon["id"]),
        coupon_name=_optional_text(coupon.get("name")),
        percent_off=Decimal(str(percent_off)) if percent_off is not None else None,
        amount_off=_optional_int(coupon.get("amount_off")),
        currency=_optional_text(coupon.get("currency")),
        duration=_optional_text(coupon.get("duration")),
    )


def _pending_update_of(document: Mapping[str, Any]) -> dict[str, Any]:
    """The update Stripe holds until its invoice is paid (``pending_update``), if any: its
    price, its expiry, and where the customer pays (the latest invoice's hosted page, when
    the answer expanded it)."""
    pending = document.get("pending_update")
    if not isinstance(pending, Mapping):
        return {}
    items = pending.get("subscription_items") or []
    latest = document.get("latest_invoice")
    invoice = latest if isinstance(latest, Mapping) else {}
    expires_at = pending.get("expires_at")
    return {
        "pending_price_id": str(items[0]["price"]["id"]) if items else None,
        "pending_expires_at": _time(int(expires_at)) if expires_at else None,
        "payment_url": _optional_text(invoice.get("hosted_invoice_url")),
    }


def _id_of(reference: Any) -> str | None:
    """The id of an expandable field: its id, or its object's (``None``: unset)."""
    if isinstance(reference, Mapping):
        return str(reference["id"])
    return _optional_text(reference)


def _metadata_of(metadata: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in metadata.items()} if isinstance(metadata, Mapping) else {}


def _optional_text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def invoice_of(document: dict[str, Any], lines: Sequence[PreviewLine] = ()) -> InvoiceView:
    def when(name: str) -> datetime | None:
        value = document.get(name)
        return _time(value) if isinstance(value, int) else None

    return InvoiceView(
        id=str(document["id"]),
        status=str(document.get("status") or ""),
        number=_optional_text(document.get("number")),
        currency=str(document.get("currency") or ""),
        amount_due=int(document.get("amount_due") or 0),
        amount_paid=int(document.get("amount_paid") or 0),
        billing_reason=_optional_text(document.get("billing_reason")),
        created=_time(int(document.get("created") or 0)),
        total=int(document.get("total") or 0),
        credited=credited_on(document),
        total_discount=sum(
            int(amount.get("amount") or 0)
            for amount in document.get("total_discount_amounts") or ()
        ),
        starting_balance=int(document.get("starting_balance") or 0),
        ending_balance=int(document.get("ending_balance") or 0),
        period_start=when("period_start"),
        period_end=when("period_end"),
        lines=[InvoiceLineView(**asdict(line)) for line in lines],
    )


def _optional_int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _time(timestamp: int) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


def preview_of(invoice: StripeInvoice) -> ChangePreview:
    """Our view of a previewed invoice: its totals and lines (a line's price is read from its
    ``pricing`` in API 2026-10-28.endive)."""
    lines = [line_of(line) for line in invoice.lines.data]
    return ChangePreview(
        currency=str(invoice.currency),
        amount_due=int(invoice.amount_due),
        subtotal=int(invoice.subtotal),
        total=int(invoice.total),
        lines=tuple(lines),
        total_discount=_discounted(invoice.total_discount_amounts),
        starting_balance=int(invoice.starting_balance or 0),
    )


def _discounted(amounts: Sequence[_DiscountAmount] | None) -> int:
    return sum(int(amount.amount) for amount in amounts or ())


def line_of(line: _InvoiceLine) -> PreviewLine:
    """One invoice line: its amount, whether it is a proration, its period and its price
    (read from its ``pricing`` in API 2026-10-28.endive)."""
    parent = line.parent
    item_details = parent.subscription_item_details if parent else None
    pricing = line.pricing
    price_details = pricing.price_details if pricing else None
    return PreviewLine(
        description=str(line.description or ""),
        amount=int(line.amount),
        proration=bool(item_details.proration) if item_details else False,
        period_start=_time(line.period.start),
        period_end=_time(line.period.end),
        price_id=str(price_details.price) if price_details else None,
        discount=_discounted(line.discount_amounts),
    )


def billed_invoice_of(invoice: StripeInvoice) -> BilledInvoice:
    """An invoice with its lines (the first page of them, as Stripe embeds them: a renewal of
    one item has one line, and its corrections a few)."""
    document = invoice.to_dict()
    return BilledInvoice(
        id=str(document["id"]),
        status=str(document.get("status") or ""),
        billing_reason=_optional_text(document.get("billing_reason")),
        currency=str(invoice.currency),
        created=_time(int(document.get("created") or 0)),
        lines=tuple(line_of(line) for line in invoice.lines.data),
        credited=credited_on(document),
    )


def credited_on(document: Mapping[str, Any]) -> int:
    """What an invoice's credit notes took back, before and after it was paid."""
    return int(document.get("pre_payment_credit_notes_amount") or 0) + int(
        document.get("post_payment_credit_notes_amount") or 0
    )

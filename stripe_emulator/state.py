"""In-memory data: one store per resource, plus the indexes the endpoints need.

Records are kept in Stripe's JSON shape so that most responses serialise a stored dict as is.
Two exceptions keep related objects live instead of copied: a subscription's items and an
item's price are stored as ids and rendered at response time (see
:mod:`stripe_emulator.objects`), so updating a price shows up on every subscription. Invoices
are stored whole, their lines inline, as Stripe fixes them once finalized.

The store also holds the events recorded (:class:`stripe_emulator.events.EventLog`) and the
webhook endpoints they are delivered to, with their secrets; all of it is in the state file,
and a state file from before any of these existed still loads.

The emulator serves requests on one asyncio thread and handlers never await, so each request's
reads and writes are atomic without locks.
"""

from __future__ import annotations

import heapq
import json
import os
from pathlib import Path
from typing import Any

from stripe_emulator.events import DEFAULT_CAP, EventLog
from stripe_emulator.list_order import ListOrder

Record = dict[str, Any]

STATE_VERSION = 1

# What a failed invoice does next (see payments.py): retried every ``retry_interval_seconds`` of
# emulator time up to ``retries`` times, then its subscription takes ``final_status``.
DEFAULT_DUNNING: Record = {
    "retries": 3,
    "retry_interval_seconds": 3 * 86_400,
    "final_status": "past_due",
}


class Store:
    """All emulated Stripe objects and their indexes, the events recorded and the webhook
    endpoints they are sent to."""

    def __init__(self, event_cap: int = DEFAULT_CAP) -> None:
        self.customers: dict[str, Record] = {}
        # Stripe's list order of customers and of subscriptions, kept beside the dicts so that
        # a list page is found from its cursor without walking every record (list_order.py).
        self.customer_order = ListOrder()
        self.subscription_order = ListOrder()
        self.deleted_customers: set[str] = set()
        self.tax_ids: dict[str, Record] = {}
        self.customer_tax_ids: dict[str, list[str]] = {}
        self.products: dict[str, Record] = {}
        self.prices: dict[str, Record] = {}
        self.price_lookup_keys: dict[str, str] = {}
        self.subscriptions: dict[str, Record] = {}
        self.subscription_items: dict[str, Record] = {}
        self.items_of: dict[str, list[str]] = {}
        # Per subscription: billing anchor and how many periods have elapsed since it, which is
        # what period boundaries are computed from (see clock.add_interval).
        self.billing: dict[str, Record] = {}
        # Invoices (lines inline) in creation order, and each subscription's invoice ids.
        self.invoices: dict[str, Record] = {}
        self.invoices_of: dict[str, list[str]] = {}
        # Invoice items (prorations); a subscription's pending ones wait for its next invoice.
        self.invoice_items: dict[str, Record] = {}
        self.pending_items: dict[str, list[str]] = {}
        # Credit prorations' credited lines: invoice item id -> [invoice id, [line ids]].
        self.item_credits: dict[str, list[Any]] = {}
        # Coupons (deleted ones kept apart: their discounts keep applying), the discounts
        # redeemed from them, and what each discount takes (see discounts.py).
        self.coupons: dict[str, Record] = {}
        self.deleted_coupons: dict[str, Record] = {}
        self.discounts: dict[str, Record] = {}
        self.discount_terms: dict[str, Record] = {}
        # Discounted invoice items: item id -> [gross amount, [[discount, amount]], included].
        self.item_discounts: dict[str, list[Any]] = {}
        # Credit notes (lines inline) in creation order, and each invoice's credit note ids.
        self.credit_notes: dict[str, Record] = {}
        self.credit_notes_of: dict[str, list[str]] = {}
        # Subscription schedules (see schedules.py), in creation order.
        self.subscription_schedules: dict[str, Record] = {}
        # Payments: customers whose payment attempts fail, and the retry rules (dunning).
        self.failing_customers: set[str] = set()
        # Renewal drafts held for their invoice.created's deliveries: invoice id -> event id.
        self.draft_holds: dict[str, str] = {}
        # Customers whose card needs their authentication for every payment (3D Secure).
        self.authenticating_customers: set[str] = set()
        # Where the API was last reached (the hosted invoice pages' address).
        self.public_url = "http://127.0.0.1:12111"
        self.dunning: Record = dict(DEFAULT_DUNNING)
        # Min-heap of (time of the next lifecycle event, subscription or invoice id). Entries can
        # be stale; billing.roll_subscriptions checks each against its object before acting.
        self.timeline: list[tuple[int, str]] = []
        # Webhook endpoints (Stripe's shape) and their signing secrets, kept apart because
        # Stripe shows a secret only in the answer that creates it.
        self.webhook_endpoints: dict[str, Record] = {}
        self.webhook_secrets: dict[str, str] = {}
        # A rolled secret still signing until then: endpoint id -> [old secret, wall-clock end].
        self.webhook_rolled: dict[str, list[Any]] = {}
        self.events = EventLog(self.webhook_endpoints, event_cap)

    def add_customer(self, record: Record) -> None:
        self.customers[record["id"]] = record
        self.customer_order.add(record["id"])

    def remove_customer(self, customer_id: str) -> None:
        del self.customers[customer_id]
        self.customer_order.remove(customer_id)

    def add_subscription(self, record: Record) -> None:
        self.subscriptions[record["id"]] = record
        self.subscription_order.add(record["id"])

    def schedule(self, when: int, object_id: str) -> None:
        heapq.heappush(self.timeline, (when, object_id))

    def add_invoice(self, invoice: Record) -> None:
        self.invoices[invoice["id"]] = invoice
        subscription_id = invoice["parent"]["subscription_details"]["subscription"]
        self.invoices_of.setdefault(subscription_id, []).append(invoice["id"])

    def add_credit_note(self, note: Record) -> None:
        self.credit_notes[note["id"]] = note
        self.credit_notes_of.setdefault(note["invoice"], []).append(note["id"])

    # Persistence ------------------------------------------------------------------------

    def to_json(self) -> Record:
        return {
            "customers": self.customers,
            "deleted_customers": sorted(self.deleted_customers),
            "tax_ids": self.tax_ids,
            "customer_tax_ids": self.customer_tax_ids,
            "products": self.products,
            "prices": self.prices,
            "price_lookup_keys": self.price_lookup_keys,
            "subscriptions": self.subscriptions,
            "subscription_items": self.subscription_items,
            "items_of": self.items_of,
            "billing": self.billing,
            "invoices": self.invoices,
            "invoice_items": self.invoice_items,
            "item_credits": self.item_credits,
            "coupons": self.coupons,
            "deleted_coupons": self.deleted_coupons,
            "discounts": self.discounts,
            "discount_terms": self.discount_terms,
            "item_discounts": self.item_discounts,
            "credit_notes": self.credit_notes,
            "subscription_schedules": self.subscription_schedules,
            "failing_customers": sorted(self.failing_customers),
            "authenticating_customers": sorted(self.authenticating_customers),
            "draft_holds": self.draft_holds,
            "dunning": self.dunning,
            "timeline": self.timeline,
            "webhook_endpoints": self.webhook_endpoints,
            "webhook_secrets": self.webhook_secrets,
            "webhook_rolled": self.webhook_rolled,
            "events": self.events.to_json(),
        }

    @classmethod
    def from_json(cls, data: Record, event_cap: int = DEFAULT_CAP) -> Store:
        store = cls(event_cap)
        store.customers = data["customers"]
        store.customer_order.rebuild(store.customers)
        store.deleted_customers = set(data["deleted_customers"])
        store.tax_ids = data["tax_ids"]
        store.customer_tax_ids = data["customer_tax_ids"]
        store.products = data["products"]
        store.prices = data["prices"]
        store.price_lookup_keys = data["price_lookup_keys"]
        store.subscriptions = data["subscriptions"]
        store.subscription_order.rebuild(store.subscriptions)
        store.subscription_items = data["subscription_items"]
        store.items_of = data["items_of"]
        store.billing = data["billing"]
        # Absent from state files written before invoices were emulated.
        for invoice in data.get("invoices", {}).values():
            store.add_invoice(invoice)
        store.invoice_items = data.get("invoice_items", {})
        for item in store.invoice_items.values():
            if item["invoice"] is None:
                subscription_id = item["parent"]["subscription_details"]["subscription"]
                store.pending_items.setdefault(subscription_id, []).append(item["id"])
        store.item_credits = data.get("item_credits", {})
        # Absent from state files written before coupons were emulated.
        store.coupons = data.get("coupons", {})
        store.deleted_coupons = data.get("deleted_coupons", {})
        store.discounts = data.get("discounts", {})
        store.discount_terms = data.get("discount_terms", {})
        store.item_discounts = data.get("item_discounts", {})
        # Absent from state files written before credit notes were emulated.
        for note in data.get("credit_notes", {}).values():
            store.add_credit_note(note)
        # Absent from state files written before subscription schedules were emulated.
        store.subscription_schedules = data.get("subscription_schedules", {})
        store.failing_customers = set(data.get("failing_customers", []))
        store.authenticating_customers = set(data.get("authenticating_customers", []))
        store.draft_holds = data.get("draft_holds", {})
        store.dunning = data.get("dunning", dict(DEFAULT_DUNNING))
        store.timeline = [(int(when), str(sub)) for when, sub in data["timeline"]]
        heapq.heapify(store.timeline)
        # Absent from state files written before events were emulated.
        store.webhook_endpoints.update(data.get("webhook_endpoints", {}))
        store.webhook_secrets.update(data.get("webhook_secrets", {}))
        store.webhook_rolled.update(data.get("webhook_rolled", {}))
        store.events.load_json(data.get("events", []))
        return store


def save_json(path: Path, document: Record) -> None:
    """Write ``document`` to ``path`` atomically (a crash never leaves half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        json.dump(document, handle, separators=(",", ":"))
        handle.flush()
        os.fsync(handle.fileno())
    temporary.replace(path)


def load_json(path: Path) -> Record:
    with path.open(encoding="utf-8") as handle:
        document: Record = json.load(handle)
    if document.get("version") != STATE_VERSION:
        raise ValueError(f"{path}: unsupported emulator state version {document.get('version')}")
    return document

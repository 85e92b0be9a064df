"""Coupons redeemed into discounts, and what discounts take off a subscription's invoices.

A coupon (:mod:`stripe_emulator.resources.coupons`) takes ``percent_off`` (a decimal, 0 < x <=
100) or ``amount_off`` (in one currency) off, ``once``, ``repeating`` for
``duration_in_months`` or ``forever``. Redeeming it (``discounts[][coupon]`` on a
subscription's create or update) makes a Discount (``di_...``) with ``start`` = now and
``end`` = start + ``duration_in_months`` months for a repeating coupon (else ``null``), and
counts one more ``times_redeemed``. What the discount takes is kept apart
(``Store.discount_terms``), so a deleted coupon's discounts keep applying.

A discount applies to an invoice made at ``t`` when ``start <= t`` and (``end`` is null or
``t < end``). Per line:

* a subscription (cycle) line is discountable: each ``percent_off`` discount takes
  ``round(amount * percent_off / 100)`` (halves away from zero, in decimal arithmetic) of
  what the earlier discounts left; then each ``amount_off`` discount takes its amount once per
  invoice, spread over those lines in proportion to what is left of them (the remainder to the
  last), never more than they sum to;
* a proration takes the ``percent_off`` discounts in effect when the change is made (an
  ``amount_off`` coupon never applies to prorations). A flexible-mode credit gives back what
  its debit was charged: its discount is the share of the debit's discount
  (:mod:`stripe_emulator.debits`). The subscription's
  ``billing_mode.flexible.proration_discounts`` decides how the line shows it: ``itemized``,
  the gross amount with the real ``discount_amounts``; ``included`` (the default, and classic
  mode), the amount net of the discount with ``discount_amounts`` of 0 naming it.

A ``once`` discount is spent by the first invoice that bills a discountable line with an
amount above 0 while it applies: committing that invoice removes it from the subscription.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from stripe_emulator.clock import add_interval
from stripe_emulator.errors import invalid, resource_missing
from stripe_emulator.ids import new_id
from stripe_emulator.invoice_objects import LineSpec
from stripe_emulator.params import UNSET
from stripe_emulator.state import Record, Store


def discount_object(
    discount_id: str, coupon_id: str, subscription: Record, start: int, end: int | None
) -> Record:
    """A Discount with the key set of Stripe's fixture."""
    return {
        "id": discount_id,
        "object": "discount",
        "checkout_session": None,
        "customer": subscription["customer"],
        "customer_account": None,
        "end": end,
        "invoice": None,
        "invoice_item": None,
        "promotion_code": None,
        "source": {"coupon": coupon_id, "type": "coupon"},
        "start": start,
        "subscription": subscription["id"],
        "subscription_item": None,
    }


def deleted_discount(discount: Record) -> Record:
    """What ``DELETE /v1/subscriptions/{id}/discount`` answers."""
    gone = {key: value for key, value in discount.items() if key != "end"}
    gone["deleted"] = True
    return gone


def coupon_valid(coupon: Record) -> bool:
    limit = coupon["max_redemptions"]
    return limit is None or coupon["times_redeemed"] < limit


# Redeeming ---------------------------------------------------------------------------------------


def resolve(
    store: Store, subscription: Record | None, wanted: Any, currency: str, now: int
) -> list[tuple[str, str | None]]:
    """Check a ``discounts`` parameter: ``[(coupon id, None)]`` to redeem or ``[(coupon id,
    discount id)]`` to keep; ``UNSET`` (``""``) is no discount. Nothing is changed."""
    if wanted is UNSET:
        return []
    current = set(subscription["discounts"]) if subscription is not None else set()
    resolved: list[tuple[str, str | None]] = []
    for index, entry in enumerate(wanted):
        param = f"discounts[{index}]"
        given = [key for key in ("coupon", "discount") if key in entry]
        if len(given) != 1:
            raise invalid(f"You must specify exactly one of coupon or discount in {param}.", param)
        if "discount" in entry:
            discount_id = entry["discount"]
            if discount_id not in current:
                raise resource_missing("discount", discount_id, f"{param}[discount]")
            coupon_id = store.discounts[discount_id]["source"]["coupon"]
            resolved.append((coupon_id, discount_id))
            continue
        coupon_id = entry["coupon"]
        coupon = store.coupons.get(coupon_id)
        if coupon is None:
            raise resource_missing("coupon", coupon_id, f"{param}[coupon]")
        if not coupon_valid(coupon):
            raise invalid(f"Coupon is no longer valid: {coupon_id}", f"{param}[coupon]")
        if coupon["amount_off"] is not None and coupon["currency"] != currency:
            raise invalid(
                f"The coupon {coupon_id} is in {coupon['currency']}, but this subscription is "
                f"billed in {currency}: an amount_off coupon must be in the subscription's "
                "currency.",
                f"{param}[coupon]",
            )
        resolved.append((coupon_id, None))
    if len({coupon for coupon, _ in resolved}) < len(resolved):
        raise invalid("You cannot apply the same coupon more than once.", "discounts")
    return resolved


def redeem(
    store: Store, subscription: Record, resolved: list[tuple[str, str | None]], now: int
) -> tuple[list[str], list[str]]:
    """Set the subscription's discounts to ``resolved`` (:func:`resolve`): new discounts for
    coupons, kept ones as they are. Returns what :func:`undo` needs: the discounts it had and
    the ones made."""
    previous = list(subscription.get("discounts") or ())
    made: list[str] = []
    ids: list[str] = []
    for coupon_id, discount_id in resolved:
        if discount_id is None:
            coupon = store.coupons[coupon_id]
            discount_id = new_id("di")
            end = None
            if coupon["duration"] == "repeating":
                end = add_interval(now, "month", coupon["duration_in_months"])
            store.discounts[discount_id] = discount_object(
                discount_id, coupon_id, subscription, now, end
            )
            percent = coupon["percent_off"]
            store.discount_terms[discount_id] = {
                "percent_off": None if percent is None else str(percent),
                "amount_off": coupon["amount_off"],
                "duration": coupon["duration"],
            }
            coupon["times_redeemed"] += 1
            coupon["valid"] = coupon_valid(coupon)
            made.append(discount_id)
        ids.append(discount_id)
    subscription["discounts"] = ids
    return previous, made


def undo(store: Store, subscription: Record, redeemed: tuple[list[str], list[str]]) -> None:
    """Take back a :func:`redeem` (an update refused after it)."""
    previous, made = redeemed
    for discount_id in made:
        coupon_id = store.discounts.pop(discount_id)["source"]["coupon"]
        del store.discount_terms[discount_id]
        coupon = store.coupons.get(coupon_id) or store.deleted_coupons.get(coupon_id)
        if coupon is not None:
            coupon["times_redeemed"] -= 1
            coupon["valid"] = coupon_valid(coupon) and coupon_id in store.coupons
    subscription["discounts"] = previous


# Billing ---------------------------------------------------------------------------------------


def applies(store: Store, discount_id: str, at: int) -> bool:
    discount = store.discounts[discount_id]
    end = discount["end"]
    return bool(discount["start"] <= at and (end is None or at < end))


def _active(store: Store, subscription: Record, at: int) -> list[tuple[str, Record]]:
    return [
        (discount_id, store.discount_terms[discount_id])
        for discount_id in subscription.get("discounts") or ()
        if applies(store, discount_id, at)
    ]


def percent_of(amount: int, percent: str) -> int:
    """``amount * percent / 100`` rounded to the minor unit, halves away from zero."""
    exact = Decimal(amount) * Decimal(percent) / 100
    return int(exact.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def itemized(subscription: Record) -> bool:
    """Whether the subscription's prorations show their discounts itemized."""
    flexible = (subscription.get("billing_mode") or {}).get("flexible") or {}
    return bool(flexible.get("proration_discounts") == "itemized")


def _take_percents(spec: LineSpec, terms: Sequence[tuple[str, Record]]) -> None:
    left = spec.amount - spec.discounted
    for discount_id, term in terms:
        if term["percent_off"] is None:
            continue
        taken = percent_of(left, term["percent_off"])
        if taken:
            spec.discounts.append([discount_id, taken])
            left -= taken


def on_prorations(store: Store, subscription: Record, specs: Sequence[LineSpec], at: int) -> None:
    """The discounts of new proration lines (see the module docstring)."""
    included = not itemized(subscription)
    terms = _active(store, subscription, at)
    for spec in specs:
        spec.included = included
        if spec.consumes is None:  # a flexible credit's discounts come from its debit
            _take_percents(spec, terms)


def on_invoice(store: Store, subscription: Record, specs: Sequence[LineSpec], at: int) -> list[str]:
    """Discount the subscription (cycle) lines of an invoice made at ``at``; return the
    ``once`` discounts it spends."""
    terms = _active(store, subscription, at)
    cycle = [spec for spec in specs if not spec.proration and spec.amount > 0]
    if not terms or not cycle:
        return []
    for spec in cycle:
        _take_percents(spec, terms)
    for discount_id, term in terms:
        if term["amount_off"] is not None:
            _spread(cycle, discount_id, term["amount_off"])
    return [discount_id for discount_id, term in terms if term["duration"] == "once"]


def _spread(specs: Sequence[LineSpec], discount_id: str, amount_off: int) -> None:
    """``amount_off`` over ``specs`` in proportion to what is left of each (the rest to the
    last), at most all of it."""
    left = [max(spec.amount - spec.discounted, 0) for spec in specs]
    whole = sum(left)
    budget = min(amount_off, whole)
    if budget <= 0:
        return
    given = 0
    last = len(specs) - 1
    for index, spec in enumerate(specs):
        share = budget - given if index == last else budget * left[index] // whole
        share = min(share, left[index])
        given += share
        if share:
            spec.discounts.append([discount_id, share])


def spend(subscription: Record, spent: Sequence[str]) -> None:
    """An invoice used up the ``once`` discounts ``spent``: Stripe removes them."""
    if spent and any(discount_id in spent for discount_id in subscription["discounts"]):
        subscription["discounts"] = [d for d in subscription["discounts"] if d not in spent]

"""Helpers for the emulator tests: running emulator processes, clients, real-Stripe cleanup."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import stripe  # noqa: TID251 - these tests exercise the emulator through the real SDK

from stripe_emulator import EmulatorAdmin
from tests.support.emulator import EMULATOR_KEY as EMULATOR_KEY
from tests.support.emulator import EmulatorProcess as EmulatorProcess
from tests.support.emulator import running_emulator as running_emulator
from tests.support.emulator import start_emulator as start_emulator
from worker.local.embedded import free_port as free_port

ROOT = Path(__file__).resolve().parents[2]
SECOND_KEY = "sk_test_emulator_second_key"

T = TypeVar("T")


def sdk_client(
    url: str,
    api_key: str = EMULATOR_KEY,
    *,
    retries: int = 0,
    timeout: float | None = None,
) -> stripe.StripeClient:
    """A StripeClient pointed at an emulator, as the application would build one."""
    http_client = stripe.RequestsClient(timeout=timeout) if timeout is not None else None
    return stripe.StripeClient(
        api_key,
        base_addresses={"api": url},
        max_network_retries=retries,
        http_client=http_client,
    )


def unique(prefix: str = "t") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


@dataclass
class StripeTarget:
    """Where a contract test runs: the emulator, or real Stripe test mode."""

    name: str
    client: stripe.StripeClient
    admin: EmulatorAdmin | None
    customers: list[str] = field(default_factory=list)
    products: list[str] = field(default_factory=list)
    prices: list[str] = field(default_factory=list)
    clocks: list[str] = field(default_factory=list)
    webhook_endpoints: list[str] = field(default_factory=list)
    coupons: list[str] = field(default_factory=list)

    @property
    def is_emulator(self) -> bool:
        return self.admin is not None

    def eventually(self, probe: Callable[[], T], done: Callable[[T], bool]) -> T:
        """``probe()`` until ``done``: real Stripe's search index lags writes by up to a minute."""
        deadline = time.monotonic() + (0 if self.is_emulator else 90)
        while True:
            result = probe()
            if done(result) or time.monotonic() >= deadline:
                return result
            time.sleep(2)

    def cleanup(self) -> None:
        """Remove what a test created on real Stripe (the emulator is simply reset)."""
        if self.is_emulator:
            return
        for endpoint in self.webhook_endpoints:
            with contextlib.suppress(stripe.StripeError):
                self.client.v1.webhook_endpoints.delete(endpoint)
        for clock in self.clocks:  # deleting a test clock deletes its customers too
            with contextlib.suppress(stripe.StripeError):
                self.client.v1.test_helpers.test_clocks.delete(clock)
        for customer in self.customers:
            with contextlib.suppress(stripe.StripeError):
                self.client.v1.customers.delete(customer)  # also cancels its subscriptions
        for coupon in self.coupons:
            with contextlib.suppress(stripe.StripeError):
                self.client.v1.coupons.delete(coupon)
        for price in self.prices:
            with contextlib.suppress(stripe.StripeError):
                self.client.v1.prices.update(price, params={"active": False})
        for product in self.products:
            with contextlib.suppress(stripe.StripeError):
                self.client.v1.products.update(product, params={"active": False})

    # Creation helpers that remember what to clean up.

    def customer(self, **params: object) -> stripe.Customer:
        customer = self.client.v1.customers.create(params=params)  # type: ignore[arg-type]
        self.customers.append(customer.id)
        return customer

    def product(self, **params: object) -> stripe.Product:
        params.setdefault("name", unique("product"))
        product = self.client.v1.products.create(params=params)  # type: ignore[arg-type]
        self.products.append(product.id)
        return product

    def price(self, **params: object) -> stripe.Price:
        params.setdefault("currency", "usd")
        params.setdefault("unit_amount", 1500)
        if "product" not in params and "product_data" not in params:
            params["product"] = self.product().id
        price = self.client.v1.prices.create(params=params)  # type: ignore[arg-type]
        self.prices.append(price.id)
        self.products.append(price.product if isinstance(price.product, str) else price.product.id)
        return price

    def coupon(self, **params: object) -> stripe.Coupon:
        coupon = self.client.v1.coupons.create(params=params)  # type: ignore[arg-type]
        self.coupons.append(coupon.id)
        return coupon

    def webhook_endpoint(self, **params: object) -> stripe.WebhookEndpoint:
        endpoint = self.client.v1.webhook_endpoints.create(params=params)  # type: ignore[arg-type]
        self.webhook_endpoints.append(endpoint.id)
        return endpoint

    def events_about(self, object_id: str, *types: str) -> list[stripe.Event]:
        """The recent events (newest first) whose ``data.object`` is ``object_id``, of ``types``
        if given."""
        params: dict[str, object] = {"limit": 100}
        if types:
            params["types"] = list(types)
        listed = self.client.v1.events.list(params=params)  # type: ignore[arg-type]
        return [
            event for event in listed.data if event.data.object.to_dict().get("id") == object_id
        ]

    # Time and payments: the emulator's admin API, or a test clock and test cards on Stripe.

    def billing_customer(self, **params: object) -> stripe.Customer:
        """A customer who pays and whose time can be moved (:meth:`advance`).

        On real Stripe it lives on a test clock of its own (frozen at creation) with
        ``pm_card_visa`` as its default payment method, so that ``charge_automatically``
        subscriptions are paid; the emulator needs neither.
        """
        if self.is_emulator:
            return self.customer(**params)
        clock = self.client.v1.test_helpers.test_clocks.create(
            params={"frozen_time": int(time.time()), "name": unique("clock")}
        )
        self.clocks.append(clock.id)
        customer = self.customer(test_clock=clock.id, **params)
        self._default_card(customer.id, "pm_card_visa")
        return customer

    def _default_card(self, customer_id: str, test_card: str) -> None:
        card = self.client.v1.payment_methods.attach(test_card, params={"customer": customer_id})
        self.client.v1.customers.update(
            customer_id, params={"invoice_settings": {"default_payment_method": card.id}}
        )

    def _clock(self, customer_id: str) -> str:
        clock = self.client.v1.customers.retrieve(customer_id).test_clock
        if clock is None:
            raise AssertionError(f"{customer_id} is not on a test clock: use billing_customer()")
        return clock if isinstance(clock, str) else clock.id

    def now(self, customer_id: str) -> int:
        """The customer's time: the emulator clock, or its test clock's frozen time."""
        if self.admin is not None:
            return self.admin.now()
        return self.client.v1.test_helpers.test_clocks.retrieve(
            self._clock(customer_id)
        ).frozen_time

    def advance(self, customer_id: str, seconds: int) -> int:
        """Move the customer's time forward and wait until Stripe has caught up with it."""
        if self.admin is not None:
            return self.admin.advance_clock(seconds)
        clocks = self.client.v1.test_helpers.test_clocks
        clock_id = self._clock(customer_id)
        target = clocks.retrieve(clock_id).frozen_time + seconds
        clocks.advance(clock_id, params={"frozen_time": target})
        deadline = time.monotonic() + 180
        while clocks.retrieve(clock_id).status != "ready":
            if time.monotonic() > deadline:
                raise TimeoutError(f"test clock {clock_id} still advancing after 3 min")
            time.sleep(2)
        return target

    def make_payments_fail(self, customer_id: str) -> None:
        """Later charges of the customer are declined (retries included)."""
        if self.admin is not None:
            self.admin.fail_payments(customer_id)
        else:  # attaching succeeds, charging fails
            self._default_card(customer_id, "pm_card_chargeCustomerFail")

    def make_payments_require_authentication(self, customer_id: str) -> None:
        """Later charges of the customer need its authentication (3D Secure): Stripe's test
        card ``pm_card_authenticationRequired`` as its default payment method."""
        if self.admin is not None:
            self.admin.require_authentication(customer_id)
        else:
            self._default_card(customer_id, "pm_card_authenticationRequired")

    def make_payments_succeed(self, customer_id: str) -> None:
        """Charges succeed again and the customer's open automatic invoices are paid now."""
        if self.admin is not None:
            self.admin.succeed_payments(customer_id)
            return
        self._default_card(customer_id, "pm_card_visa")
        invoices = self.client.v1.invoices.list(params={"customer": customer_id, "status": "open"})
        for invoice in reversed(invoices.data):
            if invoice.collection_method == "charge_automatically" and invoice.id is not None:
                self.client.v1.invoices.pay(invoice.id)


def real_stripe_key() -> str | None:
    return os.environ.get("STRIPE_TEST_API_KEY") or None

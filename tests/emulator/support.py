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
from tests.support.emulator import free_port as free_port
from tests.support.emulator import running_emulator as running_emulator
from tests.support.emulator import start_emulator as start_emulator

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
        for customer in self.customers:
            with contextlib.suppress(stripe.StripeError):
                self.client.v1.customers.delete(customer)  # also cancels its subscriptions
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


def real_stripe_key() -> str | None:
    return os.environ.get("STRIPE_TEST_API_KEY") or None
